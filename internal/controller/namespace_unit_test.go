package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// Every check of the namespace loop reads only what the loop can read of
// one namespace, and its subjects are ones the loop files records under.
func TestNamespaceLoop_readsAndSubjectsFromTheRows(t *testing.T) {
	names, kinds, err := namespaceLoop(func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, check.InLoop(check.LoopNamespace)) || kinds&^observe.NamespaceKinds != 0 {
		t.Fatalf("loop checks %v read %s", names, kinds)
	}
	want := map[string]string{"VirtualMachineInstance": "kubevirt.io/v1", "VirtualMachine": "kubevirt.io/v1", "PersistentVolumeClaim": "v1"}
	for _, name := range names {
		c, _ := check.Lookup(name)
		for _, kind := range c.Subjects {
			s := namespaceSubject(drift.Finding{Namespace: "ns", Object: drift.ObjectRef{Kind: kind, Name: "x", UID: "u"}})
			if want[kind] == "" || s.Owner.APIVersion != want[kind] || s.Namespace != "ns" {
				t.Errorf("%s: subject %s filed as %+v", name, kind, s)
			}
		}
	}
	only := func(n string) func(string) bool { return func(c string) bool { return c == n } }
	if _, k, _ := namespaceLoop(only(check.InterruptedVolumeMigration)); k.Has(snapshot.KindAttachmentPods) || k.Has(snapshot.KindKubeVirt) {
		t.Errorf("InterruptedVolumeMigration alone reads %s: the loop would cache what it does not need", k)
	}
	if names, _, _ := namespaceLoop(only(check.OrphanHotplugVolume)); len(names) != 0 {
		t.Errorf("a hot-plug check enabled the namespace loop: %v", names)
	}
}

