// Package emulator plays KubeVirt's virt-api, virt-controller and virt-handler
// against a real kube-apiserver, so that tether's real client code (informers,
// LISTs, the volume subresources, RBAC) can be exercised without KubeVirt,
// without nodes and without a container runtime.
//
// It must never be pointed at a production cluster: it creates and deletes
// VMIs, pods and Nodes as it pleases and answers KubeVirt's aggregated API.
//
// # What runs where
//
//   - CRDs for VirtualMachine, VirtualMachineInstance,
//     VirtualMachineInstanceMigration, KubeVirt (kubevirt.io/v1) and DataVolume
//     (cdi.kubevirt.io/v1beta1) are installed by package crds.
//   - The aggregated API v1.subresources.kubevirt.io is served on a TLS
//     listener on loopback, behind an APIService whose Service is of type
//     ExternalName (localhost). The apiserver authenticates and authorizes the
//     caller (RBAC on virtualmachines/addvolume and friends in group
//     subresources.kubevirt.io, verb update) and proxies the call; the emulator
//     accepts only clients whose certificate chains to the requestheader client
//     CA of kube-system/extension-apiserver-authentication.
//   - A level-based controller keeps VMIs, virt-launcher pods, hot-plug
//     attachment pods, VMI status and migrations in step with the specs.
//     Watch events only enqueue; VMs, VMIs and migrations are read live,
//     pods and PVCs from informer caches guarded by expectations of the
//     emulator's own writes. Changes converge in about 100 ms.
//   - Stop ends the server and the controller and leaves cluster objects as
//     they are; Unregister removes the APIService and Service first when the
//     cluster outlives the emulator (the command does this on SIGTERM).
//
// # Volume subresources (pkg/virt-api/rest/volumes.go, KubeVirt v1.9.0)
//
// Feature gates are read from the KubeVirt object (default kubevirt/kubevirt)
// on every request; as in KubeVirt, its configuration counts only once its
// status.phase is set (the emulator sets Deployed). Precedence: listed in
// developerConfiguration.featureGates wins, then disabledFeatureGates, then
// the gate's default. DeclarativeHotplugVolumes is Beta (on unless disabled);
// HotplugVolumes is deprecated (off unless listed).
//
//   - Both gates off: every call is 400 "Enable DeclarativeHotplugVolumes or
//     HotplugVolumes feature gate to use this API.".
//   - Body: AddVolumeOptions needs name, disk and volumeSource;
//     RemoveVolumeOptions needs name (400 otherwise, as upstream). The disk is
//     renamed to the volume name and the PVC/DataVolume source is marked
//     hotpluggable.
//   - VM-level, HotplugVolumes on: the request is appended to
//     status.volumeRequests (a pending add for the same volume is dropped by a
//     remove; a second add, or an add while a remove is pending, is 409). The
//     controller applies it to spec.template, then to the running VMI, then
//     trims it from status.
//   - VM-level, only DeclarativeHotplugVolumes: spec.template is changed
//     directly and the controller syncs hot-pluggable volumes between VM spec
//     and VMI spec (VMI-only hot-plugs of a VM-owned VMI are removed).
//   - VM-level works whether or not the VM runs. It is checked against the VM
//     template: adding a name or a claim/DataVolume that is already there,
//     removing a volume that is not there (matched by name or claim name), or
//     removing one that is not hotpluggable is 409 Conflict with KubeVirt's
//     message.
//   - VMI-level: 404 if the VMI is missing; 400 "VMI ns/name is owned by a VM"
//     for a VM-owned VMI unless HotplugVolumes is on (standalone VMIs are
//     allowed under either gate); 409 "VMI is not running" unless phase
//     Running; then the same checks against the VMI spec.
//   - Success is 202 Accepted with no body. dryRun ["All"] runs every check and
//     a server-side dry-run write and changes nothing.
//   - The write is one JSON patch, as virt-api's: it tests the volumes and
//     disks read (or status.volumeRequests), then replaces them, once. If
//     they changed in between, the API server fails the test and the call is
//     422 Invalid "the server rejected our request due to an error in our
//     request"; it is not retried.
//   - A migrating VMI (status.migrationState set and neither completed nor
//     failed) changes nothing: both routes answer 202 as virt-api does,
//     except the VM route under HotplugVolumes while the VM is ready, which is
//     422 "Cannot handle volume requests while VMI migration is in progress"
//     as KubeVirt's VM validating webhook denies it.
//
// Where the emulator is stricter than KubeVirt (deliberately, and documented
// here): a dryRun value other than "All" is 400 (virt-api would silently do a
// real write). It runs none of KubeVirt's other admission webhooks. Errors
// are metav1.Status bodies.
//
// # Controller
//
//   - A VM whose run strategy is Always or RerunOnFailure (or running: true)
//     gets a VMI of the same name, built from the template, controlled by the
//     VM; Halted (or running: false) deletes it. Manual leaves it alone. VM
//     status gets created, ready, printableStatus and a Ready condition.
//   - A new VMI gets a virt-launcher pod (virt-launcher-<name>-xxxxx, labels
//     kubevirt.io=virt-launcher and kubevirt.io/created-by=<vmi uid>,
//     controlled by the VMI) with one pod volume per VMI volume except those
//     marked hotpluggable, then phase Running on Options.NodeName. As in
//     KubeVirt, a volume is hot-plugged when it is in the VMI spec but not in
//     the launcher pod; so a VM started with hotpluggable volumes in its
//     template gets them through an attachment pod.
//   - All ready hot-plugged volumes of a VMI share one attachment pod
//     (hp-volume-xxxxx, label kubevirt.io=hotplug-disk, controlled by the
//     virt-launcher pod, bound to the VMI's node, one PVC volume per hot-plug
//     volume), as in KubeVirt: when the set changes, a new pod is created and
//     the old one deleted. A hot-plug volume is ready when its PVC (the claim,
//     or the DataVolume's name) exists and, if the PVC is owned by a
//     DataVolume, that DataVolume is Succeeded or PendingPopulation.
//   - status.volumeStatus: hot-plugged volumes get hotplugVolume
//     {attachPodName, attachPodUID}, phase Ready, reason VolumeReady and a
//     target (sda, sdb, ...); volumes that are not ready get phase Pending and
//     the reason why; boot volumes get a target (vda, ...) and no hotplugVolume.
//     Removing a volume from the VMI spec removes its status entry and its
//     attachment pod. Pods are marked Running (nothing runs them).
//   - A VirtualMachineInstanceMigration sets the VMI's status.migrationState
//     for Options.MigrationDuration, then completes it, moves the VMI (and new
//     launcher and attachment pods) to the target node and marks the
//     migration Succeeded. The target node is the annotation
//     emulator.tether.dev/target-node on the migration, else
//     Options.TargetNodeName, else Options.NodeName if the VMI is already
//     there. Hot-plug changes wait until the migration ends.
//   - Nodes Options.NodeName and Options.TargetNodeName are created if missing
//     and kept Ready (unless Options.NoNodes).
//   - DataVolumes are not reconciled (no CDI): tests create their PVCs.
//
// # Fault and drift injection
//
// The annotation emulator.tether.dev/paused: "true" on a VM (which covers its
// VMI too), a VMI, a migration or a Node makes the controller leave it alone,
// so a test can put it into any state by hand. Emulator.InjectFaults makes the
// next matching subresource calls fail with a chosen status or hang; the
// command also takes faults from the ConfigMap kubevirt-emulator-faults (key
// "faults", a JSON list of Fault) in the emulator's namespace, which it
// deletes once read.
//
// The KubeVirt object reports status.observedKubeVirtVersion (and
// targetKubeVirtVersion) Options.KubeVirtVersion, default v1.9.0;
// Emulator.SetKubeVirtVersion changes it ("" clears it) and nothing else.
// The annotation emulator.tether.dev/ignore-dry-run: "true" on the KubeVirt
// object (Emulator.SetIgnoreDryRun) plays virt-api before v0.49 (KubeVirt PR
// 6931), whose volume options had no dryRun field: addvolume and
// removevolume drop dryRun unread and really make the change.
package emulator
