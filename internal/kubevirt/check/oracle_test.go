package check

// The property-test oracles of this package judge the checks' findings by
// the platform's own rules: what Kubernetes, KubeVirt, CDI and CSI document
// and do. They read the API objects directly and never call the check's
// code or the snapshot package's helpers, so a wrong model in those shows up
// as a disagreement instead of being re-derived here. Each reading below
// names the rule it encodes. Names and constants are written out as the
// platform spells them, not taken from the code under test.

import (
	"encoding/json"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// Platform spellings.
const (
	// KubeVirt's feature gate for the VMI-level add/removevolume API.
	kvHotplugGate = "HotplugVolumes"
	// The attacher name of the KubeVirt CSI driver's VolumeAttachments.
	kvCSIAttacher = "csi.kubevirt.io"
	// Kubernetes' non-graceful node shutdown taint.
	k8sOutOfService = "node.kubernetes.io/out-of-service"
	// The kubelet's record of the CSI node IDs of a Node: a JSON map from
	// driver name to node ID.
	k8sCSINodeIDs = "csi.volume.kubernetes.io/nodeid"
)

// k8sExists encodes the Kubernetes object lifecycle (Finalizers, "Garbage
// collection" in the Kubernetes docs): a DELETE sets
// metadata.deletionTimestamp, and the object stays in the API, readable and
// in use, until its last finalizer is removed. So an object with a
// deletionTimestamp still exists; only an object that is not listed is gone.
// The PVC protection controller relies on this: a PVC that a pod uses stays
// Terminating, with its data, for as long as the pod runs.
func k8sExists[T any](items []T, meta func(*T) *metav1.ObjectMeta, ns, name string) bool {
	for i := range items {
		m := meta(&items[i])
		if m.Namespace == ns && m.Name == name {
			return true
		}
	}
	return false
}

// kvStorageExists: a KubeVirt volume names storage by claim (PVC) or by
// DataVolume; CDI gives a DataVolume a PVC of the same name. The storage a
// reference names exists while a PVC or a DataVolume of that name exists in
// the namespace, whatever its phase or deletion state (k8sExists).
func kvStorageExists(s *snapshot.Snapshot, ns, name string) string {
	switch {
	case k8sExists(s.PVCs, func(p *corev1.PersistentVolumeClaim) *metav1.ObjectMeta { return &p.ObjectMeta }, ns, name):
		return "a PVC of that name exists (Terminating or not, it is still there)"
	case k8sExists(s.DataVolumes, func(d *cdiv1.DataVolume) *metav1.ObjectMeta { return &d.ObjectMeta }, ns, name):
		return "a DataVolume of that name exists (in any phase, Terminating or not)"
	}
	return ""
}

// kvTemplated: virt-controller creates the DataVolumes of a VM's
// spec.dataVolumeTemplates when the VM starts, so a name listed there will
// exist again.
func kvTemplated(s *snapshot.Snapshot, ns, name string) bool {
	for _, vm := range s.VMs {
		if vm.Namespace != ns {
			continue
		}
		for _, t := range vm.Spec.DataVolumeTemplates {
			if t.Name == name {
				return true
			}
		}
	}
	return false
}

// kvVolume returns the volume called name in a KubeVirt volume list
// (VM spec.template.spec.volumes or VMI spec.volumes), or nil.
func kvVolume(vols []kubevirtv1.Volume, name string) *kubevirtv1.Volume {
	for i := range vols {
		if vols[i].Name == name {
			return &vols[i]
		}
	}
	return nil
}

// kvHotpluggable: KubeVirt's add/removevolume work only on volumes marked
// hotpluggable (persistentVolumeClaim.hotpluggable or
// dataVolume.hotpluggable); any other volume is a boot or regular disk
// that virt-api refuses to remove.
func kvHotpluggable(v *kubevirtv1.Volume) bool {
	switch {
	case v == nil:
		return false
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.Hotpluggable
	case v.DataVolume != nil:
		return v.DataVolume.Hotpluggable
	}
	return false
}

// kvStorageName is the PVC or DataVolume a KubeVirt volume names ("" for
// other sources).
func kvStorageName(v *kubevirtv1.Volume) string {
	switch {
	case v == nil:
		return ""
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.DataVolume != nil:
		return v.DataVolume.Name
	}
	return ""
}

// kvMigrating: a VMI migrates while status.migrationState is set and
// neither completed nor failed; KubeVirt holds hot-plug changes meanwhile
// and moves attachment pods to the target.
func kvMigrating(vmi *snapshot.VMI) bool {
	ms := vmi.Status.MigrationState
	return ms != nil && !ms.Completed && !ms.Failed
}

// kvVMOwned: a VMI made by a VM carries a controller ownerReference of kind
// VirtualMachine in group kubevirt.io.
func kvVMOwned(vmi *snapshot.VMI) (*metav1.OwnerReference, bool) {
	for i := range vmi.OwnerReferences {
		ref := &vmi.OwnerReferences[i]
		if ref.Controller != nil && *ref.Controller && ref.Kind == "VirtualMachine" &&
			(ref.APIVersion == "" || strings.HasPrefix(ref.APIVersion, "kubevirt.io/")) {
			return ref, true
		}
	}
	return nil, false
}

// kvGateOn: the feature gates are known and name gate. Unknown gates are
// treated as off.
func kvGateOn(s *snapshot.Snapshot, gate string) bool {
	if !s.FeatureGates.Known {
		return false
	}
	for _, g := range s.FeatureGates.Enabled {
		if g == gate {
			return true
		}
	}
	return false
}

// kvVolumeInUse: virt-controller and virt-handler report a hot-plugged
// volume that is (being) attached in the VMI's status.volumeStatus: an
// attachment pod name, or a phase of AttachedToNode, MountedToPod or Ready.
// An attachment pod in the VMI's namespace that mounts the claim keeps it
// attached to the node whatever the status says.
func kvVolumeInUse(s *snapshot.Snapshot, vmi *snapshot.VMI, volume, claim string) string {
	for _, vs := range vmi.Status.VolumeStatus {
		if vs.Name != volume {
			continue
		}
		if vs.HotplugVolume != nil && vs.HotplugVolume.AttachPodName != "" {
			return "the VMI status names an attachment pod for it"
		}
		switch vs.Phase {
		case kubevirtv1.VolumeReady, kubevirtv1.HotplugVolumeMounted, kubevirtv1.HotplugVolumeAttachedToNode:
			return "the VMI status shows it attached (" + string(vs.Phase) + ")"
		}
	}
	for _, pod := range s.AttachmentPods {
		if pod.Namespace != vmi.Namespace {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
				return "attachment pod " + pod.Name + " mounts the claim"
			}
		}
	}
	return ""
}

