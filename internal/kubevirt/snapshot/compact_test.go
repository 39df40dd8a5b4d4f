package snapshot

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// TestCompactExpandsToTheLeanObject: a compact VM or VMI expands to exactly
// the lean object (reflect.DeepEqual, so nil and empty differ too), with
// its TypeMeta empty or set, and on objects that lack each optional part.
func TestCompactExpandsToTheLeanObject(t *testing.T) {
	bareVMI := func() any { return &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "bare"}} }
	bareVM := func() any { return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "bare"}} }
	emptyLists := func() any {
		vmi := fullVMI()
		vmi.Spec.Volumes, vmi.Status.VolumeStatus = []kubevirtv1.Volume{}, []kubevirtv1.VolumeStatus{}
		vmi.Status.ActivePods = map[types.UID]string{}
		return vmi
	}
	emptyLabels := func() any {
		vm := fullVM()
		vm.Labels, vm.Spec.Template.ObjectMeta.Labels = map[string]string{}, map[string]string{}
		return vm
	}
	migrating := func() any {
		vmi := fullVMI()
		vmi.Status.ActivePods = map[types.UID]string{"source-uid": "node-1", "target-uid": "node-2"}
		return vmi
	}
	shareable := func() any {
		vmi := fullVMI()
		vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "hp", Shareable: &leanYes})
		return vmi
	}
	vmShareable := func() any {
		vm := fullVM()
		vm.Spec.Template.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "hp", Shareable: &leanYes}}
		vm.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{}
		return vm
	}
	untyped := func(obj any) any {
		switch o := obj.(type) {
		case *kubevirtv1.VirtualMachine:
			o.TypeMeta = metav1.TypeMeta{}
		case *kubevirtv1.VirtualMachineInstance:
			o.TypeMeta = metav1.TypeMeta{}
		}
		return obj
	}
	for name, build := range map[string]func() any{
		"VMI": func() any { return fullVMI() }, "VMI without TypeMeta": func() any { return untyped(fullVMI()) },
		"bare VMI": bareVMI, "VMI with empty lists": emptyLists, "VMI with a shareable disk": shareable, "VMI with two active pods": migrating,
		"VM": func() any { return fullVM() }, "VM without TypeMeta": func() any { return untyped(fullVM()) },
		"bare VM": bareVM, "VM with a shareable disk": vmShareable, "VM with empty label maps": emptyLabels,
	} {
		t.Run(name, func(t *testing.T) {
			want := Lean(build())
			c := Compact(build())
			if reflect.TypeOf(c) == reflect.TypeOf(want) {
				t.Fatalf("Compact kept a %T", c)
			}
			if got := Expand(c); !reflect.DeepEqual(got, want) {
				t.Errorf("Expand(Compact(x)) differs from Lean(x)\n got %#v\nwant %#v", got, want)
			}
			if again := Compact(c); again != c {
				t.Error("Compact changed a compact object")
			}
		})
	}
}

// TestCompactLeavesOtherObjectsAlone: other kinds, nil pointers and a VM or
// VMI of a TypeMeta that Expand could not give back stay as they are, and
// Expand leaves every object but a compact one alone.
func TestCompactLeavesOtherObjectsAlone(t *testing.T) {
	pod := fullPod()
	if Compact(pod) != any(pod) || Expand(pod) != any(pod) {
		t.Error("a Pod changed")
	}
	for _, nilPtr := range []any{(*kubevirtv1.VirtualMachine)(nil), (*kubevirtv1.VirtualMachineInstance)(nil), (*CompactVM)(nil), (*CompactVMI)(nil), nil} {
		if Compact(nilPtr) != nilPtr || Expand(nilPtr) != nilPtr {
			t.Errorf("%#v changed", nilPtr)
		}
	}
	vmi := fullVMI()
	vmi.APIVersion = "kubevirt.io/v1alpha3"
	if Compact(vmi) != any(vmi) {
		t.Error("a VMI of another version was made compact")
	}
}

// TestCompactDeepCopy: a compact object's copy is equal and shares
// nothing the copy's reader could change.
func TestCompactDeepCopy(t *testing.T) {
	for _, obj := range []any{fullVMI(), fullVM()} {
		c := Compact(obj).(interface {
			DeepCopyObject() runtime.Object
		})
		cp := c.DeepCopyObject()
		if reflect.TypeOf(cp) != reflect.TypeOf(c) || !reflect.DeepEqual(Expand(cp), Expand(c)) {
			t.Fatalf("DeepCopyObject = %#v", cp)
		}
		switch e := Expand(cp).(type) {
		case *kubevirtv1.VirtualMachineInstance:
			e.Labels["cluster"] = "changed"
			e.Status.VolumeStatus[0].HotplugVolume.AttachPodName = "changed"
			if v := Expand(c).(*kubevirtv1.VirtualMachineInstance); v.Labels["cluster"] != "c1" || v.Status.VolumeStatus[0].HotplugVolume.AttachPodName != "hp-volume-x" {
				t.Error("the copy of a compact VMI shares with it")
			}
		case *kubevirtv1.VirtualMachine:
			e.Spec.Template.ObjectMeta.Labels["cluster"] = "changed"
			if Expand(c).(*kubevirtv1.VirtualMachine).Spec.Template.ObjectMeta.Labels["cluster"] != "c1" {
				t.Error("the copy of a compact VM shares with it")
			}
		}
	}
}

