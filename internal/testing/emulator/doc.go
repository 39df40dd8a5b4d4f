// Package emulator plays KubeVirt's virt-api, virt-controller and virt-handler
// against a real kube-apiserver, so that tether's real client code (informers,
// LISTs, the volume subresources, RBAC) can be exercised without KubeVirt,
// without nodes and without a container runtime.
//
// It is split by the component it plays:
//
//   - virt-api: package apiserver (the aggregated volume subresources, their
//     authentication, serving certificates, injected faults), with the pure
//     rules of volume requests in package volreq and the feature gates in
//     package gates, which virt-controller reads too;
//   - virt-controller (with the kubelet's part: pods Running and Ready):
//     this package's controller (controller.go, vm.go, vmi.go, volstatus.go,
//     attach.go, pods.go, migration.go, finalizers.go, guards.go);
//   - virt-handler: package internal/testing/virthandler, shared with the
//     world that runs real virt-api and virt-controller.
//
// This package also holds the wiring: Start, Options, the APIService
// registration (register.go), Nodes and the public switches tests use.
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
//     emulator's own writes. A VM starts in a few hundred ms; a hot-plug
//     takes about as long (0.4 s each on a busy two-core machine), an unplug
//     about 0.3 s.
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
// # Controller (virt-controller, kubelet and virt-handler, KubeVirt v1.9.0)
//
// The emulator writes to one VM/VMI name at most once per
// Options.LifecycleStep (default 20ms), so every phase below lasts long
// enough to be seen by a watch and usually by polling.
//
//   - A VM whose run strategy is Always or RerunOnFailure (or running: true)
//     gets a VMI of the same name, built from the template, controlled by the
//     VM; Halted (or running: false) deletes it. Manual leaves it alone. VM
//     status gets created, ready, printableStatus and a Ready condition. A
//     VM adopts an orphan VMI of its name (vm.go:410-425) and then syncs it
//     like its own.
//   - Finalizers: VMs and the VMIs they create carry
//     kubevirt.io/virtualMachineControllerFinalize, every VMI
//     kubevirt.io/foregroundDeleteVirtualMachine (added on the first pass, as
//     virt-api's mutating webhook would on create). A deleted VM first stops
//     its VMI (unless deleted with orphan propagation), then drops its
//     finalizer. A deleted VMI loses its pods, turns Succeeded, then loses
//     its finalizers; until then it is Terminating.
//   - VMI phases: "" → Pending → Scheduling (virt-launcher pod
//     virt-launcher-<name>-xxxxx, labels kubevirt.io=virt-launcher and
//     kubevirt.io/created-by=<vmi uid>, controlled by the VMI, on
//     Options.NodeName) → Scheduled once the pod runs (node, activePods,
//     node label) → Running, set by the node's virt-handler. The launcher pod
//     has one pod volume per VMI volume except those marked hotpluggable; as
//     in KubeVirt, a volume is hot-plugged when it is in the VMI spec but not
//     in the launcher pod, so a VM started with hotpluggable volumes in its
//     template gets them through an attachment pod. A final VMI (Succeeded
//     or Failed) loses its attachment pods (lifecycle.go:78-84).
//   - All ready hot-plugged volumes of a VMI share one attachment pod
//     (hp-volume-xxxxx, label kubevirt.io=hotplug-disk, controlled by the
//     virt-launcher pod, bound to the VMI's node, one PVC volume per hot-plug
//     volume). When the set changes a new pod is created (not while an older
//     one is still Pending); old pods are deleted once none of their removed
//     volumes is Ready or MountedToPod, and the newest running old pod stays
//     as a fallback while the new one is not running
//     (volume-hotplug.go:77-229). A single attachment pod that holds exactly
//     the hot-plug volumes is left alone even while it is being deleted (held
//     by a finalizer): no new pod is made until it is gone
//     (needsHandleHotplug, volume-hotplug.go:41-50). A hot-plug volume is ready when its PVC
//     (the claim, or the DataVolume's name) exists and, if the PVC is owned
//     by a DataVolume, that DataVolume is Succeeded or PendingPopulation. A
//     hot-plug volume whose PVC is missing freezes attachment-pod creation
//     and deletion for the whole VMI (volume-hotplug.go:192-195).
//   - status.volumeStatus, virt-controller's part (storage.go:137-352):
//     without attachment pod a hot-plug volume follows its PVC (missing:
//     Pending/FailedPvcNotFound; Pending: Pending/PVCNotReady; Bound:
//     Bound/PVCNotReady); with one it is AttachedToNode/SuccessfulCreate with
//     hotplugVolume.attachPodName, and attachPodUID only while the pod's
//     container is ready. A volume that left the spec keeps its entry while
//     an attachment pod holds it (Ready and MountedToPod kept, otherwise
//     Detaching) and loses it with the pod. Entries are sorted by name.
//   - virt-handler's part is package virthandler, the one emulation that
//     the world with real KubeVirt runs too (pkg/virt-handler/vm.go:467-531,
//     632-686): a hot-plug volume in the spec whose attachment pod (by the
//     UID virt-controller recorded) runs becomes
//     MountedToPod/VolumeMountedToPod, then Ready/VolumeReady with a target
//     (sda, sdb, ...: scsi/sata; vda, ...: virtio); a removed one loses its
//     target, then becomes UnMountedFromPod/VolumeUnMountedFromPod. Boot
//     volumes get a target and no hotplugVolume. Emulator.SetHandlerDown
//     (or Options.HandlersDown, or the fault ConfigMap) stops virt-handler on
//     a node: its VMIs stay Scheduled, hot-plugs stop at AttachedToNode, and
//     an unplug stays Ready with its attachment pod kept, forever.
//   - Declarative hot-plug sync is skipped, as in KubeVirt, with
//     spec.updateVolumesStrategy Migration (hotplug.go:38-41), while the VMI
//     is not Running, and while a DataVolume of spec.dataVolumeTemplates is
//     missing or not Succeeded/WaitForFirstConsumer/PendingPopulation (that
//     also holds the VM's start; vm.go:3284-3295). A VMI write that the
//     apiserver refuses (for instance by an admission policy) sets the VM's
//     Failure condition with reason HotPlugVolumeError until a sync succeeds.
//   - A VirtualMachineInstanceMigration sets the VMI's status.migrationState
//     for Options.MigrationDuration, then completes it, moves the VMI (and new
//     launcher and attachment pods) to the target node and marks the
//     migration Succeeded. The handlers' part (the target's address and
//     ports, the start, the domain detected, the acknowledgement that moves
//     the VMI, completed, the target label dropped) is package virthandler's,
//     as in the world with real KubeVirt; the emulator compresses it into
//     two writes. The target node is the annotation
//     emulator.tether.dev/target-node on the migration, else
//     Options.TargetNodeName, else Options.NodeName if the VMI is already
//     there. Hot-plug changes wait until the migration ends.
//   - Nodes Options.NodeName and Options.TargetNodeName are created if missing
//     and kept Ready (unless Options.NoNodes). Pods are marked Running and
//     Ready (nothing runs them).
//   - DataVolumes are not reconciled (no CDI): tests create their PVCs and
//     set DataVolume phases.
//
// # CRDs
//
// As in KubeVirt (components/crds.go:149-185), the VMI CRD has no status
// subresource: a VMI's status is written with the object, by the emulator
// and by tests alike (Update, not Status().Update); VM, migration, KubeVirt
// and DataVolume have one. The CRDs differ from KubeVirt's in that they serve
// only v1 (not v1alpha3) and their schemas preserve unknown fields, where
// KubeVirt's structural schemas prune them: a misspelt field survives here
// and is dropped on a real cluster.
//
// # Where the emulator still differs from KubeVirt
//
//   - No admission webhooks: none of virt-api's 422 refusals (disk bus,
//     changed hot-plug volume, snapshot in progress, volume request
//     validation, "update of VMI object is restricted") happen.
//   - Volume requests (HotplugVolumes) go straight into the VMI spec instead
//     of through the VMI subresource.
//   - No WaitForFirstConsumer trigger pods, no DataVolume creation from
//     dataVolumeTemplates, no events for volume phase changes, no
//     migration target pods or migrationState.targetAttachmentPodUID.
//   - Attachment pods have automountServiceAccountToken false and no
//     tolerations, resources or securityContext.
//   - A deleted VMI turns Succeeded even when virt-handler is down on its
//     node; a final VMI of a RerunOnFailure/Always VM is not restarted.
//
// # Fault and drift injection
//
// The annotation emulator.tether.dev/paused: "true" on a VM (which covers its
// VMI too), a VMI, a migration or a Node makes the controller leave it alone,
// so a test can put it into any state by hand. Emulator.InjectFaults makes the
// next matching subresource calls fail with a chosen status or hang;
// Emulator.SetHandlerDown plays virt-handler down on a node. The command also
// takes both from the ConfigMap kubevirt-emulator-faults in the emulator's
// namespace (key "faults", a JSON list of Fault; key "handlersDown", a JSON
// list of the nodes whose virt-handler is down from then on), which it
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