// kvStatusClaims returns the claims a VMI volume status entry may stand for:
// status.persistentVolumeClaimInfo.claimName (set by virt-controller) and
// the storage of the VMI spec volume of the same name. When neither is known
// (the spec entry is already removed, the status not filled), the volume's
// own name, as the KubeVirt CSI driver names hot-plugs after their claims.
func kvStatusClaims(vmi *snapshot.VMI, vs *snapshot.VolumeStatus) []string {
	var out []string
	if vs.PersistentVolumeClaimInfo != nil && vs.PersistentVolumeClaimInfo.ClaimName != "" {
		out = append(out, vs.PersistentVolumeClaimInfo.ClaimName)
	}
	if c := kvStorageName(kvVolume(vmi.Spec.Volumes, vs.Name)); c != "" {
		out = append(out, c)
	}
	if len(out) == 0 && vs.Name != "" {
		out = append(out, vs.Name)
	}
	return out
}

// k8sOutOfServiceTainted: the non-graceful node shutdown rule. An operator
// who has made sure a node is down taints it node.kubernetes.io/out-of-service;
// the attach/detach controller then detaches its volumes at once.
func k8sOutOfServiceTainted(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == k8sOutOfService {
			return true
		}
	}
	return false
}

// k8sCSINodeID: the kubelet writes each CSI driver's node ID into the Node
// annotation csi.volume.kubernetes.io/nodeid (JSON map driver -> ID).
func k8sCSINodeID(node *corev1.Node, driver string) string {
	var ids map[string]string
	if json.Unmarshal([]byte(node.Annotations[k8sCSINodeIDs]), &ids) != nil {
		return ""
	}
	return ids[driver]
}

