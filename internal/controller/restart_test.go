package controller_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller/restart"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/testing/emulator"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// restartCfg enables only the "on restart" mode (no check), in this
// world's namespace.
func (w *world) restartCfg(dryRun bool) *config.Config {
	c := config.Default()
	c.Scope.Namespaces = []string{w.ns}
	c.DanglingOnRestart.Enabled = true
	c.DanglingOnRestart.Settle.Duration = time.Second
	c.DryRun = dryRun
	c.Backoff.Base.Duration, c.Backoff.Max.Duration = 200*time.Millisecond, 2*time.Second
	c.ActionTimeout.Duration = 20 * time.Second
	return &c
}

// declarativeOnly switches HotplugVolumes off for this test, leaving the
// DeclarativeHotplugVolumes gate (on by default): virt-api then edits the VM
// spec directly, which also works while the emulator leaves the VM alone.
func (w *world) declarativeOnly() {
	w.t.Helper()
	if err := w.env.Emulator.SetFeatureGates(w.ctx); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = w.env.Emulator.SetFeatureGates(w.ctx, "HotplugVolumes") })
}

func (w *world) create(objs ...client.Object) {
	w.t.Helper()
	for _, o := range objs {
		o.SetUID("")
		if err := w.c.Create(w.ctx, o); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) getVM(name string) *kubevirtv1.VirtualMachine {
	w.t.Helper()
	var vm kubevirtv1.VirtualMachine
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: name}, &vm); err != nil {
		w.t.Fatal(err)
	}
	return &vm
}

func (w *world) updateVM(name string, change func(*kubevirtv1.VirtualMachine)) {
	w.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vm := w.getVM(name)
		change(vm)
		return w.c.Update(w.ctx, vm)
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

func specLists(vm *kubevirtv1.VirtualMachine, volume string) bool {
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name == volume {
			return true
		}
	}
	return false
}

// paused makes the emulator's virt-controller leave the VM alone. It
// stands in for the moment between a start request and the VMI: the
// emulator would otherwise create and run the VMI within ~100ms.
func paused(on bool) func(*kubevirtv1.VirtualMachine) {
	return func(vm *kubevirtv1.VirtualMachine) {
		if on {
			if vm.Annotations == nil {
				vm.Annotations = map[string]string{}
			}
			vm.Annotations[emulator.PausedAnnotation] = "true"
		} else {
			delete(vm.Annotations, emulator.PausedAnnotation)
		}
	}
}

func alwaysRun(vm *kubevirtv1.VirtualMachine) {
	s := kubevirtv1.RunStrategyAlways
	vm.Spec.RunStrategy = &s
}

// eventsOn returns the Events of reason whose subject is the named object.
func (w *world) eventsOn(name, reason string) []corev1.Event {
	var out []corev1.Event
	for _, e := range w.events(reason) {
		if e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func (w *world) waitEvent(name, reason string) corev1.Event {
	w.t.Helper()
	var got []corev1.Event
	testenv.Eventually(w.t, 30*time.Second, "event "+reason+" on "+name, func() (bool, error) {
		got = w.eventsOn(name, reason)
		return len(got) > 0, nil
	})
	return got[0]
}

// The Nova reboot hook: a stopped VM whose spec hot-plugs a PVC that is
// gone is left alone while it stays stopped; once it is started, the
// dangling reference is removed before the VMI exists, the boot disk stays,
// an Event says why, and the VM then runs.
func TestController_onRestart_stoppedThenStarted_removesDanglingHotplug(t *testing.T) {
	w := newWorld(t)
	w.declarativeOnly()
	w.create(
		fixture.PVC("boot", fixture.InNamespace(w.ns)),
		fixture.VM("vm-s", fixture.InNamespace(w.ns),
			fixture.WithVolume("boot", fixture.PVC("boot")),
			fixture.WithVolume("data", fixture.PVC("gone"), fixture.Hotpluggable())),
	)
	w.start(w.restartCfg(false))

	// Stopped (runStrategy Halted): nothing changes.
	time.Sleep(2 * time.Second)
	if !specLists(w.getVM("vm-s"), "data") {
		t.Fatal("the reference of a stopped VM was removed")
	}
	for _, r := range []string{restart.EventDanglingRemovedOnStart, restart.EventDanglingBlocksStart, act.ReasonDanglingRemoved} {
		if evs := w.eventsOn("vm-s", r); len(evs) > 0 {
			t.Fatalf("stopped VM: unexpected %s events: %v", r, evs)
		}
	}

	// Start it.
	w.updateVM("vm-s", func(vm *kubevirtv1.VirtualMachine) { paused(true)(vm); alwaysRun(vm) })
	testenv.Eventually(t, 30*time.Second, "the dangling reference leaves the VM spec", func() (bool, error) {
		return !specLists(w.getVM("vm-s"), "data"), nil
	})
	if !specLists(w.getVM("vm-s"), "boot") {
		t.Fatal("the boot disk was removed")
	}
	ev := w.waitEvent("vm-s", restart.EventDanglingRemovedOnStart)
	if !strings.Contains(ev.Message, `"gone"`) || !strings.Contains(ev.Message, "does not exist") {
		t.Errorf("the Event does not say why: %q", ev.Message)
	}
	w.waitEvent("vm-s", act.ReasonDanglingRemoved)
	// Like the other modes, it keeps a Finding record: its action is
	// claimed there, counted, and visible with kubectl.
	rec := w.waitFinding("vm-s", "data", v1alpha1.PhaseResolved, string(drift.Applied))
	if rec.Spec.Check != check.DanglingVolumeReference || rec.Status.LastAttempt == nil || rec.Status.Claim == "" {
		t.Errorf("the record does not show the action: %+v", rec)
	}

	// The emulator's virt-controller takes over and the VM runs.
	w.updateVM("vm-s", paused(false))
	w.waitVMI("vm-s", "running", func(v *kubevirtv1.VirtualMachineInstance) bool { return v.Status.Phase == kubevirtv1.Running })
	if evs := w.eventsOn("vm-s", restart.EventDanglingRemovedOnStart); len(evs) != 1 {
		t.Errorf("want one %s event, got %d", restart.EventDanglingRemovedOnStart, len(evs))
	}
}

// A running VM is not "about to start": its dangling hot-plugged reference
// is left to the operator (and to DanglingVolumeReference in tether fix),
// even when the check alone would call the removal safe.
func TestController_onRestart_runningVM_untouched(t *testing.T) {
	w := newWorld(t)
	w.create(
		fixture.PVC("att", fixture.InNamespace(w.ns)),
		fixture.VM("vm-c", fixture.InNamespace(w.ns), fixture.Running(),
			fixture.WithVolume("att", fixture.PVC("att"), fixture.Hotpluggable())),
	)
	w.waitVMI("vm-c", "running with att attached", func(v *kubevirtv1.VirtualMachineInstance) bool {
		return v.Status.Phase == kubevirtv1.Running && lists(v, "att")
	})
	w.start(w.restartCfg(false))
	// The claim goes away underneath the running VM (the apiserver's
	// pvc-protection finalizer is released by hand: no kube-controller-manager
	// runs here).
	var pvc corev1.PersistentVolumeClaim
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "att"}, &pvc); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Delete(w.ctx, &pvc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "PVC att gone", func() (bool, error) {
		var p corev1.PersistentVolumeClaim
		err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "att"}, &p)
		if err != nil {
			return client.IgnoreNotFound(err) == nil, client.IgnoreNotFound(err)
		}
		p.Finalizers = nil
		return false, client.IgnoreNotFound(w.c.Update(w.ctx, &p))
	})
	time.Sleep(3 * time.Second)
	if !specLists(w.getVM("vm-c"), "att") {
		t.Fatal("the reference of a running VM was removed")
	}
	if v := w.vmi("vm-c"); v == nil || v.Status.Phase != kubevirtv1.Running {
		t.Fatalf("the VMI no longer runs: %v", v)
	}
	for _, r := range []string{restart.EventDanglingRemovedOnStart, act.ReasonDanglingRemoved, restart.EventDanglingWouldRemove} {
		if evs := w.eventsOn("vm-c", r); len(evs) > 0 {
			t.Fatalf("running VM: unexpected %s events: %v", r, evs)
		}
	}
}

