package act_test

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/testing/emulator"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// danglingPolicy asks for the check by name, as
// `tether fix --check DanglingVolumeReference` does.
func danglingPolicy() check.Policy {
	p := policy()
	p.Checks = []string{check.DanglingVolumeReference}
	return p
}

// danglingPlan observes the namespace and returns the DanglingVolumeReference
// finding about object name (kind VirtualMachine or VirtualMachineInstance)
// and volume.
func (s *scene) danglingPlan(p check.Policy, kind, name, volume string) drift.Finding {
	s.t.Helper()
	snap, err := observe.Observe(s.ctx, s.c, observe.Options{Namespace: s.ns})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, f := range check.Run(snap, p, time.Now()) {
		if f.Check == check.DanglingVolumeReference && f.Object.Kind == kind && f.Object.Name == name && f.Volume == volume {
			return f
		}
	}
	s.t.Fatalf("no DanglingVolumeReference finding for %s %s/%s volume %s", kind, s.ns, name, volume)
	return drift.Finding{}
}

func (s *scene) getVM(name string) *kubevirtv1.VirtualMachine {
	s.t.Helper()
	var vm kubevirtv1.VirtualMachine
	if err := s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, &vm); err != nil {
		s.t.Fatal(err)
	}
	return &vm
}

func specLists(vm *kubevirtv1.VirtualMachine, volume string) bool {
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name == volume {
			return true
		}
	}
	return false
}

// deletePVC deletes a claim. With gone, it also drops the claim's
// finalizers (admission adds kubernetes.io/pvc-protection, and no controller
// removes it here) and waits until the claim no longer exists; otherwise it
// waits until the claim is terminating.
func (s *scene) deletePVC(name string, gone bool) {
	s.t.Helper()
	pvc := fixture.PVC(name)
	pvc.Namespace = s.ns
	if err := s.c.Delete(s.ctx, pvc); err != nil {
		s.t.Fatal(err)
	}
	testenv.Eventually(s.t, 10*time.Second, "PVC "+name+" deleted", func() (bool, error) {
		err := s.c.Get(s.ctx, client.ObjectKeyFromObject(pvc), pvc)
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil || pvc.DeletionTimestamp == nil:
			return false, err
		case !gone:
			return true, nil
		}
		pvc.Finalizers = nil
		return false, client.IgnoreNotFound(s.c.Update(s.ctx, pvc))
	})
}

// A stopped VM whose hot-plugged claim was deleted: the fix removes the
// reference from the VM spec and leaves the boot disk alone.
func TestApply_danglingHotplugOfStoppedVM_removedFromVMSpec(t *testing.T) {
	s := newScene(t)
	s.create(fixture.PVC("root"), fixture.PVC("pvc-gone"),
		fixture.VM("vm-a", fixture.WithVolume("root", fixture.PVC("root")), fixture.WithVolume("pvc-gone", fixture.PVC("pvc-gone"), fixture.Hotpluggable())))
	s.deletePVC("pvc-gone", true)

	f := s.danglingPlan(danglingPolicy(), "VirtualMachine", "vm-a", "pvc-gone")
	if !f.Action.Safe || f.Action.Type != check.VMRemoveVolume {
		t.Fatalf("want a safe VMRemoveVolume, got %+v\nevidence: %q", f.Action, f.Evidence)
	}
	if p := s.danglingPlan(policy(), "VirtualMachine", "vm-a", "pvc-gone"); p.Action.Safe || p.Action.BlockedBy != drift.NotRequested {
		t.Fatalf("without naming the check: want blocked by %s, got %+v", drift.NotRequested, p.Action)
	}
	r := s.executor(danglingPolicy(), observe.Options{}).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Applied {
		t.Fatalf("want Applied, got %s: %s (%v)", r.Outcome, r.Message, r.Err)
	}
	vm := s.getVM("vm-a")
	if specLists(vm, "pvc-gone") || !specLists(vm, "root") {
		t.Fatalf("want only the dangling volume gone, spec volumes: %+v", vm.Spec.Template.Spec.Volumes)
	}
	if evs := s.events(f.ID); len(evs) != 1 || evs[0].Reason != act.ReasonDanglingRemoved || evs[0].InvolvedObject.Kind != "VirtualMachine" || evs[0].InvolvedObject.UID != f.Object.UID {
		t.Fatalf("want one Event on the VM, got %+v", evs)
	}
}

