package snapshot

import (
	"reflect"
	"testing"
	"unsafe"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// TestVMIOfKeepsWhatLeanKeeps: what the checks read of a VMI or VM (VMIOf,
// VMOf) is Lean's object, field for field: Typed gives back Lean's result
// (but its TypeMeta), so no check can read less than it did of the lean
// object, and none can read more (the types have no other field). The
// object given is not changed.
func TestVMIOfKeepsWhatLeanKeeps(t *testing.T) {
	vmi := fullVMI()
	before := vmi.DeepCopy()
	got := VMIOf(vmi)
	if !reflect.DeepEqual(vmi, before) {
		t.Fatal("VMIOf changed the VMI it was given")
	}
	want := Lean(vmi.DeepCopy()).(*kubevirtv1.VirtualMachineInstance)
	want.TypeMeta = kubevirtv1.VirtualMachineInstance{}.TypeMeta
	if typed := got.Typed(); !reflect.DeepEqual(&typed, want) {
		t.Errorf("VMIOf(vmi).Typed():\n%#v\nLean(vmi):\n%#v", &typed, want)
	}
	vm := fullVM()
	beforeVM := vm.DeepCopy()
	gotVM := VMOf(vm)
	if !reflect.DeepEqual(vm, beforeVM) {
		t.Fatal("VMOf changed the VM it was given")
	}
	wantVM := Lean(vm.DeepCopy()).(*kubevirtv1.VirtualMachine)
	wantVM.TypeMeta = kubevirtv1.VirtualMachine{}.TypeMeta
	if typed := gotVM.Typed(); !reflect.DeepEqual(&typed, wantVM) {
		t.Errorf("VMOf(vm).Typed():\n%#v\nLean(vm):\n%#v", &typed, wantVM)
	}
	// Of a lean object, the same again.
	if again := VMIOf(want); !reflect.DeepEqual(again, got) {
		t.Error("VMIOf of the lean VMI differs from VMIOf of the whole one")
	}
	if again := VMOf(wantVM); !reflect.DeepEqual(again, gotVM) {
		t.Error("VMOf of the lean VM differs from VMOf of the whole one")
	}
	if VMIsOf() != nil || VMsOf() != nil {
		t.Error("VMIsOf and VMsOf of nothing must be nil")
	}
}

// TestVMIDeepCopy: a copy shares nothing with its original, and is a VMI
// (not the metadata alone, which the embedded ObjectMeta's method would
// copy).
func TestVMIDeepCopy(t *testing.T) {
	vmi := VMIOf(fullVMI())
	cp := vmi.DeepCopy()
	if !reflect.DeepEqual(cp, &vmi) {
		t.Fatalf("copy differs:\n%#v\n%#v", cp, &vmi)
	}
	cp.Labels["cluster"] = "changed"
	cp.Spec.Volumes[0].Name = "changed"
	cp.Status.VolumeStatus[0].Name = "changed"
	if vmi.Labels["cluster"] == "changed" || vmi.Spec.Volumes[0].Name == "changed" || vmi.Status.VolumeStatus[0].Name == "changed" {
		t.Error("the copy of a VMI shares with it")
	}
	vm := VMOf(fullVM())
	cpVM := vm.DeepCopy()
	if !reflect.DeepEqual(cpVM, &vm) {
		t.Fatalf("copy differs:\n%#v\n%#v", cpVM, &vm)
	}
	cpVM.Spec.Template.ObjectMeta.Labels["cluster"] = "changed"
	cpVM.Spec.DataVolumeTemplates[0].Name = "changed"
	if vm.Spec.Template.ObjectMeta.Labels["cluster"] == "changed" || vm.Spec.DataVolumeTemplates[0].Name == "changed" {
		t.Error("the copy of a VM shares with it")
	}
}

// TestVMIIsSmaller: what the checks read of a VMI, of a VM with its
// template and of a volume status, is much smaller than the KubeVirt structs (the point of the
// types; docs/performance.md).
func TestVMIIsSmaller(t *testing.T) {
	vmi, own := unsafe.Sizeof(kubevirtv1.VirtualMachineInstance{}), unsafe.Sizeof(VMI{})
	vm := unsafe.Sizeof(kubevirtv1.VirtualMachine{}) + unsafe.Sizeof(kubevirtv1.VirtualMachineInstanceTemplateSpec{})
	ownVM := unsafe.Sizeof(VM{}) + unsafe.Sizeof(VMTemplate{})
	vs := unsafe.Sizeof(kubevirtv1.VolumeStatus{}) + unsafe.Sizeof(kubevirtv1.PersistentVolumeClaimInfo{})
	ownVS := unsafe.Sizeof(VolumeStatus{}) + unsafe.Sizeof(ClaimInfo{})
	t.Logf("VMI %d → %d B, VM with template %d → %d B, volume status with claim info %d → %d B", vmi, own, vm, ownVM, vs, ownVS)
	if own*3 > vmi || ownVM*2 > vm || ownVS*2 > vs {
		t.Error("VMI, VM or VolumeStatus is not much smaller than the KubeVirt struct")
	}
}

// TestVMIIsFinal: IsFinal is KubeVirt's.
func TestVMIIsFinal(t *testing.T) {
	for _, p := range []kubevirtv1.VirtualMachineInstancePhase{"", kubevirtv1.Pending, kubevirtv1.Scheduling,
		kubevirtv1.Scheduled, kubevirtv1.Running, kubevirtv1.Succeeded, kubevirtv1.Failed, kubevirtv1.Unknown, kubevirtv1.WaitingForSync} {
		typed := kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: p}}
		own := VMIOf(&typed)
		if own.IsFinal() != typed.IsFinal() {
			t.Errorf("phase %q: IsFinal %t, KubeVirt's %t", p, own.IsFinal(), typed.IsFinal())
		}
	}
}
