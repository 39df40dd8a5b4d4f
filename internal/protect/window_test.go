package protect_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// testReleaseDelay is the release delay of the window tests: above the
// test webhook's 2s timeout and the deletionTimestamp's one second.
const testReleaseDelay = 3 * time.Second

// settleHold: a claim still held this long after the bursts stays held.
const settleHold = testReleaseDelay + 5*time.Second

// createJitter spreads the burst's create over the release of the claim.
const createJitter = 200 * time.Millisecond

// holdFinalizer keeps a test object terminating for as long as a test needs.
const holdFinalizer = "example.com/hold"

// startWindow runs the reconcilers with the release delay and the admission
// webhook, registered with the API server on 127.0.0.1 for the test's
// namespace only, and waits until the API server calls it.
func (w *world) startWindow() {
	w.t.Helper()
	w.startWindowWith(protect.Options{})
}

// startWindowWith is startWindow with further options.
func (w *world) startWindowWith(o protect.Options) {
	w.t.Helper()
	wh := testenv.NewWebhook(w.t)
	o.ReleaseDelay = testReleaseDelay
	w.startWith(o, webhook.NewServer(webhook.Options{Host: wh.Host, Port: wh.Port, CertDir: wh.CertDir}))
	wh.Register(w.t, w.env, w.ns)
	w.webhookLive()
}

// webhookLive waits until a dry-run create of a VM that references a
// terminating claim is refused.
func (w *world) webhookLive() {
	w.t.Helper()
	w.terminating(fixture.PVC("probe"))
	w.eventually("the webhook answers", func() (bool, error) {
		vm := usingVM("probe", "probe")
		vm.Namespace = w.ns
		err := w.c.Create(w.ctx, vm, client.DryRunAll)
		return err != nil && refusedForWindow(err), err
	})
	w.release("probe")
}

// terminating creates o with holdFinalizer and deletes it: it stays
// terminating until release.
func (w *world) terminating(o client.Object) {
	w.t.Helper()
	o.SetFinalizers([]string{holdFinalizer})
	w.create(o)
	if err := w.c.Delete(w.ctx, o); err != nil {
		w.t.Fatal(err)
	}
}

// release removes holdFinalizer from the PVC name.
func (w *world) release(name string) {
	w.t.Helper()
	w.releaseObject(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}})
}

// releaseObject removes holdFinalizer (the first) from o, named by its
// namespace and name.
func (w *world) releaseObject(o client.Object) {
	w.t.Helper()
	patch := `[{"op":"test","path":"/metadata/finalizers/0","value":"` + holdFinalizer + `"},{"op":"remove","path":"/metadata/finalizers/0"}]`
	if err := w.c.Patch(w.ctx, o, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil && !apierrors.IsNotFound(err) {
		w.t.Errorf("releasing %s: %v", o.GetName(), err)
	}
}

func isRefusal(msg string) bool { return strings.Contains(msg, protect.RefusalAdvice) }

// TestWebhookRefusesNewReferences: on the real API server, a VM create or
// update that adds a reference to a claim or DataVolume being deleted is
// refused with a message naming it; updates that keep an existing
// reference, and status updates, go through.
func TestWebhookRefusesNewReferences(t *testing.T) {
	w := newWorld(t)
	w.startWindow()
	w.terminating(fixture.PVC("going"))
	t.Cleanup(func() { w.release("going") })

	vm := usingVM("new", "going")
	vm.Namespace = w.ns
	err := w.c.Create(w.ctx, vm)
	if err == nil || !refusedForWindow(err) || !strings.Contains(err.Error(), "PersistentVolumeClaim "+w.ns+"/going") {
		t.Fatalf("create of a VM referencing a terminating claim: want the refusal naming it, got %v", err)
	}

	w.create(fixture.PVC("kept"))
	w.create(usingVM("a", "kept"))
	err = w.updateVM("a", false, func(a *kubevirtv1.VirtualMachine) {
		a.Spec.Template.Spec.Volumes = append(a.Spec.Template.Spec.Volumes, usingVM("x", "going").Spec.Template.Spec.Volumes...)
	})
	if err == nil || !refusedForWindow(err) {
		t.Fatalf("update adding a reference to a terminating claim: want the refusal, got %v", err)
	}

	// a already references kept: its deletion is postponed, and updates
	// of a that keep the reference go through, spec and status alike.
	w.protected("kept")
	w.deletePVC("kept")
	if err := w.updateVM("a", false, func(a *kubevirtv1.VirtualMachine) { a.Labels = map[string]string{"touched": "yes"} }); err != nil {
		t.Fatalf("update keeping an existing reference was refused: %v", err)
	}
	if err := w.updateVM("a", true, func(a *kubevirtv1.VirtualMachine) { a.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped }); err != nil {
		t.Fatalf("status update was refused: %v", err)
	}

	w.terminating(fixture.DataVolume("tpl"))
	t.Cleanup(func() { w.releaseObject(fixture.DataVolume("tpl", fixture.InNamespace(w.ns))) })
	withTemplate := fixture.VM("templated")
	withTemplate.Namespace = w.ns
	withTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "tpl"}, Spec: fixture.DataVolume("tpl").Spec}}
	if err := w.c.Create(w.ctx, withTemplate); err == nil || !refusedForWindow(err) || !strings.Contains(err.Error(), "DataVolume "+w.ns+"/tpl") {
		t.Fatalf("create with a dataVolumeTemplate named like a terminating DataVolume: want the refusal, got %v", err)
	}
}

