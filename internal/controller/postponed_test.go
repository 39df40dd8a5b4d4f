package controller_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/act"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/fixture"
	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/testenv"
)

// Protection and danglingOnRestart together (review F1): a user deletes the
// hot-plugged claim of a stopped VM by mistake; tether's finalizer postpones
// the deletion. When the VM is started, the reference to the Terminating
// claim is not dangling: it stays in the VM spec, the claim stays, and the
// Event on the VM says why and what the operator can do.
func TestController_protectionAndOnRestart_neverUndoProtection(t *testing.T) {
	w := newWorld(t)
	w.declarativeOnly()
	cfg := w.restartCfg(false)
	cfg.Protection.Enabled = true
	w.create(
		fixture.PVC("boot", fixture.InNamespace(w.ns)),
		fixture.PVC("data", fixture.InNamespace(w.ns)),
		fixture.VM("vm-p", fixture.InNamespace(w.ns),
			fixture.WithVolume("boot", fixture.PVC("boot")),
			fixture.WithVolume("data", fixture.PVC("data"), fixture.Hotpluggable())),
	)
	w.start(cfg)

	key := client.ObjectKey{Namespace: w.ns, Name: "data"}
	claim := func() *corev1.PersistentVolumeClaim {
		t.Helper()
		var pvc corev1.PersistentVolumeClaim
		if err := w.c.Get(w.ctx, key, &pvc); err != nil {
			t.Fatalf("claim data: %v", err)
		}
		return &pvc
	}
	testenv.Eventually(t, 30*time.Second, "tether's finalizer on the stopped VM's claim", func() (bool, error) {
		return slices.Contains(claim().Finalizers, protect.Finalizer), nil
	})
	// `kubectl delete pvc data`, by mistake.
	if err := w.c.Delete(w.ctx, claim()); err != nil {
		t.Fatal(err)
	}
	// No pod uses the claim, so kube-controller-manager's pvc-protection
	// controller would drop its finalizer at once (it does not run in this
	// environment): only tether's finalizer holds the claim now.
	testenv.Eventually(t, 10*time.Second, "only tether's finalizer left", func() (bool, error) {
		pvc := claim()
		pvc.Finalizers = slices.DeleteFunc(pvc.Finalizers, func(f string) bool { return f == "kubernetes.io/pvc-protection" })
		if err := w.c.Update(w.ctx, pvc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		got := claim()
		return got.DeletionTimestamp != nil && slices.Equal(got.Finalizers, []string{protect.Finalizer}), nil
	})

	// Start the VM.
	w.updateVM("vm-p", func(vm *kubevirtv1.VirtualMachine) { paused(true)(vm); alwaysRun(vm) })
	ev := w.waitEvent("vm-p", controller.EventDanglingBlocksStart)
	for _, want := range []string{"DeletionPostponed", protect.Finalizer, "removevolume"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("the Event does not say %q: %s", want, ev.Message)
		}
	}
	// Past settle (1s) and any grace: nothing may change.
	time.Sleep(cfg.DanglingOnRestart.Settle.Duration + 4*time.Second)
	if !specLists(w.getVM("vm-p"), "data") {
		t.Fatal("the reference to the claim whose deletion tether postponed was removed from the VM spec")
	}
	if pvc := claim(); pvc.DeletionTimestamp == nil || !slices.Contains(pvc.Finalizers, protect.Finalizer) {
		t.Fatalf("claim data: want it Terminating and still held by %s, got finalizers %v", protect.Finalizer, pvc.Finalizers)
	}
	for _, r := range []string{controller.EventDanglingRemovedOnStart, act.ReasonDanglingRemoved} {
		if evs := w.eventsOn("vm-p", r); len(evs) > 0 {
			t.Fatalf("unexpected %s events: %v", r, evs)
		}
	}
}
