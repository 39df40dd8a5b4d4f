package snapshot

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// VMI is what the checks read of a VirtualMachineInstance: the fields Lean
// keeps (lean.go), at the same field paths as in the KubeVirt type, and no
// others. The KubeVirt type carries about 1.5 KB of struct for a spec and a
// status of which the checks read a few fields; at 100,000 VMIs that empty
// struct alone is 150 MB of an audit's heap. Volume statuses are of a type
// of their own too (VolumeStatus); volumes, disks and the migration state
// keep KubeVirt's types.
//
// VMIOf makes one from the typed object, and Typed gives back Lean's object
// (TypeMeta aside), field for field.
type VMI struct {
	metav1.ObjectMeta
	Spec   VMISpec
	Status VMIStatus
}

// VMISpec is what the checks read of a VMI's spec (or a VM template's).
type VMISpec struct {
	Volumes []kubevirtv1.Volume
	// EvictionStrategy is the VMI's own (nil: the cluster's default
	// applies); a VM template's is not kept.
	EvictionStrategy *kubevirtv1.EvictionStrategy
	// Domain holds, of the domain's disks, those marked shareable.
	Domain Domain
}

// Domain is the part of a domain the checks read: its disks.
type Domain struct {
	Devices Devices
}

// Devices holds, of a domain's devices, the disks marked shareable (name
// and flag): nothing reads any other.
type Devices struct {
	Disks []kubevirtv1.Disk
}

// VMIStatus is what the checks read of a VMI's status.
type VMIStatus struct {
	Phase          kubevirtv1.VirtualMachineInstancePhase
	NodeName       string
	ActivePods     map[types.UID]string
	VolumeStatus   []VolumeStatus
	MigrationState *kubevirtv1.VirtualMachineInstanceMigrationState
	// Conditions hold only the LiveMigratable condition, if the VMI has
	// one (LiveMigratableOnly).
	Conditions []kubevirtv1.VirtualMachineInstanceCondition
}

// VolumeStatus is what the checks read of one of a VMI's volume statuses:
// 48 B where KubeVirt's is 120 B, and its claim info 16 B where KubeVirt's
// is 80 B (a VMI has one of each per volume).
type VolumeStatus struct {
	Name                      string
	Phase                     kubevirtv1.VolumePhase
	HotplugVolume             *kubevirtv1.HotplugVolumeStatus
	PersistentVolumeClaimInfo *ClaimInfo
}

// ClaimInfo is what the checks read of a volume status's claim info.
type ClaimInfo struct {
	ClaimName string
}

// VolumeStatusesOf returns what the checks read of statuses, as Lean keeps
// them (it shares the hot-plug statuses).
func VolumeStatusesOf(statuses []kubevirtv1.VolumeStatus) []VolumeStatus {
	if statuses == nil {
		return nil
	}
	out := make([]VolumeStatus, len(statuses))
	for i := range statuses {
		in := &statuses[i]
		out[i] = VolumeStatus{Name: in.Name, Phase: in.Phase, HotplugVolume: in.HotplugVolume}
		if info := in.PersistentVolumeClaimInfo; info != nil {
			out[i].PersistentVolumeClaimInfo = &ClaimInfo{ClaimName: info.ClaimName}
		}
	}
	return out
}

func volumeStatusesTyped(statuses []VolumeStatus) []kubevirtv1.VolumeStatus {
	if statuses == nil {
		return nil
	}
	out := make([]kubevirtv1.VolumeStatus, len(statuses))
	for i := range statuses {
		in := &statuses[i]
		out[i] = kubevirtv1.VolumeStatus{Name: in.Name, Phase: in.Phase, HotplugVolume: in.HotplugVolume}
		if info := in.PersistentVolumeClaimInfo; info != nil {
			out[i].PersistentVolumeClaimInfo = &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: info.ClaimName}
		}
	}
	return out
}

// IsFinal reports whether the VMI has reached a final phase (Succeeded or
// Failed), as the KubeVirt type's method of that name does.
func (v *VMI) IsFinal() bool {
	return v.Status.Phase == kubevirtv1.Succeeded || v.Status.Phase == kubevirtv1.Failed
}

// VM is what the checks read of a VirtualMachine, as VMI is of a VMI.
type VM struct {
	metav1.ObjectMeta
	Spec   VMSpec
	Status VMStatus
}