// A boot disk whose claim is gone is reported with the manual procedure and
// never acted on.
func TestApply_danglingBootDisk_reportOnly(t *testing.T) {
	s := newScene(t)
	s.create(fixture.VM("vm-b", fixture.WithVolume("root", fixture.PVC("root-gone"))))
	f := s.danglingPlan(danglingPolicy(), "VirtualMachine", "vm-b", "root")
	if f.Action.Safe || f.Action.Type != drift.None || f.Action.BlockedBy != check.VolumeNotHotpluggable || !strings.Contains(f.Action.Remedy, "kubectl edit vm vm-b") {
		t.Fatalf("want report only (%s) with the manual procedure, got %+v", check.VolumeNotHotpluggable, f.Action)
	}
	if r := s.executor(danglingPolicy(), observe.Options{}).Apply(s.ctx, f, act.Evidence{}); r.Outcome != drift.Refused {
		t.Fatalf("want Refused, got %s: %s", r.Outcome, r.Message)
	}
	if !specLists(s.getVM("vm-b"), "root") {
		t.Fatal("the boot disk was touched")
	}
}

// A running VM whose hot-plugged claim is being deleted while attached: the
// reference is not provably unused, so it is blocked and never touched.
// (Its claim is being deleted and held by finalizers: it still exists.)
func TestApply_danglingHotplugOfRunningVM_refused(t *testing.T) {
	s := newScene(t)
	held := fixture.PVC("pvc-held")
	held.Finalizers = []string{fixture.TestFinalizer}
	s.create(held)
	t.Cleanup(func() {
		var pvc = fixture.PVC("pvc-held")
		pvc.Namespace = s.ns
		if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(pvc), pvc); err == nil {
			pvc.Finalizers = nil
			_ = s.c.Update(s.ctx, pvc)
		}
	})
	s.runningVM("vm-c", fixture.WithVolume("pvc-held", fixture.PVC("pvc-held"), fixture.Hotpluggable()))
	s.waitVMI("vm-c", "pvc-held attached", func(vmi *kubevirtv1.VirtualMachineInstance) bool { return hasHotplug(vmi, "pvc-held") })
	s.deletePVC("pvc-held", false)

	// Being deleted but held by finalizers: the claim still exists, so the
	// reference is not dangling and nothing is proposed.
	f := s.danglingPlan(danglingPolicy(), "VirtualMachine", "vm-c", "pvc-held")
	if f.Action.Safe || f.Action.BlockedBy != check.DeletionPostponed {
		t.Fatalf("want blocked by %s, got %+v\nevidence: %q", check.DeletionPostponed, f.Action, f.Evidence)
	}
	// Even a plan that claimed otherwise is re-checked live and refused.
	forged := f
	forged.Action = drift.Action{Type: check.VMRemoveVolume, Safe: true}
	r := s.executor(danglingPolicy(), observe.Options{}).Apply(s.ctx, forged, act.Evidence{})
	if r.Outcome != drift.Refused {
		t.Fatalf("want Refused, got %s: %s", r.Outcome, r.Message)
	}
	if !specLists(s.getVM("vm-c"), "pvc-held") || !hasHotplug(s.vmi("vm-c"), "pvc-held") {
		t.Fatal("the volume was touched")
	}
}

// The claim is re-created under the same name between plan and apply: the
// live re-check finds it and nothing is changed.
func TestApply_danglingClaimRecreatedAfterPlan_refused(t *testing.T) {
	s := newScene(t)
	s.create(fixture.PVC("pvc-back"), fixture.VM("vm-d", fixture.WithVolume("pvc-back", fixture.PVC("pvc-back"), fixture.Hotpluggable())))
	s.deletePVC("pvc-back", true)
	f := s.danglingPlan(danglingPolicy(), "VirtualMachine", "vm-d", "pvc-back")
	if !f.Action.Safe {
		t.Fatalf("want a safe action, got %+v", f.Action)
	}
	s.create(fixture.PVC("pvc-back"))
	r := s.executor(danglingPolicy(), observe.Options{}).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Refused || !strings.Contains(r.Message, "PVC "+s.ns+"/pvc-back exists") {
		t.Fatalf("want Refused naming the re-created claim, got %s: %s", r.Outcome, r.Message)
	}
	if !specLists(s.getVM("vm-d"), "pvc-back") {
		t.Fatal("the reference was removed although its claim is back")
	}
}