// TestCompactIsSmaller: the compact structs hold less than the typed ones
// they replace (the point of them; docs/performance.md).
func TestCompactIsSmaller(t *testing.T) {
	vmi, cvmi := unsafe.Sizeof(kubevirtv1.VirtualMachineInstance{}), unsafe.Sizeof(CompactVMI{})
	vm := unsafe.Sizeof(kubevirtv1.VirtualMachine{}) + unsafe.Sizeof(kubevirtv1.VirtualMachineInstanceTemplateSpec{})
	cvm := unsafe.Sizeof(CompactVM{}) + unsafe.Sizeof(compactTemplate{})
	vol, cvol := unsafe.Sizeof(kubevirtv1.Volume{}), unsafe.Sizeof(compactVolume{})
	vs, cvs := unsafe.Sizeof(kubevirtv1.VolumeStatus{})+unsafe.Sizeof(kubevirtv1.PersistentVolumeClaimInfo{}), unsafe.Sizeof(compactVolumeStatus{})
	t.Logf("VMI %d → %d B, VM with template %d → %d B, volume %d → %d B, volume status with claim info %d → %d B", vmi, cvmi, vm, cvm, vol, cvol, vs, cvs)
	if cvmi*3 > vmi || cvm*2 > vm || cvol*2 > vol || cvs*2 > vs {
		t.Error("a compact struct is not much smaller than the typed one")
	}
}

// TestCompactVolumes: a volume of one claim or one DataVolume holds its
// source inline (no struct of its own), with its flags; any other keeps its
// sources; each comes back equal.
func TestCompactVolumes(t *testing.T) {
	claim := func(name string, readOnly, hotplug bool) *kubevirtv1.PersistentVolumeClaimVolumeSource {
		return &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name, ReadOnly: readOnly}, Hotpluggable: hotplug}
	}
	for _, tc := range []struct {
		name   string
		src    kubevirtv1.VolumeSource
		inline bool
	}{
		{"claim", kubevirtv1.VolumeSource{PersistentVolumeClaim: claim("c", false, false)}, true},
		{"hot-plugged read-only claim", kubevirtv1.VolumeSource{PersistentVolumeClaim: claim("c", true, true)}, true},
		{"claim without a name", kubevirtv1.VolumeSource{PersistentVolumeClaim: claim("", false, false)}, true},
		{"DataVolume", kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "dv"}}, true},
		{"hot-plugged DataVolume", kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "dv", Hotpluggable: true}}, true},
		{"none", kubevirtv1.VolumeSource{}, true},
		{"claim and DataVolume", kubevirtv1.VolumeSource{PersistentVolumeClaim: claim("c", false, false), DataVolume: &kubevirtv1.DataVolumeSource{Name: "dv"}}, false},
		{"ephemeral", kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "golden"}}}, false},
		{"memory dump", kubevirtv1.VolumeSource{MemoryDump: &kubevirtv1.MemoryDumpVolumeSource{}}, false},
	} {
		v := kubevirtv1.Volume{Name: "v", VolumeSource: tc.src}
		c := compactVolumeOf(&v)
		if got := c.volume(); !reflect.DeepEqual(got, v) {
			t.Errorf("%s: came back as %#v", tc.name, got)
		}
		if inline := c.sources == nil; inline != tc.inline {
			t.Errorf("%s: inline %t, want %t", tc.name, inline, tc.inline)
		}
	}
}

// TestCompactHoldsLabelsAsPairs: the labels leave the metadata for pairs
// (no map per object), and come back as the map.
func TestCompactHoldsLabelsAsPairs(t *testing.T) {
	vmi := fullVMI()
	vmi.Labels = map[string]string{"a": "1", "b": "2", "kubevirt.io/nodeName": "node-1"}
	c := Compact(vmi.DeepCopy()).(*CompactVMI)
	if c.ObjectMeta.Labels != nil || len(c.labels) != 3 {
		t.Errorf("labels: metadata %v, pairs %v", c.ObjectMeta.Labels, c.labels)
	}
	if got := Expand(c).(*kubevirtv1.VirtualMachineInstance).Labels; !reflect.DeepEqual(got, vmi.Labels) {
		t.Errorf("labels came back as %v", got)
	}
	vm := Compact(fullVM()).(*CompactVM)
	if vm.ObjectMeta.Labels != nil || len(vm.labels) != 1 || len(vm.template.labels) != 1 {
		t.Errorf("VM labels: metadata %v, pairs %v, template %v", vm.ObjectMeta.Labels, vm.labels, vm.template.labels)
	}
}

// BenchmarkExpand: what a read from a compact cache costs before the
// cache's deep copy (a VMI and a VM of four claim volumes, as tether-bench
// seeds them).
func BenchmarkExpand(b *testing.B) {
	vmi, vm := fullVMI(), fullVM()
	vols := make([]kubevirtv1.Volume, 4)
	for i := range vols {
		name := fmt.Sprintf("hp%d", i)
		vols[i] = kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}, Hotpluggable: true}}}
	}
	vmi.Spec.Volumes, vm.Spec.Template.Spec.Volumes = vols, vols
	vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, vmi.Status.VolumeStatus[0], vmi.Status.VolumeStatus[0], vmi.Status.VolumeStatus[0])
	cvmi, cvm := Compact(vmi), Compact(vm)
	for b.Loop() {
		Expand(cvmi)
		Expand(cvm)
	}
}
