// Package doctor is `tether doctor` on KubeVirt: it checks what tether's
// repairs depend on — KubeVirt's hot-plug gates now and after the next
// upgrade, whether virt-api's volume routes answer, the tenants' access,
// node mapping and CSI driver, the attach/detach controller's force-detach
// timer, the out-of-service taint and the controller's own RBAC — and says,
// per line, OK, WARN or FAIL, why, and the fix.
//
// Facts are gathered first (gather.go: reads and server-side dry runs
// only; the doctor never changes anything); Decide turns them into lines
// and is pure. What cannot be read or proved is WARN, never OK.
package doctor

import (
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// Facts is everything Decide looks at.
type Facts struct {
	// Gates are the KubeVirt CR's feature gates and version (Known false
	// when it could not be read; GatesError then says why).
	Gates      snapshot.FeatureGates
	GatesError string
	// HCO is what was read of HyperConverged.
	HCO HCO
	// Probes are virt-api's answers to dry-run removevolume calls.
	Probes []Probe
	// ScopeError says why the VMs and VMIs in scope could not be listed
	// (the probes then ask about names that do not exist).
	ScopeError string
	// Tenants are the configured tenant clusters.
	Tenants []Tenant
	// Kube is the Kubernetes side: the attach/detach controller and the
	// out-of-service taint.
	Kube Kube
	// Controller is the controller's RBAC for its configuration; nil when
	// it was not asked about.
	Controller *ControllerAccess
	// Unpersisted are the hot-plugs of running VM-owned VMIs in scope that
	// KubeVirt's declarative hot-plug sync removes (check.FindUnpersisted):
	// what a gate change takes from running guests.
	Unpersisted []Unpersisted
	// Drain is what a drain of one node takes from running guests
	// (`tether doctor --node`); nil when no node was named.
	Drain *Drain
}

// Drain is what was read for the drain of one node.
type Drain struct {
	Node string
	// NodeFound is false when no Node of that name exists (NodeErr says
	// why it could not be read, if it could not).
	NodeFound bool
	NodeErr   string
	// Err says why the VMIs or the attachment pods could not be listed.
	Err string
	// Gates are the KubeVirt CR's (version, default eviction strategy);
	// Guard is what was read of virt-api-validator.
	Gates snapshot.FeatureGates
	Guard snapshot.EvictionGuard
	// VMIs are the running VMIs on Node with hot-plugs in the guest
	// through attachment pods on Node (check.FindDrainRisks).
	VMIs []DrainVMI
}

// DrainVMI is one VMI a drain of the node may take disks from.
type DrainVMI struct {
	// VMI is "namespace/name"; Pods and Volumes its attachment pods on
	// the node and the hot-plugs they serve; Strategy the eviction
	// strategy in effect ("" for none); Migratable the LiveMigratable
	// condition's status ("" when it has none).
	VMI, Pods, Volumes, Strategy, Migratable string
}

// Unpersisted is one hot-plug a VM spec lacks, as the doctor says it.
type Unpersisted struct {
	// VMI is "namespace/name"; Volume the volume's name; Claim its claim
	// or DataVolume ("claim X", "DataVolume X"); Who who made it, as far as
	// the evidence tells (check.WhoHotplugged).
	VMI, Volume, Claim, Who string
}

// HCO is what was read of the HyperConverged operator's CR.
type HCO struct {
	// Known: HyperConverged objects could be listed (or their API is not
	// served, which means no HCO). Err says why not.
	Known bool
	Err   string
	// Present: a HyperConverged object exists; Name is its namespace/name.
	Present bool
	Name    string
}

// Route is one of virt-api's volume routes, with the kind of VMI it is
// asked about.
type Route string

// The routes the doctor probes.
const (
	// RouteVMIOwned is virtualmachineinstances/removevolume on a VMI a VM
	// owns.
	RouteVMIOwned Route = "VMI-level removevolume, VM-owned VMI"
	// RouteVMIStandalone is virtualmachineinstances/removevolume on a VMI
	// without a VM.
	RouteVMIStandalone Route = "VMI-level removevolume, standalone VMI"
	// RouteVM is virtualmachines/removevolume.
	RouteVM Route = "VM-level removevolume"
)

// ProbeVolume is the volume name a probe asks to remove: no volume is
// called so, so virt-api's validation answers "does not exist" once it
// has passed the gate and owner checks, and nothing can be removed even
// if dryRun were ignored.
const ProbeVolume = "tether-doctor-probe-no-such-volume"

// Probe is virt-api's answer to one dry-run removevolume of ProbeVolume.
type Probe struct {
	Route Route
	// Subject is the namespace/name asked about. Exists is false when no
	// object of the kind was in scope and a name that does not exist was
	// asked about (virt-api checks its gates before it reads the object).
	Subject string
	Exists  bool
	// Code and Message are the HTTP status and the Status message of the
	// answer; Code 0 means no HTTP answer, and Err says why.
	Code    int
	Message string
	Err     string
}

// Tenant is what was read of one tenant cluster.
type Tenant struct {
	// Read is the tenant as the audit reads it (reachable, error, nodes,
	// CSIDriver present).
	Read snapshot.Tenant
	// DriverVersion names the image tags of the tenant's CSI driver
	// controller and node plugin found, "" for none; VersionNote says what
	// could not be read.
	DriverVersion string
	VersionNote   string
	// Route is what the infra cluster's hot-plugs of this tenant's volumes
	// show about the route its driver uses.
	Route RouteEvidence
	// Fence is whether the tenant's identity may fence (nil: not asked).
	Fence *FenceAccess
}

// FenceAccess is the tenant's answer about what TenantNodeDown needs there
// to taint and untaint a Node (config/rbac/tenant-fencer.yaml).
type FenceAccess struct {
	// Missing are the grants refused, e.g. "patch nodes"; empty: it may
	// fence.
	Missing []string
	// Err: the question could not be asked.
	Err string
}

// RouteEvidence counts the infra cluster's hot-plugs of a tenant's CSI
// volumes by where they are recorded.
type RouteEvidence struct {
	// InVMSpec: hot-plugs listed in the VM spec (the VM-level route, or
	// declarative hot-plug).
	InVMSpec int
	// VMIOnly: hot-plugs of VM-owned VMIs that the VM spec lacks (the
	// VMI-level route). Example is one of them, for the line.
	VMIOnly int
	Example string
}

// Kube is what was read of the Kubernetes side.
type Kube struct {
	// ControllerManagerArgs are the command and args of the
	// kube-controller-manager pod; ControllerManagerFound is false when
	// none could be read (ControllerManagerNote says why).
	ControllerManagerFound bool
	ControllerManagerArgs  []string
	ControllerManagerNote  string
	// NodesRead is false when Nodes could not be listed (NodesError).
	NodesRead  bool
	NodesError string
	// OutOfService are the Nodes that carry the out-of-service taint.
	OutOfService []TaintedNode
}

// TaintedNode is a Node with the out-of-service taint.
type TaintedNode struct {
	Name  string
	Ready bool
}

// ControllerAccess is the answer to whether the controller's account holds
// what its configuration needs.
type ControllerAccess struct {
	// Account is the identity asked about (system:serviceaccount:NS:NAME).
	Account string
	// Err: the question could not be asked.
	Err string
	// Missing are the grants refused, by feature, each with its fix.
	Missing []MissingGrant
	// Asked counts the grants asked about.
	Asked int
	// Fences: the configuration lets TenantNodeDown fence (enabled, not
	// in dry run, with tenants).
	Fences bool
}

// MissingGrant is one permission the controller lacks.
type MissingGrant struct {
	Feature, Grant, Where, Fix string
	Optional                   bool
}