// Dry run: a starting VM's dangling reference stays; one Event says what
// would be done.
func TestController_onRestart_dryRun_onlyRecords(t *testing.T) {
	w := newWorld(t)
	w.declarativeOnly()
	vm := fixture.VM("vm-d", fixture.InNamespace(w.ns), fixture.WithVolume("data", fixture.PVC("gone"), fixture.Hotpluggable()))
	paused(true)(vm)
	alwaysRun(vm)
	w.create(vm)
	w.start(w.restartCfg(true))
	ev := w.waitEvent("vm-d", restart.EventDanglingWouldRemove)
	if !strings.Contains(ev.Message, "dry run") || !strings.Contains(ev.Message, `"data"`) {
		t.Errorf("the Event does not say what would be done: %q", ev.Message)
	}
	time.Sleep(2 * time.Second)
	if !specLists(w.getVM("vm-d"), "data") {
		t.Fatal("dry run removed the reference")
	}
	if evs := w.eventsOn("vm-d", restart.EventDanglingWouldRemove); len(evs) != 1 {
		t.Errorf("want one %s event, got %d", restart.EventDanglingWouldRemove, len(evs))
	}
	for _, r := range []string{restart.EventDanglingRemovedOnStart, act.ReasonDanglingRemoved} {
		if evs := w.eventsOn("vm-d", r); len(evs) > 0 {
			t.Fatalf("dry run: unexpected %s events: %v", r, evs)
		}
	}
}

// A starting VM whose boot disk's claim is gone: nothing is changed, and
// one Warning Event names the claim and the manual procedure.
func TestController_onRestart_danglingBootDisk_warnsOnce(t *testing.T) {
	w := newWorld(t)
	w.declarativeOnly()
	vm := fixture.VM("vm-b", fixture.InNamespace(w.ns), fixture.WithVolume("boot", fixture.PVC("missing-boot")))
	paused(true)(vm)
	alwaysRun(vm)
	w.create(vm)
	w.start(w.restartCfg(false))
	ev := w.waitEvent("vm-b", restart.EventDanglingBlocksStart)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "missing-boot") || !strings.Contains(ev.Message, "kubectl edit vm vm-b") {
		t.Errorf("want a Warning naming the claim and the procedure, got %s %q", ev.Type, ev.Message)
	}
	// Another change to the VM wakes the reconciler again: still one Event.
	w.updateVM("vm-b", func(vm *kubevirtv1.VirtualMachine) { vm.Labels = map[string]string{"touched": "yes"} })
	time.Sleep(2 * time.Second)
	if !specLists(w.getVM("vm-b"), "boot") {
		t.Fatal("the boot disk was removed")
	}
	if evs := w.eventsOn("vm-b", restart.EventDanglingBlocksStart); len(evs) != 1 {
		t.Errorf("want one %s event, got %d", restart.EventDanglingBlocksStart, len(evs))
	}
	for _, r := range []string{restart.EventDanglingRemovedOnStart, act.ReasonDanglingRemoved} {
		if evs := w.eventsOn("vm-b", r); len(evs) > 0 {
			t.Fatalf("boot disk: unexpected %s events: %v", r, evs)
		}
	}
}
