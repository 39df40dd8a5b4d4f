package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// CompactVMI holds what Lean keeps of a VirtualMachineInstance, and
// nothing else, in less memory than the typed object: a lean VMI still
// carries its empty Go struct (about 1.5 KB, most of it spec and status
// fields Lean has emptied), a Volume of 144 B per volume, a VolumeStatus
// of 120 B (plus an 80 B claim info) per volume status, and a map for its
// active pods (about 300 B for one).
// Expand gives back the lean object, field for field.
//
// An informer cache may hold CompactVMIs (the controller's does); nothing
// outside the cache should see one: the cache hands out Expand's result.
type CompactVMI struct {
	// ObjectMeta is the lean object's but for its labels (labels).
	metav1.ObjectMeta
	labels labelSet
	// typed: the object's TypeMeta was kubevirt.io/v1
	// VirtualMachineInstance (else it was empty).
	typed        bool
	phase        kubevirtv1.VirtualMachineInstancePhase
	nodeName     string
	volumes      []compactVolume
	disks        []compactDisk
	activePods   []activePod
	volumeStatus []compactVolumeStatus
	migration    *kubevirtv1.VirtualMachineInstanceMigrationState
	// eviction is spec.evictionStrategy; conditions the LiveMigratable
	// condition only (LiveMigratableOnly).
	eviction   *kubevirtv1.EvictionStrategy
	conditions []kubevirtv1.VirtualMachineInstanceCondition
}

// CompactVM is CompactVMI's counterpart for a VirtualMachine: a lean VM
// carries its empty struct (552 B) and its template's (about 1 KB).
type CompactVM struct {
	// ObjectMeta is the lean object's but for its labels (labels).
	metav1.ObjectMeta
	labels labelSet
	typed  bool
	// spec
	running               *bool
	runStrategy           *kubevirtv1.VirtualMachineRunStrategy
	instancetype          *kubevirtv1.InstancetypeMatcher
	preference            *kubevirtv1.PreferenceMatcher
	updateVolumesStrategy *kubevirtv1.UpdateVolumesStrategy
	template              *compactTemplate
	dataVolumeTemplates   []compactName
	// status
	created, ready      bool
	printableStatus     kubevirtv1.VirtualMachinePrintableStatus
	conditions          []kubevirtv1.VirtualMachineCondition
	stateChangeRequests []kubevirtv1.VirtualMachineStateChangeRequest
	volumeRequests      []kubevirtv1.VirtualMachineVolumeRequest
	instancetypeRef     *kubevirtv1.InstancetypeStatusRef
	preferenceRef       *kubevirtv1.InstancetypeStatusRef
	observedGeneration  int64
	desiredGeneration   int64
	volumeUpdateState   *kubevirtv1.VolumeUpdateState
}

type compactTemplate struct {
	labels  labelSet
	volumes []compactVolume
	disks   []compactDisk
}

type compactName struct{ name, namespace string }

// compactVolume is a Volume as leanVolumes keeps it: its name and the
// sources that name storage. The usual volume, of one claim or one
// DataVolume, holds it in ref and flags rather than in a struct of its own;
// any other holds its sources in sources.
type compactVolume struct {
	name    string
	ref     string
	flags   volumeFlags
	sources *volumeSources
}

type volumeFlags uint8

const (
	// volClaim: ref is a persistentVolumeClaim's claimName;
	// volDataVolume: ref is a dataVolume's name.
	volClaim volumeFlags = 1 << iota
	volDataVolume
	volReadOnly
	volHotpluggable
)

type volumeSources struct {
	claim      *kubevirtv1.PersistentVolumeClaimVolumeSource
	dataVolume *kubevirtv1.DataVolumeSource
	ephemeral  *kubevirtv1.EphemeralVolumeSource
	memoryDump *kubevirtv1.MemoryDumpVolumeSource
}

func flagIf(b bool, f volumeFlags) volumeFlags {
	if b {
		return f
	}
	return 0
}

func compactVolumeOf(v *kubevirtv1.Volume) compactVolume {
	c := compactVolume{name: v.Name}
	s := &v.VolumeSource
	claim, dv, eph, dump := s.PersistentVolumeClaim, s.DataVolume, s.Ephemeral, s.MemoryDump
	switch {
	case claim == nil && dv == nil && eph == nil && dump == nil:
		return c
	case claim != nil && dv == nil && eph == nil && dump == nil:
		c.ref, c.flags = claim.ClaimName, volClaim|flagIf(claim.ReadOnly, volReadOnly)|flagIf(claim.Hotpluggable, volHotpluggable)
		if *c.claim() == *claim {
			return c
		}
	case dv != nil && claim == nil && eph == nil && dump == nil:
		c.ref, c.flags = dv.Name, volDataVolume|flagIf(dv.Hotpluggable, volHotpluggable)
		if *c.dataVolume() == *dv {
			return c
		}
	}
	// Several sources, another kind, or a field the flags do not hold.
	return compactVolume{name: v.Name, sources: &volumeSources{claim: claim, dataVolume: dv, ephemeral: eph, memoryDump: dump}}
}

