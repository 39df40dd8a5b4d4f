package snapshot

import (
	"k8s.io/apimachinery/pkg/types"

	"time"

	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// How the KubeVirt CSI driver (kubevirt/csi-driver) and Cluster API's
// KubeVirt provider tie a tenant Node to its infra VM.
const (
	// ProviderIDPrefix starts a tenant Node's spec.providerID; the rest is
	// the infra VM's name.
	ProviderIDPrefix = "kubevirt://"
	// ClusterNamespaceAnnotation on a tenant Node names the infra namespace
	// of the VM its providerID names.
	ClusterNamespaceAnnotation = "cluster.x-k8s.io/cluster-namespace"
	// InfraVMNameAnnotation and InfraVMNamespaceAnnotation on a tenant Node
	// name its infra VM when the providerID does not.
	InfraVMNameAnnotation      = "csi.kubevirt.io/infra-vm-name"
	InfraVMNamespaceAnnotation = "csi.kubevirt.io/infra-vm-namespace"
)

// TenantNode is what tether keeps of one tenant cluster Node.
type TenantNode struct {
	Name string
	// UID is the Node's uid (the fencing write's precondition).
	UID        types.UID
	ProviderID string
	// The values of ClusterNamespaceAnnotation, InfraVMNameAnnotation and
	// InfraVMNamespaceAnnotation.
	ClusterNamespace string
	InfraVMName      string
	InfraVMNamespace string
	// CSINodeID is the node ID the tenant's CSI driver published for this
	// node (its CSINode's spec.drivers[].nodeID, "<namespace>/<vm>"); ""
	// when there is none.
	CSINodeID string
	// InUse are the volume handles of the tenant's CSI driver that the
	// kubelet lists in status.volumesInUse or status.volumesAttached
	// ("kubernetes.io/csi/<driver>^<handle>").
	InUse []string
	// Ready is the status of the node's Ready condition ("" when it has
	// none), and ReadySince that condition's lastTransitionTime: a kubelet
	// that stopped posting leaves Ready Unknown, set by the node lifecycle
	// controller.
	Ready      corev1.ConditionStatus
	ReadySince time.Time
	// OutOfService: the node carries the out-of-service taint
	// (OutOfServiceTaint), whoever put it there.
	OutOfService bool
	// FencedBy is the value of FencedAnnotation: set when tether put the
	// out-of-service taint there (it names the infra VM and when).
	FencedBy string
	// Unschedulable is spec.unschedulable: the node is cordoned, by
	// whomever.
	Unschedulable bool
	// CordonedBy is the value of CordonedAnnotation: set when tether
	// cordoned the node to lift its fence (and so may uncordon it).
	CordonedBy string
	// UnfencedAt is the time UnfencedAnnotation records: when tether
	// removed its out-of-service taint. Zero when the annotation is absent
	// or does not hold an RFC 3339 time.
	UnfencedAt time.Time
	// Release is what of the node is still being released, read only for
	// a node in tether's un-fence (Unfencing); nil when it was not read,
	// and then ReleaseError says why when a read failed.
	Release      *NodeRelease
	ReleaseError string
}

// NodeRelease is what of a tenant node its cluster is still releasing:
// non-graceful node shutdown (KEP-2268) lifts the out-of-service taint only
// after the node's pods are gone and its volumes detached.
type NodeRelease struct {
	// Attachments are the node's VolumeAttachments being deleted: a
	// detach in flight (the attacher's finalizer holds the object).
	Attachments []string
	// Pods are the pods bound to the node that are terminating
	// ("namespace/name").
	Pods []string
}

// Empty reports whether nothing of the node is being released.
func (r *NodeRelease) Empty() bool {
	return r != nil && len(r.Attachments) == 0 && len(r.Pods) == 0
}

// NewNodeRelease is what of node is being released, from its cluster's
// VolumeAttachments (any node) and the pods bound to it.
func NewNodeRelease(node string, vas []storagev1.VolumeAttachment, pods []corev1.Pod) *NodeRelease {
	r := &NodeRelease{}
	for i := range vas {
		if vas[i].Spec.NodeName == node && vas[i].DeletionTimestamp != nil {
			r.Attachments = append(r.Attachments, vas[i].Name)
		}
	}
	for i := range pods {
		if pods[i].Spec.NodeName == node && pods[i].DeletionTimestamp != nil {
			r.Pods = append(r.Pods, pods[i].Namespace+"/"+pods[i].Name)
		}
	}
	slices.Sort(r.Attachments)
	slices.Sort(r.Pods)
	return r
}

// Unfencing reports whether the node is in tether's un-fence: it carries
// tether's out-of-service taint, or tether's cordon. What of it is still
// being released is read only for such nodes.
func (n *TenantNode) Unfencing() bool {
	return (n.OutOfService && n.FencedBy != "") || n.CordonedBy != ""
}

// FencedAnnotation records on a tenant Node that tether added its
// out-of-service taint, so that tether removes only a taint it put there.
const FencedAnnotation = "tether.dev/fenced"

// The un-fence's records on a tenant Node. tether lifts its fence in three
// steps, each a write of its own that the next pass can resume from: it
// cordons the node (CordonedAnnotation, unless someone else had cordoned
// it), removes the taint and FencedAnnotation (recording the time in
// UnfencedAnnotation), and, once the controllers that read the taint from
// their caches must have seen it go, uncordons the node and removes both
// records. A cordon without CordonedAnnotation is someone else's and stays.
const (
	CordonedAnnotation = "tether.dev/cordoned"
	UnfencedAnnotation = "tether.dev/unfenced"
)

// InfraVM names a VM of the infra cluster.
type InfraVM struct{ Namespace, Name string }

func (v InfraVM) String() string { return v.Namespace + "/" + v.Name }

// NodeMapping is how one tenant node resolves to an infra VM.
type NodeMapping struct {
	VM InfraVM
	// How says which sources gave VM, for evidence.
	How string
	// Unknown, when set, says why the node cannot be tied to one infra VM
	// with certainty. VM is then meaningless, unless Ambiguous: then the
	// node may be VM (and is not certainly it), and may be no other VM the
	// tenant speaks for.
	Unknown   string
	Ambiguous bool
	// ByName: no source named the VM; the node is taken for the VM of its
	// own name (the matchNodesByName opt-in). Nothing then says the node
	// ever was a VM.
	ByName bool
}

// ResolveTenantNode ties a tenant node to its infra VM the way the KubeVirt
// CSI driver does, and refuses to guess:
//
//   - spec.providerID "kubevirt://<vm>", with the namespace from the
//     cluster.x-k8s.io/cluster-namespace annotation or else the tenant's
//     infra namespace (infraNS);
//   - the csi.kubevirt.io/infra-vm-name and -namespace annotations (both);
//   - the node ID the driver published in the node's CSINode
//     ("<namespace>/<vm>"): the ID the driver's controller is called with.
//
// Every source present must name the same VM, and when infraNS is set
// (the driver's controller works in one infra namespace) the VM must be in
// it. When no source is present and byName is set, a node is the VM of its
// own name in infraNS (an explicit opt-in, never across namespaces).
// Otherwise the mapping is unknown.
func ResolveTenantNode(n *TenantNode, infraNS string, byName bool) NodeMapping {
	type source struct {
		vm  InfraVM
		how string
	}
	var found []source
	var problems []string
	if name, ok := strings.CutPrefix(n.ProviderID, ProviderIDPrefix); ok {
		switch {
		case name == "" || strings.Contains(name, "/"):
			problems = append(problems, fmt.Sprintf("providerID %q does not name a VM", n.ProviderID))
		case n.ClusterNamespace != "":
			found = append(found, source{InfraVM{n.ClusterNamespace, name}, fmt.Sprintf("providerID %s with annotation %s=%s", n.ProviderID, ClusterNamespaceAnnotation, n.ClusterNamespace)})
		case infraNS != "":
			found = append(found, source{InfraVM{infraNS, name}, fmt.Sprintf("providerID %s in the tenant's infra namespace %s", n.ProviderID, infraNS)})
		default:
			problems = append(problems, fmt.Sprintf("providerID %s has no annotation %s and the tenant names no infra namespace", n.ProviderID, ClusterNamespaceAnnotation))
		}
	}
	switch {
	case n.InfraVMName != "" && n.InfraVMNamespace != "":
		found = append(found, source{InfraVM{n.InfraVMNamespace, n.InfraVMName}, fmt.Sprintf("annotations %s=%s, %s=%s", InfraVMNamespaceAnnotation, n.InfraVMNamespace, InfraVMNameAnnotation, n.InfraVMName)})
	case n.InfraVMName != "" || n.InfraVMNamespace != "":
		problems = append(problems, fmt.Sprintf("only one of the annotations %s and %s is set", InfraVMNameAnnotation, InfraVMNamespaceAnnotation))
	}
	if n.CSINodeID != "" {
		ns, name, ok := strings.Cut(n.CSINodeID, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			problems = append(problems, fmt.Sprintf("CSINode node ID %q is not <namespace>/<vm>", n.CSINodeID))
		} else {
			found = append(found, source{InfraVM{ns, name}, fmt.Sprintf("CSINode node ID %s", n.CSINodeID)})
		}
	}
	if len(problems) > 0 {
		return NodeMapping{Unknown: fmt.Sprintf("tenant node %s: %s", n.Name, strings.Join(problems, "; "))}
	}
	if len(found) == 0 {
		if byName && infraNS != "" {
			return NodeMapping{VM: InfraVM{infraNS, n.Name}, ByName: true, How: fmt.Sprintf("its name in the tenant's infra namespace %s (matchNodesByName)", infraNS)}
		}
		why := fmt.Sprintf("tenant node %s has no providerID %s<vm>, no annotations %s/%s and no CSINode node ID", n.Name, ProviderIDPrefix, InfraVMNamespaceAnnotation, InfraVMNameAnnotation)
		if byName {
			why += "; matching by name needs the tenant's infra namespace"
		}
		return NodeMapping{Unknown: why}
	}
	hows := make([]string, 0, len(found))
	for _, s := range found {
		if s.vm != found[0].vm {
			return NodeMapping{Unknown: fmt.Sprintf("tenant node %s: %s names %s but %s names %s", n.Name, found[0].how, found[0].vm, s.how, s.vm)}
		}
		hows = append(hows, s.how)
	}
	if infraNS != "" && found[0].vm.Namespace != infraNS {
		// The driver's controller attaches to the VM of that name in its
		// own infra namespace: the node may be that VM too.
		return NodeMapping{VM: InfraVM{infraNS, found[0].vm.Name}, Ambiguous: true,
			Unknown: fmt.Sprintf("tenant node %s: %s names %s, outside the tenant's infra namespace %s (the driver would attach to %s/%s)",
				n.Name, hows[0], found[0].vm, infraNS, infraNS, found[0].vm.Name)}
	}
	return NodeMapping{VM: found[0].vm, How: strings.Join(hows, ", ")}
}

// ParseCSIVolumeName splits a kubelet volume name of the form
// "kubernetes.io/csi/<driver>^<handle>" (Node status.volumesInUse and
// status.volumesAttached) and reports whether it is one.
func ParseCSIVolumeName(s string) (driver, handle string, ok bool) {
	rest, ok := strings.CutPrefix(s, "kubernetes.io/csi/")
	if !ok {
		return "", "", false
	}
	driver, handle, ok = strings.Cut(rest, "^")
	if !ok || driver == "" || handle == "" {
		return "", "", false
	}
	return driver, handle, true
}

// NewTenantNode keeps of a tenant Node, and of its CSINode (nil when it has
// none), what ResolveTenantNode and the kubelet check read for driver.
func NewTenantNode(node *corev1.Node, csiNode *storagev1.CSINode, driver string) TenantNode {
	n := TenantNode{
		Name:             node.Name,
		UID:              node.UID,
		ProviderID:       node.Spec.ProviderID,
		ClusterNamespace: node.Annotations[ClusterNamespaceAnnotation],
		InfraVMName:      node.Annotations[InfraVMNameAnnotation],
		InfraVMNamespace: node.Annotations[InfraVMNamespaceAnnotation],
	}
	if csiNode != nil {
		for _, d := range csiNode.Spec.Drivers {
			if d.Name == driver {
				n.CSINodeID = d.NodeID
			}
		}
	}
	add := func(name string) {
		if d, h, ok := ParseCSIVolumeName(name); ok && d == driver && !slices.Contains(n.InUse, h) {
			n.InUse = append(n.InUse, h)
		}
	}
	for _, v := range node.Status.VolumesInUse {
		add(string(v))
	}
	for _, v := range node.Status.VolumesAttached {
		add(string(v.Name))
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			n.Ready, n.ReadySince = c.Status, c.LastTransitionTime.Time
		}
	}
	n.OutOfService = HasOutOfServiceTaint(node)
	n.FencedBy = node.Annotations[FencedAnnotation]
	n.Unschedulable = node.Spec.Unschedulable
	n.CordonedBy = node.Annotations[CordonedAnnotation]
	if at, err := time.Parse(time.RFC3339, node.Annotations[UnfencedAnnotation]); err == nil {
		n.UnfencedAt = at
	}
	return n
}

// UnmappedNodes says, for each of the tenant's nodes that cannot be tied
// to one infra VM with certainty, why.
func (t *Tenant) UnmappedNodes() []string {
	var out []string
	for i := range t.Nodes {
		if m := ResolveTenantNode(&t.Nodes[i], t.Namespace, t.MatchNodesByName); m.Unknown != "" {
			out = append(out, m.Unknown)
		}
	}
	return out
}