// tetherInScope is tether's documented scope contract (docs/checks):
// scope.namespaces (empty: all), scope.selector on the subject's labels and
// scope.volumePrefix on the volume name. It is the only tether rule the
// oracles read, and it is written here from the docs.
func tetherInScope(p Policy, ns string, subjectLabels map[string]string, volume string) string {
	switch {
	case !inNamespaces(p, ns):
		return "the namespace is out of scope"
	case p.Scope.Selector != nil && !p.Scope.Selector.Matches(labels.Set(subjectLabels)):
		return "the subject is not selected"
	case !strings.HasPrefix(volume, p.Scope.VolumePrefix):
		return "the volume is out of the prefix scope"
	}
	return ""
}

// inNamespaces: scope.namespaces, empty for all.
func inNamespaces(p Policy, ns string) bool {
	for _, n := range p.Scope.Namespaces {
		if n == ns {
			return true
		}
	}
	return len(p.Scope.Namespaces) == 0
}

// kvRequestPending: a VM's status.volumeRequests holds the add/removevolume
// requests virt-controller has not applied yet. While one names the volume,
// KubeVirt itself is changing it; another change would race it.
func kvRequestPending(vm *snapshot.VM, volume string) bool {
	for _, r := range vm.Status.VolumeRequests {
		if r.AddVolumeOptions != nil && r.AddVolumeOptions.Name == volume ||
			r.RemoveVolumeOptions != nil && r.RemoveVolumeOptions.Name == volume {
			return true
		}
	}
	return false
}

// Tenant evidence, by the KubeVirt CSI driver's rules (kubevirt/csi-driver,
// cmd/kubevirt-csi-driver resolveNodeID and pkg/service ControllerPublish):
//
//   - the node plugin publishes node ID "<namespace>/<vm>", from providerID
//     "kubevirt://<vm>" with the node annotation
//     cluster.x-k8s.io/cluster-namespace, else from the annotations
//     csi.kubevirt.io/infra-vm-name and -namespace; without both parts it
//     does not start. A running plugin's ID is in the node's CSINode.
//   - the controller hot-plugs the DataVolume named by the volume handle
//     into the VM named by the name part of the node ID, in the infra
//     namespace it was started with.
//
// So a tenant node may be the VM that any of these names, in the namespace
// given or in the tenant's infra namespace; a node about which nothing is
// known may be any VM.

// drvNodeIDs returns the infra VMs a tenant node may be, and whether
// anything is known about it at all.
func drvNodeIDs(n *snapshot.TenantNode, infraNS string, byName bool) ([]snapshot.InfraVM, bool) {
	var ids []snapshot.InfraVM
	add := func(ns, name string) {
		if name == "" {
			return
		}
		if ns != "" {
			ids = append(ids, snapshot.InfraVM{Namespace: ns, Name: name})
		}
		if infraNS != "" {
			ids = append(ids, snapshot.InfraVM{Namespace: infraNS, Name: name})
		}
	}
	known := false
	if name, ok := strings.CutPrefix(n.ProviderID, "kubevirt://"); ok {
		known = true
		add(n.ClusterNamespace, name)
	}
	if n.InfraVMName != "" || n.InfraVMNamespace != "" {
		known = true
		add(n.InfraVMNamespace, n.InfraVMName)
	}
	if n.CSINodeID != "" {
		known = true
		i := strings.LastIndex(n.CSINodeID, "/")
		add(n.CSINodeID[:max(i, 0)], n.CSINodeID[i+1:])
	}
	if !known && byName {
		known = true
		add("", n.Name)
	}
	return ids, known
}