func (c *compactVolume) claim() *kubevirtv1.PersistentVolumeClaimVolumeSource {
	return &kubevirtv1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.ref, ReadOnly: c.flags&volReadOnly != 0},
		Hotpluggable:                      c.flags&volHotpluggable != 0,
	}
}

func (c *compactVolume) dataVolume() *kubevirtv1.DataVolumeSource {
	return &kubevirtv1.DataVolumeSource{Name: c.ref, Hotpluggable: c.flags&volHotpluggable != 0}
}

func (c *compactVolume) volume() kubevirtv1.Volume {
	v := kubevirtv1.Volume{Name: c.name}
	switch {
	case c.sources != nil:
		s := c.sources
		v.VolumeSource = kubevirtv1.VolumeSource{PersistentVolumeClaim: s.claim, DataVolume: s.dataVolume, Ephemeral: s.ephemeral, MemoryDump: s.memoryDump}
	case c.flags&volClaim != 0:
		v.PersistentVolumeClaim = c.claim()
	case c.flags&volDataVolume != 0:
		v.DataVolume = c.dataVolume()
	}
	return v
}

// labelSet holds a label map as pairs: a map of up to eight entries takes
// about 300 B, a pair 32 B. Its keys are interned.
type labelSet []labelPair

type labelPair struct{ key, value string }

func compactLabels(labels map[string]string) labelSet {
	if labels == nil {
		return nil
	}
	out := make(labelSet, 0, len(labels))
	for k, v := range labels {
		out = append(out, labelPair{key: interned.of(k), value: v})
	}
	return out
}

func (l labelSet) expand() map[string]string {
	if l == nil {
		return nil
	}
	out := make(map[string]string, len(l))
	for _, p := range l {
		out[p.key] = p.value
	}
	return out
}

// activePod is an entry of a VMI's status.activePods: a map of one entry
// takes about 300 B, a slice of them 32 B an entry.
type activePod struct {
	uid  types.UID
	node string
}

// compactDisk is a disk as leanDisks keeps it: serial is set only for a
// virtio disk whose serial its guest sees cut short (LongVirtioSerial).
type compactDisk struct {
	name      string
	shareable *bool
	serial    string
}

// compactVolumeStatus is a VolumeStatus as leanVMI keeps it; hasClaim
// says it had a persistentVolumeClaimInfo (of which claim is the name).
type compactVolumeStatus struct {
	name     string
	phase    kubevirtv1.VolumePhase
	hotplug  *kubevirtv1.HotplugVolumeStatus
	claim    string
	hasClaim bool
}

var (
	vmiKind = kubevirtv1.SchemeGroupVersion.WithKind("VirtualMachineInstance")
	vmKind  = kubevirtv1.SchemeGroupVersion.WithKind("VirtualMachine")
)

// typeMeta tells whether m is empty (as objects decoded by a typed client
// are) or gvk: those two a compact object can give back.
func typeMeta(m metav1.TypeMeta, gvk schema.GroupVersionKind) (typed, ok bool) {
	switch {
	case m == metav1.TypeMeta{}:
		return false, true
	case m.GroupVersionKind() == gvk:
		return true, true
	}
	return false, false
}

func typeMetaOf(typed bool, gvk schema.GroupVersionKind) metav1.TypeMeta {
	if !typed {
		return metav1.TypeMeta{}
	}
	return metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
}

// Compact returns the compact form of a VM or VMI that Lean has been
// applied to (CompactVM, CompactVMI), which Expand turns back into an
// equal lean object. It applies Lean itself first, so any VM or VMI may
// be given (and is changed); it returns every other object, a compact one
// included, unchanged, and so does it for a VM or VMI whose TypeMeta is
// neither empty nor its own kind's. Compact is an informer transform's
// last step (client-go may transform an object twice).
func Compact(obj any) any {
	switch o := obj.(type) {
	case *kubevirtv1.VirtualMachineInstance:
		if o != nil {
			if c := compactVMI(o); c != nil {
				return c
			}
		}
	case *kubevirtv1.VirtualMachine:
		if o != nil {
			if c := compactVM(o); c != nil {
				return c
			}
		}
	}
	return obj
}

// Expand returns the lean object a CompactVM or CompactVMI stands for, and
// any other object unchanged. The lean object shares its maps, slices and
// pointed-to values with the compact one: like an object in an informer's
// store, it must not be changed (copy it first).
func Expand(obj any) any {
	switch o := obj.(type) {
	case *CompactVMI:
		if o != nil {
			return o.Expand()
		}
	case *CompactVM:
		if o != nil {
			return o.Expand()
		}
	}
	return obj
}

