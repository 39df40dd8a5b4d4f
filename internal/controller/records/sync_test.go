package records

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/testing/fakeclient"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// testRecords returns a record keeper on c whose clock is t0 and which has
// watched all along.
func testRecords(t *testing.T, c client.Client, cfg *config.Config) *Keeper {
	t.Helper()
	rs := New(cfg)
	rs.Cache, rs.Live, rs.Namespace, rs.Identity = c, c, "tether-system", "test"
	rs.Now, rs.Log = func() time.Time { return t0 }, logr.Discard()
	rs.WatchingSince(watchingAllAlong)
	return rs
}

// keeper is testRecords with an apply that acts through a live-checking
// executor on c.
func keeper(t *testing.T, c client.Client, cfg *config.Config) (*Keeper, ApplyFunc) {
	t.Helper()
	ex := &act.Executor{Client: c}
	return testRecords(t, c, cfg), func(ctx context.Context, f drift.Finding) drift.Result { return ex.Apply(ctx, f, act.Evidence{}) }
}

// vmiSubject files a finding under its VMI, as the hot-plug reconciler does.
func vmiSubject(vmi *kubevirtv1.VirtualMachineInstance) Subject {
	return Subject{Namespace: vmi.Namespace, Owner: metav1.OwnerReference{
		APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID,
	}}
}

// ours marks a stored record as written by the controller: its field
// manager owns the status, last observed 30s before t0.
func ours(rec *v1alpha1.Finding) *v1alpha1.Finding {
	rec.ManagedFields = []metav1.ManagedFieldsEntry{statusBy(v1alpha1.FieldManager)}
	rec.Status.LastObserved = mt(t0.Add(-30 * time.Second))
	return rec
}

// fakeClient and graceConfig are fixture's, by their short names here.
var (
	fakeClient  = fakeclient.FakeClient
	graceConfig = fakeclient.GraceConfig
)

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
	rs, apply := keeper(t, c, graceConfig(10*time.Minute, check.OrphanHotplugVolume))
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	after, err := rs.Sync(context.Background(), Path{Apply: apply}, vmiSubject(vmi), f, old.DeepCopy(), t0)
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
	rs, apply := keeper(t, c, graceConfig(0, check.OrphanHotplugVolume))
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	if _, err := rs.Sync(context.Background(), Path{Apply: apply}, vmiSubject(vmi), f, old.DeepCopy(), t0); err == nil || !apierrors.IsAlreadyExists(err) {
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
	rs, apply := keeper(t, c, graceConfig(0, check.OrphanHotplugVolume))
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	if _, err := rs.Sync(context.Background(), Path{Apply: apply}, vmiSubject(vmi), f, old, t0); err == nil {
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
	rs, apply := keeper(t, c, cfg)
	var stored v1alpha1.Finding
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rec), &stored); err != nil {
		t.Fatal(err)
	}
	ours(&stored) // the fake client keeps no managedFields
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	if _, err := rs.Sync(context.Background(), Path{Apply: apply}, vmiSubject(vmi), f, &stored, t0); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rec), &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.Reason != string(drift.Refused) || stored.Status.SafeSince != nil || stored.Status.ActAfter != nil {
		t.Fatalf("status %+v: want Refused with the grace clock cleared", stored.Status)
	}
	if !takes(rs.Budget, t0.Add(time.Second), "ns/other", window{}) {
		t.Fatal("the refused attempt consumed the only action of the budget")
	}
}

// After a restart, the first action is measured against the actions the
// records show: the limit is not reset.
func TestSyncFinding_budgetSeededFromRecords(t *testing.T) {
	earlier := &v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orphanhotplugvolume-before"},
		Spec:       v1alpha1.FindingSpec{ID: "before", Check: check.OrphanHotplugVolume, Subject: v1alpha1.SubjectRef{Kind: "VirtualMachineInstance", Name: "vm"}},
		Status: v1alpha1.FindingStatus{Phase: v1alpha1.PhaseResolved, Reason: string(drift.Applied),
			LastAttempt: mt(t0.Add(-time.Minute))},
	}
	stored, _, _, _ := syncUnderLimitOfOne(t, earlier)
	if stored.Status.Phase != v1alpha1.PhaseBlocked || stored.Status.Reason != ReasonBlastRadius {
		t.Fatalf("phase %s reason %s: want Blocked by %s (one action a minute ago, limit 1 per 10m)",
			stored.Status.Phase, stored.Status.Reason, ReasonBlastRadius)
	}
}

// An action of `tether fix` fills the window (limit 1): the finding waits,
// Blocked BlastRadiusShared, until that action leaves the window, and the
// breaker does not trip (no breaker record is written).
func TestSyncFinding_supervisedActionFillsTheWindowWithoutATrip(t *testing.T) {
	byFix := &v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tether-system", Name: "fixapply-x"},
		Spec:       v1alpha1.FindingSpec{ID: "fix-x", Check: findingrecord.FixCheck},
		Status:     v1alpha1.FindingStatus{Phase: v1alpha1.PhaseResolved, Reason: string(drift.Applied), LastAttempt: mt(t0.Add(-time.Minute))},
	}
	stored, after, rs, c := syncUnderLimitOfOne(t, byFix)
	if stored.Status.Phase != v1alpha1.PhaseBlocked || stored.Status.Reason != ReasonBlastRadiusShared || !strings.Contains(stored.Status.Message, "tether fix --apply") {
		t.Fatalf("status %+v: want Blocked by %s", stored.Status, ReasonBlastRadiusShared)
	}
	if after != 9*time.Minute {
		t.Errorf("looks again after %s, want 9m (when fix's action leaves the 10m window)", after)
	}
	if rs.Budget.IsTripped() {
		t.Error("the breaker tripped on a supervised action")
	}
	if br, err := findingrecord.Breaker(context.Background(), c, rs.Namespace); err != nil || br.Tripped {
		t.Errorf("breaker record %+v, %v: want none tripped", br, err)
	}
}

// syncUnderLimitOfOne syncs, at t0, a safe finding whose record has been
// Waiting for an hour, past its 1m grace, with a budget of one action per
// 10m and the record earlier beside it; it returns the record as stored
// after the pass, when to look again, the keeper and the client.
func syncUnderLimitOfOne(t *testing.T, earlier *v1alpha1.Finding) (v1alpha1.Finding, time.Duration, *Keeper, client.Client) {
	t.Helper()
	f := safeFinding()
	f.Namespace, f.Object = "ns", drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm", UID: "vmi-uid"}
	rec := ours(&v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: recordName(f), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       v1alpha1.FindingSpec{ID: f.ID, Check: f.Check, Subject: v1alpha1.SubjectRef{Kind: "VirtualMachineInstance", Name: "vm"}},
		Status:     v1alpha1.FindingStatus{Phase: v1alpha1.PhaseWaiting, FirstObserved: mt(t0.Add(-time.Hour)), SafeSince: mt(t0.Add(-time.Hour))},
	})
	c := fakeClient(interceptor.Funcs{}, earlier, rec)
	cfg := graceConfig(time.Minute, check.OrphanHotplugVolume)
	cfg.BlastRadius.MaxActions = 1
	rs, apply := keeper(t, c, cfg)
	var stored v1alpha1.Finding
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rec), &stored); err != nil {
		t.Fatal(err)
	}
	ours(&stored) // the fake client keeps no managedFields
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	after, err := rs.Sync(context.Background(), Path{Apply: apply}, vmiSubject(vmi), f, &stored, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rec), &stored); err != nil {
		t.Fatal(err)
	}
	return stored, after, rs, c
}
