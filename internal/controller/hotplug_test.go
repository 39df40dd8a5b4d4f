package controller

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// reconciler returns a hot-plug reconciler whose cache and live client are
// the same fake client.
func reconciler(t *testing.T, c client.Client, cfg *config.Config, p check.Policy) *HotplugReconciler {
	t.Helper()
	return &HotplugReconciler{Cache: c, Executor: &act.Executor{Client: c}, Policy: p, Records: testRecords(t, c, cfg)}
}

// testRecords returns a record keeper on c whose clock is t0 and which has
// watched all along.
func testRecords(t *testing.T, c client.Client, cfg *config.Config) *records {
	t.Helper()
	return &records{
		Cache: c, Live: c, Config: cfg, Namespace: "tether-system", Identity: "test",
		Budget: newBudget(cfg.BlastRadius.MaxActions, cfg.BlastRadius.Interval.Duration),
		Now:    func() time.Time { return t0 }, Log: logr.Discard(),
		watching: &watchClock{since: watchingAllAlong},
	}
}

// ours marks a stored record as written by the controller: its field
// manager owns the status, last observed 30s before t0.
func ours(rec *v1alpha1.Finding) *v1alpha1.Finding {
	rec.ManagedFields = []metav1.ManagedFieldsEntry{statusBy(v1alpha1.FieldManager)}
	rec.Status.LastObserved = mt(t0.Add(-30 * time.Second))
	return rec
}

func fakeClient(f interceptor.Funcs, objs ...client.Object) client.WithWatch {
	return interceptor.NewClient(fake.NewClientBuilder().WithScheme(clients.Scheme).
		WithStatusSubresource(&v1alpha1.Finding{}).WithObjects(objs...).Build(), f)
}

func graceConfig(grace time.Duration, checks ...string) *config.Config {
	c := config.Default()
	for _, name := range checks {
		c.Checks[name] = config.CheckConfig{Enabled: true, GracePeriod: metav1.Duration{Duration: grace}}
	}
	return &c
}

// Even when a configuration (or a caller) enables a check the controller's
// snapshot cannot serve, the reconciler runs only OrphanHotplugVolume: a VMI
// volume whose claim is not in that snapshot is no dangling reference.
func TestReconcile_runsOnlyTheControllerChecks(t *testing.T) {
	vm := fixture.VM("vm", fixture.InNamespace("ns"), fixture.Running())
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.OwnedBy(vm), fixture.WithHotplug("v1"))
	c := fakeClient(interceptor.Funcs{}, vm, vmi)
	cfg := graceConfig(time.Hour, check.OrphanHotplugVolume, check.DanglingVolumeReference, check.OrphanAttachmentPod)
	p := check.DefaultPolicy()
	p.Checks = []string{check.OrphanHotplugVolume, check.DanglingVolumeReference, check.OrphanAttachmentPod}
	r := reconciler(t, c, cfg, p)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(vmi)}); err != nil {
		t.Fatal(err)
	}
	var list v1alpha1.FindingList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		t.Fatal("no record of the orphan hot-plug volume")
	}
	for _, f := range list.Items {
		if f.Spec.Check != check.OrphanHotplugVolume {
			t.Errorf("the controller ran %s: record %s", f.Spec.Check, f.Name)
		}
	}
}

func resolvedRecord(f drift.Finding) *v1alpha1.Finding {
	return &v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: recordName(f), UID: "old-run",
			CreationTimestamp: metav1.NewTime(t0.Add(-24 * time.Hour))},
		Spec: v1alpha1.FindingSpec{ID: f.ID, Check: f.Check, Subject: v1alpha1.SubjectRef{Kind: "VirtualMachineInstance", Name: "vm"}},
		Status: v1alpha1.FindingStatus{Phase: v1alpha1.PhaseResolved, Reason: "ConditionGone",
			FirstObserved: mt(t0.Add(-24 * time.Hour)), SafeSince: mt(t0.Add(-24 * time.Hour)), ResolvedAt: mt(t0.Add(-time.Hour))},
	}
}

// A condition that comes back after its record was resolved starts a new
// run: the old record is deleted (only if it is still the one the cache
// showed) and a fresh one is created, so that no time from the old run —
// nor the old creationTimestamp — can shorten the new grace period.
func TestSyncFinding_resolvedRecordIsReplaced(t *testing.T) {
	f := safeFinding()
	f.Namespace, f.Object = "ns", drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm", UID: "vmi-uid"}
	old := resolvedRecord(f)
	var preconditionUID string
	c := fakeClient(interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		o := &client.DeleteOptions{}
		o.ApplyOptions(opts)
		if o.Preconditions != nil && o.Preconditions.UID != nil {
			preconditionUID = string(*o.Preconditions.UID)
		}
		return c.Delete(ctx, obj, opts...)
	}}, old)
	r := reconciler(t, c, graceConfig(10*time.Minute, check.OrphanHotplugVolume), check.DefaultPolicy())
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	after, err := r.Records.sync(context.Background(), path{apply: r.apply}, vmiSubject(vmi), f, old.DeepCopy(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if preconditionUID != "old-run" {
		t.Fatalf("delete precondition UID %q, want the resolved record's", preconditionUID)
	}
	var got v1alpha1.Finding
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(old), &got); err != nil {
		t.Fatal(err)
	}
	if got.UID == old.UID {
		t.Fatal("the resolved record was reused")
	}
	if got.Status.Phase != v1alpha1.PhaseWaiting || !got.Status.SafeSince.Time.Equal(t0) || !got.Status.FirstObserved.Time.Equal(t0) ||
		got.Status.ResolvedAt != nil || after != 10*time.Minute {
		t.Fatalf("new record status %+v, requeue %s: want Waiting the full grace from now", got.Status, after)
	}
}