func compactVMI(vmi *kubevirtv1.VirtualMachineInstance) *CompactVMI {
	typed, ok := typeMeta(vmi.TypeMeta, vmiKind)
	if !ok {
		return nil
	}
	leanVMI(vmi)
	internMeta(&vmi.ObjectMeta)
	st := &vmi.Status
	c := &CompactVMI{
		ObjectMeta: vmi.ObjectMeta,
		labels:     compactLabels(vmi.Labels),
		typed:      typed,
		phase:      internOf(st.Phase),
		nodeName:   interned.of(st.NodeName),
		volumes:    compactVolumes(vmi.Spec.Volumes),
		disks:      compactDisks(vmi.Spec.Domain.Devices.Disks),
		activePods: compactActivePods(st.ActivePods),
		migration:  st.MigrationState,
		eviction:   vmi.Spec.EvictionStrategy,
		conditions: st.Conditions,
	}
	if st.VolumeStatus != nil {
		c.volumeStatus = make([]compactVolumeStatus, len(st.VolumeStatus))
		for i := range st.VolumeStatus {
			vs := &st.VolumeStatus[i]
			out := compactVolumeStatus{name: vs.Name, phase: internOf(vs.Phase), hotplug: vs.HotplugVolume}
			if info := vs.PersistentVolumeClaimInfo; info != nil {
				out.claim, out.hasClaim = info.ClaimName, true
			}
			c.volumeStatus[i] = out
		}
	}
	c.ObjectMeta.Labels = nil
	return c
}

func (c *CompactVMI) meta() metav1.ObjectMeta {
	m := c.ObjectMeta
	m.Labels = c.labels.expand()
	return m
}

func (c *CompactVM) meta() metav1.ObjectMeta {
	m := c.ObjectMeta
	m.Labels = c.labels.expand()
	return m
}

// Expand returns the lean VMI c stands for (see Expand).
func (c *CompactVMI) Expand() *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{
		TypeMeta:   typeMetaOf(c.typed, vmiKind),
		ObjectMeta: c.meta(),
		Spec:       kubevirtv1.VirtualMachineInstanceSpec{Volumes: expandVolumes(c.volumes), Domain: expandDisks(c.disks), EvictionStrategy: c.eviction},
		Status: kubevirtv1.VirtualMachineInstanceStatus{
			Phase:          c.phase,
			NodeName:       c.nodeName,
			ActivePods:     expandActivePods(c.activePods),
			MigrationState: c.migration,
			Conditions:     c.conditions,
		},
	}
	if c.volumeStatus != nil {
		out := make([]kubevirtv1.VolumeStatus, len(c.volumeStatus))
		infos := make([]kubevirtv1.PersistentVolumeClaimInfo, len(c.volumeStatus))
		for i := range c.volumeStatus {
			vs := &c.volumeStatus[i]
			out[i] = kubevirtv1.VolumeStatus{Name: vs.name, Phase: vs.phase, HotplugVolume: vs.hotplug}
			if vs.hasClaim {
				infos[i].ClaimName = vs.claim
				out[i].PersistentVolumeClaimInfo = &infos[i]
			}
		}
		vmi.Status.VolumeStatus = out
	}
	return vmi
}

func compactVM(vm *kubevirtv1.VirtualMachine) *CompactVM {
	typed, ok := typeMeta(vm.TypeMeta, vmKind)
	if !ok {
		return nil
	}
	leanVM(vm)
	internMeta(&vm.ObjectMeta)
	in, st := &vm.Spec, &vm.Status
	c := &CompactVM{
		ObjectMeta:            vm.ObjectMeta,
		labels:                compactLabels(vm.Labels),
		typed:                 typed,
		running:               in.Running,
		runStrategy:           in.RunStrategy,
		instancetype:          in.Instancetype,
		preference:            in.Preference,
		updateVolumesStrategy: in.UpdateVolumesStrategy,
		created:               st.Created,
		ready:                 st.Ready,
		printableStatus:       internOf(st.PrintableStatus),
		conditions:            st.Conditions,
		stateChangeRequests:   st.StateChangeRequests,
		volumeRequests:        st.VolumeRequests,
		instancetypeRef:       st.InstancetypeRef,
		preferenceRef:         st.PreferenceRef,
		observedGeneration:    st.ObservedGeneration,
		desiredGeneration:     st.DesiredGeneration,
		volumeUpdateState:     st.VolumeUpdateState,
	}
	if t := in.Template; t != nil {
		c.template = &compactTemplate{labels: compactLabels(t.ObjectMeta.Labels), volumes: compactVolumes(t.Spec.Volumes), disks: compactDisks(t.Spec.Domain.Devices.Disks)}
	}
	if in.DataVolumeTemplates != nil {
		c.dataVolumeTemplates = make([]compactName, len(in.DataVolumeTemplates))
		for i := range in.DataVolumeTemplates {
			t := &in.DataVolumeTemplates[i]
			c.dataVolumeTemplates[i] = compactName{name: t.Name, namespace: t.Namespace}
		}
	}
	c.ObjectMeta.Labels = nil
	return c
}

