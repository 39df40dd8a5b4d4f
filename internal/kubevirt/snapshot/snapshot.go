// Package snapshot holds the immutable input of tether's decisions: every
// object a check needs, read once by an observer, plus an index built once so
// that a full pass over the checks costs O(total objects).
//
// This package never talks to a cluster, never reads the clock and never
// changes the objects it holds. Callers must not modify a Snapshot (or the
// objects in it) after it has been indexed.
package snapshot

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// HotplugVolumesGate is the KubeVirt feature gate that allows the VMI-level
// addvolume/removevolume API on VMIs owned by a VirtualMachine.
const HotplugVolumesGate = "HotplugVolumes"

// KubevirtCSIAttacher is the attacher name of the KubeVirt CSI driver that
// tenant clusters use to hot-plug infra volumes into their nodes.
const KubevirtCSIAttacher = "csi.kubevirt.io"

// DefaultCSIDriver is the KubeVirt CSI driver's default name.
const DefaultCSIDriver = KubevirtCSIAttacher

// AttachmentPodLabel and AttachmentPodLabelValue select the hot-plug
// attachment pods (hp-volume-*) that KubeVirt creates.
const (
	AttachmentPodLabel      = "kubevirt.io"
	AttachmentPodLabelValue = "hotplug-disk"
)

// Snapshot is everything the checks decide from. Fill it, then call New (or
// Index once) before sharing it between goroutines.
type Snapshot struct {
	// VMs and VMIs hold what the checks read of each (VMOf, VMIOf).
	VMs  []VM
	VMIs []VMI
	// AttachmentPods are the pods labelled kubevirt.io=hotplug-disk.
	AttachmentPods []corev1.Pod
	PVCs           []corev1.PersistentVolumeClaim
	DataVolumes    []cdiv1.DataVolume
	// FeatureGates are the gates of the KubeVirt CR.
	FeatureGates FeatureGates
	// EvictionGuard is what was read of virt-api's guard of attachment
	// pods against eviction (KindEvictionGuard).
	EvictionGuard EvictionGuard
	// Warnings say what the observer could not read (e.g. a forbidden
	// cluster-scoped LIST), so the report can say what it did not check.
	Warnings []string
	// Tenants are the configured tenant clusters, reachable or not.
	Tenants []Tenant

	// The storage view (see storage.go): every pod in scope (attachment
	// pods included), and the cluster-scoped Nodes, VolumeAttachments, PVs
	// and CSIDrivers.
	Pods              []corev1.Pod
	Nodes             []corev1.Node
	VolumeAttachments []storagev1.VolumeAttachment
	PVs               []corev1.PersistentVolume
	CSIDrivers        []storagev1.CSIDriver
	// NodesGoneSince records, for Node names that are missing, since when
	// they have been seen missing, from durable records (the controller's
	// Finding records). A one-shot audit has none: then how long a node has
	// been gone is unknown.
	NodesGoneSince map[string]time.Time

	idx *Index
}

// FeatureGates records the KubeVirt CR's feature gates and version. Known
// is false when the CR could not be read; then nothing is known about any
// gate, nor about the version.
type FeatureGates struct {
	Known bool
	// Enabled is spec.configuration.developerConfiguration.featureGates.
	Enabled []string
	// Disabled is spec.configuration.developerConfiguration.disabledFeatureGates.
	Disabled []string
	// KubeVirtVersion is status.observedKubeVirtVersion, the version
	// virt-operator has deployed (e.g. "v1.9.0"); "" when not reported.
	KubeVirtVersion string
	// Phase is status.phase; KubeVirt applies the object's configuration
	// only once it is set (see Hotplug).
	Phase string
	// EvictionStrategy is spec.configuration.evictionStrategy, the
	// cluster's default for VMIs that set none; "" when unset.
	EvictionStrategy string
}

// GateState is what is known about one feature gate.
type GateState int

// Gate states.
const (
	GateUnknown GateState = iota
	GateEnabled
	GateDisabled
)

// String returns "enabled", "disabled" or "unknown".
func (g GateState) String() string {
	switch g {
	case GateEnabled:
		return "enabled"
	case GateDisabled:
		return "disabled"
	default:
		return "unknown"
	}
}

// State reports whether gate name is listed as enabled, listed as
// disabled, or unknown. It does not know defaults or versions: for the
// hot-plug gates use Hotplug, which does.
func (g FeatureGates) State(name string) GateState {
	if !g.Known {
		return GateUnknown
	}
	for _, d := range g.Disabled {
		if d == name {
			return GateDisabled
		}
	}
	for _, e := range g.Enabled {
		if e == name {
			return GateEnabled
		}
	}
	return GateDisabled
}

// Tenant is the evidence from one tenant cluster whose nodes are VMs of this
// (infra) cluster, read the way the KubeVirt CSI driver sees it.
type Tenant struct {
	Name string
	// Namespace is the infra namespace whose VMs are this tenant's nodes
	// (the driver's --infra-cluster-namespace); "" means the namespace each
	// node names.
	Namespace string
	// Driver is the tenant's CSI driver name (DefaultCSIDriver when "").
	Driver string
	// MatchNodesByName lets a node that names no infra VM be the VM of its
	// own name in Namespace.
	MatchNodesByName bool
	// Reachable is false when the tenant could not be read; Error says why.
	// An unreachable tenant is unknown evidence, never "not wanted".
	Reachable bool
	Error     string
	// DriverMissing is true when the tenant has no CSIDriver object of
	// Driver's name: its evidence is unknown.
	DriverMissing     bool
	VolumeAttachments []storagev1.VolumeAttachment
	PVs               []corev1.PersistentVolume
	// Nodes are the tenant's Nodes. Its evidence concerns a VMI only when
	// one of them resolves to the VMI's VM (ResolveTenantNode): "no
	// VolumeAttachment on node X" proves nothing about a VM that is not
	// one of the tenant's nodes.
	Nodes []TenantNode
}

// CSIDriver returns the tenant's driver name.
func (t *Tenant) CSIDriver() string {
	if t.Driver == "" {
		return DefaultCSIDriver
	}
	return t.Driver
}

// New returns an indexed copy of s. The slices are shared, not copied.
func New(s Snapshot) *Snapshot {
	s.idx = nil
	out := &s
	out.idx = buildIndex(out)
	return out
}

// Index returns the snapshot's index, building it on first use. The first
// call is not safe for concurrent use; New builds it up front.
func (s *Snapshot) Index() *Index {
	if s.idx == nil {
		s.idx = buildIndex(s)
	}
	return s.idx
}