// drvCouldBe: the tenant node may be vm.
func drvCouldBe(n *snapshot.TenantNode, infraNS string, byName bool, vm snapshot.InfraVM) bool {
	ids, known := drvNodeIDs(n, infraNS, byName)
	return !known || len(ids) == 0 || slices.Contains(ids, vm)
}

// drvIsCertainly: everything known about the node names vm and nothing
// else, and when the tenant has an infra namespace, vm is in it.
func drvIsCertainly(n *snapshot.TenantNode, infraNS string, byName bool, vm snapshot.InfraVM) bool {
	ids, known := drvNodeIDs(n, infraNS, byName)
	if !known || len(ids) == 0 || (infraNS != "" && vm.Namespace != infraNS) {
		return false
	}
	for _, id := range ids {
		if id != vm {
			return false
		}
	}
	// Every part must have given a name: an ID without its namespace
	// outside a tenant with an infra namespace added nothing.
	return true
}

// drvTenantVolume: one of the tenant's PVs of its driver has the handle.
func drvTenantVolume(t *snapshot.Tenant, handles map[string]bool) bool {
	for _, pv := range t.PVs {
		if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == drvName(t) && handles[pv.Spec.CSI.VolumeHandle] {
			return true
		}
	}
	return false
}

func drvName(t *snapshot.Tenant) string {
	if t.Driver == "" {
		return kvCSIAttacher
	}
	return t.Driver
}

// drvMayWant says how tenant t may want a volume (one of handles) on vm:
// it is unreachable or has no CSIDriver (unknown), or a VolumeAttachment of
// its driver not being deleted, on a node that may be vm or attached to
// node ID naming vm, has one of the handles or an unknown one, or the
// kubelet of a node that may be vm lists one of them.
func drvMayWant(t *snapshot.Tenant, vm snapshot.InfraVM, handles map[string]bool) string {
	if !t.Reachable {
		return "tenant " + t.Name + " is unreachable"
	}
	if t.DriverMissing {
		return "tenant " + t.Name + " has no CSIDriver " + drvName(t)
	}
	nodeMayBe := func(name string) bool {
		for i := range t.Nodes {
			if t.Nodes[i].Name == name {
				return drvCouldBe(&t.Nodes[i], t.Namespace, t.MatchNodesByName, vm)
			}
		}
		return true // a node not (yet) listed may be anything
	}
	for _, va := range t.VolumeAttachments {
		if va.Spec.Attacher != drvName(t) || va.DeletionTimestamp != nil {
			continue
		}
		id := va.Annotations["csi.alpha.kubernetes.io/node-id"]
		onVM := nodeMayBe(va.Spec.NodeName) || id != "" && strings.HasSuffix(id, "/"+vm.Name)
		if !onVM {
			continue
		}
		handle, known := vaHandle(*t, va.Spec.Source.PersistentVolumeName, va.Spec.Source.InlineVolumeSpec)
		if !known || handles[handle] {
			return "tenant " + t.Name + " VolumeAttachment " + va.Name + " may attach it to " + vm.String()
		}
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if !drvCouldBe(n, t.Namespace, t.MatchNodesByName, vm) {
			continue
		}
		for _, h := range n.InUse {
			if handles[h] {
				return "the kubelet of tenant " + t.Name + " node " + n.Name + " uses it"
			}
		}
	}
	return ""
}

// drvSaysNotWanted: tenant t speaks for vm (one of its nodes is certainly
// vm, and the volume is one of its own) and no node of it may be vm
// without being certainly vm (an unknown node may be vm too).
func drvSaysNotWanted(t *snapshot.Tenant, vm snapshot.InfraVM, handles map[string]bool) bool {
	if drvMayWant(t, vm, handles) != "" || !drvTenantVolume(t, handles) {
		return false
	}
	certain := false
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if drvIsCertainly(n, t.Namespace, t.MatchNodesByName, vm) {
			certain = true
		} else if _, known := drvNodeIDs(n, t.Namespace, t.MatchNodesByName); !known {
			return false
		}
	}
	return certain
}