// Expand returns the lean VM c stands for (see Expand).
func (c *CompactVM) Expand() *kubevirtv1.VirtualMachine {
	vm := &kubevirtv1.VirtualMachine{
		TypeMeta:   typeMetaOf(c.typed, vmKind),
		ObjectMeta: c.meta(),
		Spec: kubevirtv1.VirtualMachineSpec{
			Running:               c.running,
			RunStrategy:           c.runStrategy,
			Instancetype:          c.instancetype,
			Preference:            c.preference,
			UpdateVolumesStrategy: c.updateVolumesStrategy,
		},
		Status: kubevirtv1.VirtualMachineStatus{
			Created:             c.created,
			Ready:               c.ready,
			PrintableStatus:     c.printableStatus,
			Conditions:          c.conditions,
			StateChangeRequests: c.stateChangeRequests,
			VolumeRequests:      c.volumeRequests,
			InstancetypeRef:     c.instancetypeRef,
			PreferenceRef:       c.preferenceRef,
			ObservedGeneration:  c.observedGeneration,
			DesiredGeneration:   c.desiredGeneration,
			VolumeUpdateState:   c.volumeUpdateState,
		},
	}
	if t := c.template; t != nil {
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: t.labels.expand()},
			Spec:       kubevirtv1.VirtualMachineInstanceSpec{Volumes: expandVolumes(t.volumes), Domain: expandDisks(t.disks)},
		}
	}
	if c.dataVolumeTemplates != nil {
		vm.Spec.DataVolumeTemplates = make([]kubevirtv1.DataVolumeTemplateSpec, len(c.dataVolumeTemplates))
		for i, n := range c.dataVolumeTemplates {
			vm.Spec.DataVolumeTemplates[i].ObjectMeta = metav1.ObjectMeta{Name: n.name, Namespace: n.namespace}
		}
	}
	return vm
}

func compactActivePods(pods map[types.UID]string) []activePod {
	if pods == nil {
		return nil
	}
	out := make([]activePod, 0, len(pods))
	for uid, node := range pods {
		out = append(out, activePod{uid: uid, node: interned.of(node)})
	}
	return out
}

func expandActivePods(pods []activePod) map[types.UID]string {
	if pods == nil {
		return nil
	}
	out := make(map[types.UID]string, len(pods))
	for _, p := range pods {
		out[p.uid] = p.node
	}
	return out
}

// compactVolumes keeps of lean volumes what leanVolumes kept.
func compactVolumes(vols []kubevirtv1.Volume) []compactVolume {
	if vols == nil {
		return nil
	}
	out := make([]compactVolume, len(vols))
	for i := range vols {
		out[i] = compactVolumeOf(&vols[i])
	}
	return out
}

func expandVolumes(vols []compactVolume) []kubevirtv1.Volume {
	if vols == nil {
		return nil
	}
	out := make([]kubevirtv1.Volume, len(vols))
	for i := range vols {
		out[i] = vols[i].volume()
	}
	return out
}

// compactDisks keeps of a lean domain's disks (the shareable ones) their
// name and flag.
func compactDisks(disks []kubevirtv1.Disk) []compactDisk {
	if disks == nil {
		return nil
	}
	out := make([]compactDisk, len(disks))
	for i := range disks {
		out[i] = compactDisk{name: disks[i].Name, shareable: disks[i].Shareable}
		if LongVirtioSerial(&disks[i]) {
			out[i].serial = disks[i].Serial
		}
	}
	return out
}

func expandDisks(disks []compactDisk) kubevirtv1.DomainSpec {
	if disks == nil {
		return kubevirtv1.DomainSpec{}
	}
	out := make([]kubevirtv1.Disk, len(disks))
	for i := range disks {
		out[i] = kubevirtv1.Disk{Name: disks[i].name, Shareable: disks[i].shareable}
		if disks[i].serial != "" {
			out[i].Serial = disks[i].serial
			out[i].DiskDevice = kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}
		}
	}
	return kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Disks: out}}
}

// GetObjectKind: a compact object keeps its kind out of its fields (the
// cache that holds it knows it).
func (c *CompactVMI) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies c through its lean form.
func (c *CompactVMI) DeepCopyObject() runtime.Object {
	return compactVMI(c.Expand().DeepCopy())
}

// GetObjectKind: see CompactVMI.GetObjectKind.
func (c *CompactVM) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies c through its lean form.
func (c *CompactVM) DeepCopyObject() runtime.Object {
	return compactVM(c.Expand().DeepCopy())
}