// A running VM whose hot-plugged claim is gone and which never attached it
// (no attachment pod, volume pending): provably unused, removed at VM level.
func TestApply_danglingUnusedHotplugOfRunningVM_removed(t *testing.T) {
	s := newScene(t)
	s.runningVM("vm-e", fixture.WithVolume("pvc-never", fixture.PVC("pvc-never"), fixture.Hotpluggable()))
	s.waitVMI("vm-e", "pvc-never pending", func(vmi *kubevirtv1.VirtualMachineInstance) bool {
		for _, vs := range vmi.Status.VolumeStatus {
			if vs.Name == "pvc-never" && vs.Phase == kubevirtv1.VolumePending {
				return true
			}
		}
		return false
	})
	f := s.danglingPlan(danglingPolicy(), "VirtualMachine", "vm-e", "pvc-never")
	if !f.Action.Safe || f.Action.Type != check.VMRemoveVolume {
		t.Fatalf("want a safe VMRemoveVolume, got %+v\nevidence: %q", f.Action, f.Evidence)
	}
	r := s.executor(danglingPolicy(), observe.Options{}).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Applied {
		t.Fatalf("want Applied, got %s: %s (%v)", r.Outcome, r.Message, r.Err)
	}
	if specLists(s.getVM("vm-e"), "pvc-never") {
		t.Fatal("volume still in the VM spec")
	}
	s.waitVMI("vm-e", "pvc-never gone from the VMI", func(vmi *kubevirtv1.VirtualMachineInstance) bool { return !lists(vmi, "pvc-never") })
}

// A stopped VM whose hot-plugged claim is gone, but whose status still
// holds an addvolume request for that volume that virt-controller has not
// applied: KubeVirt is changing the volume itself, so the live re-check
// refuses (AdditionPending) and the VM spec is left as it is.
func TestApply_danglingWithPendingAddition_refused(t *testing.T) {
	s := newScene(t)
	s.create(fixture.PVC("pvc-add"), fixture.VM("vm-f", fixture.WithVolume("pvc-add", fixture.PVC("pvc-add"), fixture.Hotpluggable())))
	s.deletePVC("pvc-add", true)
	f := s.danglingPlan(danglingPolicy(), "VirtualMachine", "vm-f", "pvc-add")
	if !f.Action.Safe {
		t.Fatalf("want a safe action before the request, got %+v", f.Action)
	}
	// virt-controller has not got to it: the emulator leaves the VM alone.
	vm := s.getVM("vm-f")
	if vm.Annotations == nil {
		vm.Annotations = map[string]string{}
	}
	vm.Annotations[emulator.PausedAnnotation] = "true"
	if err := s.c.Update(s.ctx, vm); err != nil {
		t.Fatal(err)
	}
	vm.Status.VolumeRequests = []kubevirtv1.VirtualMachineVolumeRequest{{AddVolumeOptions: &kubevirtv1.AddVolumeOptions{
		Name: "pvc-add", Disk: &kubevirtv1.Disk{}, VolumeSource: &kubevirtv1.HotplugVolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: true},
		},
	}}}
	vm.Status.VolumeRequests[0].AddVolumeOptions.VolumeSource.PersistentVolumeClaim.ClaimName = "pvc-add"
	if err := s.c.Status().Update(s.ctx, vm); err != nil {
		t.Fatal(err)
	}
	r := s.executor(danglingPolicy(), observe.Options{}).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Refused || !strings.Contains(r.Message, string(check.AdditionPending)) {
		t.Fatalf("want Refused by %s, got %s: %s", check.AdditionPending, r.Outcome, r.Message)
	}
	if !specLists(s.getVM("vm-f"), "pvc-add") {
		t.Fatal("the reference was removed although KubeVirt has a pending addvolume for it")
	}
}