// The cache still shows the resolved record while the server already has a
// new one (or the create races another): the subject is requeued.
func TestSyncFinding_replacementAlreadyExists_requeues(t *testing.T) {
	f := safeFinding()
	f.Namespace, f.Object = "ns", drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm", UID: "vmi-uid"}
	old := resolvedRecord(f)
	c := fakeClient(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		return apierrors.NewAlreadyExists(schema.GroupResource{Group: "tether.dev", Resource: "findings"}, obj.GetName())
	}}, old)
	r := reconciler(t, c, graceConfig(0, check.OrphanHotplugVolume), check.DefaultPolicy())
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	if _, err := r.Records.sync(context.Background(), path{apply: r.apply}, vmiSubject(vmi), f, old.DeepCopy(), t0); err == nil || !apierrors.IsAlreadyExists(err) {
		t.Fatalf("err = %v, want AlreadyExists so that the subject is requeued", err)
	}
}

// A record deleted or replaced since the cache saw it: no new record, the
// subject is requeued.
func TestSyncFinding_resolvedRecordGone_requeues(t *testing.T) {
	f := safeFinding()
	f.Namespace, f.Object = "ns", drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm", UID: "vmi-uid"}
	old := resolvedRecord(f)
	c := fakeClient(interceptor.Funcs{})
	r := reconciler(t, c, graceConfig(0, check.OrphanHotplugVolume), check.DefaultPolicy())
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	if _, err := r.Records.sync(context.Background(), path{apply: r.apply}, vmiSubject(vmi), f, old, t0); err == nil {
		t.Fatal("no error: the subject would not be requeued")
	}
	var list v1alpha1.FindingList
	if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("records %v, %v: want none created from a stale cache", list.Items, err)
	}
}

// An attempt refused on the live re-check changed nothing: it gives its
// action back to the budget, and its grace period starts again.
func TestSyncFinding_refusedAttemptRefundsBudget(t *testing.T) {
	f := safeFinding()
	f.Action.Type = drift.None // the executor refuses it without any request
	f.Namespace, f.Object = "ns", drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm", UID: "vmi-uid"}
	rec := ours(&v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: recordName(f), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       v1alpha1.FindingSpec{ID: f.ID, Check: f.Check, Subject: v1alpha1.SubjectRef{Kind: "VirtualMachineInstance", Name: "vm"}},
		Status: v1alpha1.FindingStatus{Phase: v1alpha1.PhaseWaiting, FirstObserved: mt(t0.Add(-time.Hour)),
			SafeSince: mt(t0.Add(-time.Hour))},
	})
	c := fakeClient(interceptor.Funcs{}, rec)
	cfg := graceConfig(time.Minute, check.OrphanHotplugVolume)
	cfg.BlastRadius.MaxActions = 1
	r := reconciler(t, c, cfg, check.DefaultPolicy())
	var stored v1alpha1.Finding
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rec), &stored); err != nil {
		t.Fatal(err)
	}
	ours(&stored) // the fake client keeps no managedFields
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	if _, err := r.Records.sync(context.Background(), path{apply: r.apply}, vmiSubject(vmi), f, &stored, t0); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rec), &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.Reason != string(drift.Refused) || stored.Status.SafeSince != nil || stored.Status.ActAfter != nil {
		t.Fatalf("status %+v: want Refused with the grace clock cleared", stored.Status)
	}
	if !r.Records.Budget.take(t0.Add(time.Second), "ns/other", window{}) {
		t.Fatal("the refused attempt consumed the only action of the budget")
	}
}

// After a restart, the first action is measured against the actions the
// records show: the limit is not reset.
func TestSyncFinding_budgetSeededFromRecords(t *testing.T) {
	f := safeFinding()
	f.Namespace, f.Object = "ns", drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm", UID: "vmi-uid"}
	earlier := &v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orphanhotplugvolume-before"},
		Spec:       v1alpha1.FindingSpec{ID: "before", Check: check.OrphanHotplugVolume, Subject: v1alpha1.SubjectRef{Kind: "VirtualMachineInstance", Name: "vm"}},
		Status: v1alpha1.FindingStatus{Phase: v1alpha1.PhaseResolved, Reason: string(drift.Applied),
			LastAttempt: mt(t0.Add(-time.Minute))},
	}
	rec := ours(&v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: recordName(f), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       v1alpha1.FindingSpec{ID: f.ID, Check: f.Check, Subject: v1alpha1.SubjectRef{Kind: "VirtualMachineInstance", Name: "vm"}},
		Status:     v1alpha1.FindingStatus{Phase: v1alpha1.PhaseWaiting, FirstObserved: mt(t0.Add(-time.Hour)), SafeSince: mt(t0.Add(-time.Hour))},
	})
	c := fakeClient(interceptor.Funcs{}, earlier, rec)
	cfg := graceConfig(time.Minute, check.OrphanHotplugVolume)
	cfg.BlastRadius.MaxActions = 1
	r := reconciler(t, c, cfg, check.DefaultPolicy())
	var stored v1alpha1.Finding
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rec), &stored); err != nil {
		t.Fatal(err)
	}
	ours(&stored) // the fake client keeps no managedFields
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	if _, err := r.Records.sync(context.Background(), path{apply: r.apply}, vmiSubject(vmi), f, &stored, t0); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rec), &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.Phase != v1alpha1.PhaseBlocked || stored.Status.Reason != ReasonBlastRadius {
		t.Fatalf("phase %s reason %s: want Blocked by %s (one action a minute ago, limit 1 per 10m)",
			stored.Status.Phase, stored.Status.Reason, ReasonBlastRadius)
	}
}