// updateVM reads the VM name, changes it and writes it (its status
// subresource when status is set), again on conflicts.
func (w *world) updateVM(name string, status bool, change func(*kubevirtv1.VirtualMachine)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var vm kubevirtv1.VirtualMachine
		if err := w.c.Get(w.ctx, types.NamespacedName{Namespace: w.ns, Name: name}, &vm); err != nil {
			return err
		}
		change(&vm)
		if status {
			return w.c.Status().Update(w.ctx, &vm)
		}
		return w.c.Update(w.ctx, &vm)
	})
}

// TestReleaseWaitsForTheDelay: an unused protected claim whose deletion is
// requested keeps the finalizer until the release delay has passed since
// its deletionTimestamp, then goes.
func TestReleaseWaitsForTheDelay(t *testing.T) {
	w := newWorld(t)
	w.start(protect.Options{ReleaseDelay: testReleaseDelay})
	w.create(fixture.PVC("claim"))
	w.create(usingVM("vm", "claim"))
	w.protected("claim")
	w.deleteVM("vm")
	w.survivesUnused("claim", time.Second)
	w.deletePVC("claim")
	p, err := w.pvc("claim")
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("claim not terminating: %v", err)
	}
	releaseAt := p.DeletionTimestamp.Add(time.Second + testReleaseDelay)
	w.survivesUnused("claim", time.Until(releaseAt)-500*time.Millisecond)
	w.gone("claim")
	if late := time.Since(releaseAt); late > 5*time.Second {
		t.Errorf("released %s after the delay ran out", late)
	}
}

// TestWebhookClosesTheWindowAfterTheLiveList: a VM that starts referencing
// the claim after the release's final live LIST (which therefore cannot
// see it) is refused by the webhook: the claim goes and no VM references
// it.
func TestWebhookClosesTheWindowAfterTheLiveList(t *testing.T) {
	w := newWorld(t)
	var once sync.Once
	injected := make(chan error, 1)
	w.startWindowWith(protect.Options{BeforeRelease: func(ctx context.Context, ref inuse.Ref) {
		if ref.Kind == inuse.KindPVC && ref.Name == "claim" {
			once.Do(func() {
				vm := usingVM("late", "claim")
				vm.Namespace = w.ns
				injected <- w.c.Create(ctx, vm)
			})
		}
	}})
	w.create(fixture.PVC("claim"))
	w.create(usingVM("first", "claim"))
	w.protected("claim")
	w.deleteVM("first")
	w.deletePVC("claim")
	select {
	case err := <-injected:
		if !refusedForWindow(err) {
			t.Fatalf("a VM created after the final live LIST: want the webhook's refusal, got %v", err)
		}
	case <-time.After(wait):
		t.Fatal("the reconciler never reached the release")
	}
	w.gone("claim")
}