// One namespace's pass files each finding of the loop's checks under its
// subject, acts on none, resolves what is gone, surveys again while the
// namespace holds anything (a hot-plug phase becomes stuck with no event),
// and leaves other namespaces and other checks' records alone.
func TestNamespaceReconciler_recordsResolvesAndNeverActs(t *testing.T) {
	ns := fixture.InNamespace("ns")
	// A VM stopped by an interrupted volume migration, two VMs on one
	// ReadWriteOnce claim, and a re-plugged volume stuck Detaching since
	// its attachment pod was created 5 minutes ago (under the grace).
	mig := kubevirtv1.UpdateVolumesStrategyMigration
	stopped := fixture.VM("stopped", ns, fixture.WithVolume("d", fixture.PVC("dst")))
	stopped.Spec.UpdateVolumesStrategy = &mig
	stopped.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineManualRecoveryRequired, Status: corev1.ConditionTrue}}
	a := fixture.VM("a", ns, fixture.WithVolume("data", fixture.PVC("shared")))
	b := fixture.VM("b", ns, fixture.WithVolume("data", fixture.PVC("shared")))
	replug := fixture.VMI("c", ns, fixture.Running(), fixture.OnNode("node-1"),
		fixture.WithHotplug("v1", fixture.VolumePhase(kubevirtv1.HotplugVolumeDetaching), fixture.AttachPod("hp-volume-new")))
	pod := fixture.AttachmentPod("hp-volume-new", ns, fixture.CreatedAt(t0.Add(-5*time.Minute)),
		fixture.Labels(snapshot.AttachmentPodLabel, snapshot.AttachmentPodLabelValue))
	other := fixture.VM("a", fixture.InNamespace("other"), fixture.WithVolume("data", fixture.PVC("shared")))
	objs := []client.Object{stopped, a, b, replug, pod, fixture.PVC("shared", ns), fixture.PVC("dst", ns), other, fixture.PVC("shared", fixture.InNamespace("other")),
		&kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt", Name: "kubevirt"}, Status: kubevirtv1.KubeVirtStatus{ObservedKubeVirtVersion: "v1.8.1"}}}
	// Every write the passes make, besides the records': none may be.
	writes, inPass := 0, false
	c := fakeClient(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			if _, rec := o.(*v1alpha1.Finding); !rec && inPass {
				t.Errorf("the namespace loop created %T %s", o, o.GetName())
			}
			return c.Create(ctx, o, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			if _, rec := o.(*v1alpha1.Finding); !rec && inPass {
				t.Errorf("the namespace loop wrote %T %s", o, o.GetName())
			}
			return c.Update(ctx, o, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			if inPass {
				t.Errorf("the namespace loop patched %T %s", o, o.GetName())
			}
			return c.Patch(ctx, o, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			if _, rec := o.(*v1alpha1.Finding); !rec && inPass {
				t.Errorf("the namespace loop deleted %T %s", o, o.GetName())
			}
			return c.Delete(ctx, o, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
			writes++
			return c.SubResource(sub).Update(ctx, o, opts...)
		},
	}, objs...)
	loop := check.InLoop(check.LoopNamespace)
	cfg := graceConfig(0, loop...) // grace 0 and no dry run: acting would be allowed at once
	names, kinds, err := namespaceLoop(cfg.Enabled)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cfg.Policy()
	if err != nil {
		t.Fatal(err)
	}
	rs := testRecords(c, cfg)
	r := &NamespaceReconciler{Cache: c, Records: rs, Policy: p, Checks: names, Kinds: kinds}
	pass := func(at time.Time) (ctrl.Result, map[string]v1alpha1.Finding) {
		t.Helper()
		rs.Now = func() time.Time { return at }
		inPass = true
		res, err := r.Reconcile(context.Background(), namespaceKey("ns"))
		inPass = false
		if err != nil {
			t.Fatal(err)
		}
		var list v1alpha1.FindingList
		if err := c.List(context.Background(), &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]v1alpha1.Finding{}
		for _, f := range list.Items {
			if f.Namespace != "ns" {
				t.Errorf("record %s/%s filed outside the namespace of the pass", f.Namespace, f.Name)
			}
			out[f.Spec.Check] = f
		}
		return res, out
	}

	res, recs := pass(t0)
	if res.RequeueAfter != namespaceResync {
		t.Errorf("requeue after %s, want the resync %s", res.RequeueAfter, namespaceResync)
	}
	for name, want := range map[string]struct {
		kind, subject, severity string
		reason                  drift.BlockReason
	}{
		check.InterruptedVolumeMigration: {"VirtualMachine", "stopped", "critical", check.ManualRecoveryRequired},
		check.SharedClaimConflict:        {"PersistentVolumeClaim", "shared", "warning", check.ClaimReferencedTwice},
	} {
		f, ok := recs[name]
		switch {
		case !ok:
			t.Errorf("no record of %s: %v", name, recs)
		case f.Spec.Subject.Kind != want.kind || f.Spec.Subject.Name != want.subject || f.OwnerReferences[0].Name != want.subject:
			t.Errorf("%s filed under %+v, owner %+v", name, f.Spec.Subject, f.OwnerReferences)
		case f.Status.Phase != v1alpha1.PhaseBlocked || f.Status.Reason != string(want.reason) || f.Status.Severity != want.severity || f.Status.Action.Type != string(drift.None):
			t.Errorf("%s: %+v", name, f.Status)
		}
	}
	if _, ok := recs[check.StuckHotplugPhase]; ok {
		t.Errorf("a phase Detaching for 5 minutes is not stuck yet: %+v", recs[check.StuckHotplugPhase].Status)
	}

	// Past the grace, on the resync: stuck, with no event about it.
	_, recs = pass(t0.Add(check.DefaultStuckPhaseGrace))
	if f, ok := recs[check.StuckHotplugPhase]; !ok || f.Spec.Subject.Name != "c" || f.Status.Severity != "warning" || f.Status.Reason != string(check.WaitsForKubeVirt) {
		t.Errorf("stuck phase after the grace: %+v", recs)
	}

	// The drift goes: the records are resolved, and nothing was acted on.
	for _, o := range []client.Object{b, stopped, replug} {
		if err := c.Delete(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	_, recs = pass(t0.Add(check.DefaultStuckPhaseGrace + time.Minute))
	for _, name := range loop {
		if f := recs[name]; f.Status.Phase != v1alpha1.PhaseResolved || f.Status.Reason != "ConditionGone" || f.Status.Attempts != 0 || f.Status.LastAttempt != nil {
			t.Errorf("%s after the drift went: %+v", name, f.Status)
		}
	}
	if writes == 0 {
		t.Error("no record status was written: the test proves nothing")
	}

	// A namespace with nothing in it is not surveyed again.
	if res, err := r.Reconcile(context.Background(), namespaceKey("empty")); err != nil || res.RequeueAfter != 0 {
		t.Errorf("empty namespace: %+v %v", res, err)
	}
}

// Updates that change nothing the caches hold (a VMI's guest information,
// and the generation a VMI status write moves) start no pass; a change of
// a volume's phase does.
func TestLeanViewChanged(t *testing.T) {
	old := fixture.VMI("v", fixture.Running(), fixture.WithHotplug("v1", fixture.VolumePhase(kubevirtv1.VolumeReady)))
	guest := old.DeepCopy()
	guest.ResourceVersion, guest.Generation = "2", 7
	guest.Status.GuestOSInfo.Name = "Fedora"
	guest.Status.Conditions = append(guest.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue})
	phase := guest.DeepCopy()
	phase.Status.VolumeStatus[0].Phase = kubevirtv1.HotplugVolumeDetaching
	p := leanViewChanged()
	if p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: guest}) {
		t.Error("guest information and the generation started a pass")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: guest, ObjectNew: phase}) {
		t.Error("a volume phase change started no pass")
	}
	if old.Status.GuestOSInfo.Name != "" || guest.ResourceVersion != "2" {
		t.Error("the predicate changed the cached objects")
	}
}