// VMSpec is what the checks read of a VM's spec.
type VMSpec struct {
	Running               *bool
	RunStrategy           *kubevirtv1.VirtualMachineRunStrategy
	Instancetype          *kubevirtv1.InstancetypeMatcher
	Preference            *kubevirtv1.PreferenceMatcher
	UpdateVolumesStrategy *kubevirtv1.UpdateVolumesStrategy
	Template              *VMTemplate
	// DataVolumeTemplates are the names of the VM's dataVolumeTemplates.
	DataVolumeTemplates []DataVolumeTemplate
}

// VMTemplate is what the checks read of a VM's template: its labels, its
// volumes and its shareable disks.
type VMTemplate struct {
	ObjectMeta TemplateMeta
	Spec       VMISpec
}

// TemplateMeta is what the checks read of a template's metadata.
type TemplateMeta struct {
	Labels map[string]string
}

// DataVolumeTemplate names one of a VM's dataVolumeTemplates.
type DataVolumeTemplate struct {
	Name, Namespace string
}

// VMStatus is what the checks read of a VM's status: of its conditions the
// Failure and ManualRecoveryRequired ones.
type VMStatus struct {
	Created, Ready      bool
	PrintableStatus     kubevirtv1.VirtualMachinePrintableStatus
	Conditions          []kubevirtv1.VirtualMachineCondition
	StateChangeRequests []kubevirtv1.VirtualMachineStateChangeRequest
	VolumeRequests      []kubevirtv1.VirtualMachineVolumeRequest
	InstancetypeRef     *kubevirtv1.InstancetypeStatusRef
	PreferenceRef       *kubevirtv1.InstancetypeStatusRef
	ObservedGeneration  int64
	DesiredGeneration   int64
	VolumeUpdateState   *kubevirtv1.VolumeUpdateState
}

// VMIOf returns what the checks read of vmi (Lean's fields). vmi is not
// changed; the result shares its slices, maps and pointers.
func VMIOf(vmi *kubevirtv1.VirtualMachineInstance) VMI {
	c := *vmi
	leanVMI(&c)
	spec := vmiSpecOf(&c.Spec)
	spec.EvictionStrategy = c.Spec.EvictionStrategy
	return VMI{ObjectMeta: c.ObjectMeta, Spec: spec, Status: VMIStatus{
		Phase: c.Status.Phase, NodeName: c.Status.NodeName, ActivePods: c.Status.ActivePods,
		VolumeStatus: VolumeStatusesOf(c.Status.VolumeStatus), MigrationState: c.Status.MigrationState,
		Conditions: c.Status.Conditions}}
}

func vmiSpecOf(s *kubevirtv1.VirtualMachineInstanceSpec) VMISpec {
	return VMISpec{Volumes: s.Volumes, Domain: Domain{Devices: Devices{Disks: s.Domain.Devices.Disks}}}
}

// VMOf returns what the checks read of vm (Lean's fields), as VMIOf.
func VMOf(vm *kubevirtv1.VirtualMachine) VM {
	c := *vm
	leanVM(&c)
	in, st := &c.Spec, &c.Status
	out := VM{ObjectMeta: c.ObjectMeta,
		Spec: VMSpec{Running: in.Running, RunStrategy: in.RunStrategy, Instancetype: in.Instancetype,
			Preference: in.Preference, UpdateVolumesStrategy: in.UpdateVolumesStrategy},
		Status: VMStatus{Created: st.Created, Ready: st.Ready, PrintableStatus: st.PrintableStatus,
			Conditions: st.Conditions, StateChangeRequests: st.StateChangeRequests, VolumeRequests: st.VolumeRequests,
			InstancetypeRef: st.InstancetypeRef, PreferenceRef: st.PreferenceRef, ObservedGeneration: st.ObservedGeneration,
			DesiredGeneration: st.DesiredGeneration, VolumeUpdateState: st.VolumeUpdateState}}
	if t := in.Template; t != nil {
		out.Spec.Template = &VMTemplate{ObjectMeta: TemplateMeta{Labels: t.ObjectMeta.Labels}, Spec: vmiSpecOf(&t.Spec)}
	}
	if in.DataVolumeTemplates != nil {
		out.Spec.DataVolumeTemplates = make([]DataVolumeTemplate, len(in.DataVolumeTemplates))
		for i := range in.DataVolumeTemplates {
			out.Spec.DataVolumeTemplates[i] = DataVolumeTemplate{Name: in.DataVolumeTemplates[i].Name, Namespace: in.DataVolumeTemplates[i].Namespace}
		}
	}
	return out
}

