package controller_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/controller/restart"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// Protection and danglingOnRestart together (review F1): a user deletes the
// hot-plugged claim of a stopped VM by mistake; tether's finalizer postpones
// the deletion. When the VM is started, the reference to the Terminating
// claim is not dangling: it stays in the VM spec, the claim stays, and the
// Event on the VM says why and what the operator can do.
func TestController_protectionAndOnRestart_neverUndoProtection(t *testing.T) {
	w := newWorld(t)
	w.env.InstallController(t, "rbac/protection")
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
		return slices.Contains(claim().Finalizers, inuse.Finalizer), nil
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
		return got.DeletionTimestamp != nil && slices.Equal(got.Finalizers, []string{inuse.Finalizer}), nil
	})

	// Start the VM.
	w.updateVM("vm-p", func(vm *kubevirtv1.VirtualMachine) { paused(true)(vm); alwaysRun(vm) })
	ev := w.waitEvent("vm-p", restart.EventDanglingBlocksStart)
	for _, want := range []string{"DeletionPostponed", inuse.Finalizer, "removevolume"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("the Event does not say %q: %s", want, ev.Message)
		}
	}
	// Past settle (1s) and any grace: nothing may change.
	time.Sleep(cfg.DanglingOnRestart.Settle.Duration + 4*time.Second)
	if !specLists(w.getVM("vm-p"), "data") {
		t.Fatal("the reference to the claim whose deletion tether postponed was removed from the VM spec")
	}
	if pvc := claim(); pvc.DeletionTimestamp == nil || !slices.Contains(pvc.Finalizers, inuse.Finalizer) {
		t.Fatalf("claim data: want it Terminating and still held by %s, got finalizers %v", inuse.Finalizer, pvc.Finalizers)
	}
	for _, r := range []string{restart.EventDanglingRemovedOnStart, act.ReasonDanglingRemoved} {
		if evs := w.eventsOn("vm-p", r); len(evs) > 0 {
			t.Fatalf("unexpected %s events: %v", r, evs)
		}
	}
}

// danglingOnRestart on the real control plane, review F5: a claim that
// disappears, comes back and disappears again while the VM tries to start
// waits the whole settle period from its second disappearance.
func TestController_onRestart_flappingClaim_settleStartsAgain(t *testing.T) {
	w := newWorld(t)
	w.declarativeOnly()
	cfg := w.restartCfg(false)
	const settle = 6 * time.Second
	cfg.DanglingOnRestart.Settle.Duration = settle
	vm := fixture.VM("vm-f", fixture.InNamespace(w.ns),
		fixture.WithVolume("data", fixture.PVC("flap"), fixture.Hotpluggable()))
	paused(true)(vm)
	alwaysRun(vm)
	w.create(vm) // starting, and its claim does not exist: first sight
	w.start(cfg)
	time.Sleep(settle / 2)
	w.create(fixture.PVC("flap", fixture.InNamespace(w.ns))) // restored
	time.Sleep(settle / 3)
	var pvc corev1.PersistentVolumeClaim
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "flap"}, &pvc); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Delete(w.ctx, &pvc); err != nil { // and deleted again
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "claim flap gone again", func() (bool, error) {
		var p corev1.PersistentVolumeClaim
		err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "flap"}, &p)
		if err != nil {
			return client.IgnoreNotFound(err) == nil, client.IgnoreNotFound(err)
		}
		p.Finalizers = nil // no kube-controller-manager here: drop pvc-protection by hand
		return false, client.IgnoreNotFound(w.c.Update(w.ctx, &p))
	})
	gone := time.Now()
	// The first stretch's settle ends now; the second's only settle later.
	time.Sleep(settle - time.Second)
	if !specLists(w.getVM("vm-f"), "data") {
		t.Fatalf("removed %s after the claim went again: the settle clock of the first absence was reused", time.Since(gone).Round(100*time.Millisecond))
	}
	testenv.Eventually(t, 30*time.Second, "the reference removed once it stayed dangling for settle", func() (bool, error) {
		return !specLists(w.getVM("vm-f"), "data"), nil
	})
}