// The loop watches the kinds its checks read, each with the filters that
// keep changes it cannot see from starting a pass: an update of only the
// resource version and generation starts none, a pod that is no
// attachment pod starts none.
func TestNamespaceWatches(t *testing.T) {
	pass := func(w kindWatch, e any) bool {
		for _, p := range w.preds {
			var ok bool
			switch e := e.(type) {
			case event.CreateEvent:
				ok = p.Create(e)
			case event.UpdateEvent:
				ok = p.Update(e)
			}
			if !ok {
				return false
			}
		}
		return true
	}
	wake := (&NamespaceReconciler{}).wake
	_, kinds, _ := namespaceLoop(func(string) bool { return true })
	got := map[string]kindWatch{}
	for _, w := range watchesOf(kinds, wake) {
		got[fmt.Sprintf("%T", w.obj)] = w
	}
	if len(got) != 5 {
		t.Fatalf("watches %v, want VMIs, VMs, claims, pods and the KubeVirt CR", got)
	}
	for _, o := range []client.Object{fixture.VMI("v"), fixture.VM("v"), fixture.PVC("c"), fixture.AttachmentPod("hp-1")} {
		w := got[fmt.Sprintf("%T", o)]
		moved := o.DeepCopyObject().(client.Object)
		moved.SetResourceVersion("9")
		moved.SetGeneration(9)
		relabelled := moved.DeepCopyObject().(client.Object)
		relabelled.SetLabels(map[string]string{snapshot.AttachmentPodLabel: snapshot.AttachmentPodLabelValue, "x": "y"})
		if !pass(w, event.CreateEvent{Object: o}) || pass(w, event.UpdateEvent{ObjectOld: o, ObjectNew: moved}) || !pass(w, event.UpdateEvent{ObjectOld: o, ObjectNew: relabelled}) {
			t.Errorf("%T: a creation and a label change must start a pass, a new resource version alone not", o)
		}
	}
	if pass(got["*v1.Pod"], event.CreateEvent{Object: fixture.UserPod("app")}) {
		t.Error("a pod that is no attachment pod started a pass")
	}
	if _, kinds, _ := namespaceLoop(func(c string) bool { return c == check.InterruptedVolumeMigration }); len(watchesOf(kinds, wake)) != 3 {
		t.Errorf("InterruptedVolumeMigration alone watches %d kinds, want VMIs, VMs and claims", len(watchesOf(kinds, wake)))
	}
}