// VMIsOf returns VMIOf of each of vmis.
func VMIsOf(vmis ...kubevirtv1.VirtualMachineInstance) []VMI {
	if vmis == nil {
		return nil
	}
	out := make([]VMI, len(vmis))
	for i := range vmis {
		out[i] = VMIOf(&vmis[i])
	}
	return out
}

// VMsOf returns VMOf of each of vms.
func VMsOf(vms ...kubevirtv1.VirtualMachine) []VM {
	if vms == nil {
		return nil
	}
	out := make([]VM, len(vms))
	for i := range vms {
		out[i] = VMOf(&vms[i])
	}
	return out
}

// Typed returns the lean KubeVirt object v was made of (without its
// TypeMeta): for code that hands a VMI to an API of KubeVirt's types.
func (v *VMI) Typed() kubevirtv1.VirtualMachineInstance {
	out := kubevirtv1.VirtualMachineInstance{ObjectMeta: v.ObjectMeta,
		Spec: vmiSpecTyped(&v.Spec),
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: v.Status.Phase, NodeName: v.Status.NodeName,
			ActivePods: v.Status.ActivePods, VolumeStatus: volumeStatusesTyped(v.Status.VolumeStatus), MigrationState: v.Status.MigrationState,
			Conditions: v.Status.Conditions}}
	out.Spec.EvictionStrategy = v.Spec.EvictionStrategy
	return out
}

func vmiSpecTyped(s *VMISpec) kubevirtv1.VirtualMachineInstanceSpec {
	return kubevirtv1.VirtualMachineInstanceSpec{Volumes: s.Volumes,
		Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Disks: s.Domain.Devices.Disks}}}
}

// Typed returns the lean KubeVirt object v was made of (without its
// TypeMeta), as VMI.Typed.
func (v *VM) Typed() kubevirtv1.VirtualMachine {
	in, st := &v.Spec, &v.Status
	out := kubevirtv1.VirtualMachine{ObjectMeta: v.ObjectMeta,
		Spec: kubevirtv1.VirtualMachineSpec{Running: in.Running, RunStrategy: in.RunStrategy, Instancetype: in.Instancetype,
			Preference: in.Preference, UpdateVolumesStrategy: in.UpdateVolumesStrategy},
		Status: kubevirtv1.VirtualMachineStatus{Created: st.Created, Ready: st.Ready, PrintableStatus: st.PrintableStatus,
			Conditions: st.Conditions, StateChangeRequests: st.StateChangeRequests, VolumeRequests: st.VolumeRequests,
			InstancetypeRef: st.InstancetypeRef, PreferenceRef: st.PreferenceRef, ObservedGeneration: st.ObservedGeneration,
			DesiredGeneration: st.DesiredGeneration, VolumeUpdateState: st.VolumeUpdateState}}
	if t := in.Template; t != nil {
		out.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: t.ObjectMeta.Labels},
			Spec: vmiSpecTyped(&t.Spec)}
	}
	if in.DataVolumeTemplates != nil {
		out.Spec.DataVolumeTemplates = make([]kubevirtv1.DataVolumeTemplateSpec, len(in.DataVolumeTemplates))
		for i, t := range in.DataVolumeTemplates {
			out.Spec.DataVolumeTemplates[i].ObjectMeta = metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace}
		}
	}
	return out
}

// DeepCopyInto copies v into out, sharing nothing. (Without it, the
// ObjectMeta's method of that name would be VMI's, and copy the metadata
// alone.)
func (v *VMI) DeepCopyInto(out *VMI) {
	t := v.Typed()
	*out = VMIOf(t.DeepCopy())
}

// DeepCopy returns a copy of v that shares nothing with it.
func (v *VMI) DeepCopy() *VMI {
	out := new(VMI)
	v.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies v into out, sharing nothing, as VMI.DeepCopyInto.
func (v *VM) DeepCopyInto(out *VM) {
	t := v.Typed()
	*out = VMOf(t.DeepCopy())
}

// DeepCopy returns a copy of v that shares nothing with it.
func (v *VM) DeepCopy() *VM {
	out := new(VM)
	v.DeepCopyInto(out)
	return out
}
