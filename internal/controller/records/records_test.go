package records

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

func TestCoolingDown(t *testing.T) {
	r := &Keeper{Budget: NewBudget(5, 10*time.Minute)}
	acted := func(reason string, ago time.Duration) *v1alpha1.Finding {
		return record(phase(v1alpha1.PhaseResolved), func(f *v1alpha1.Finding) {
			f.Status.Reason, f.Status.LastAttempt = reason, mt(t0.Add(-ago))
		})
	}
	for _, c := range []struct {
		name string
		rec  *v1alpha1.Finding
		want time.Duration
	}{
		{"applied 4m ago -> 6m left in the window", acted("Applied", 4*time.Minute), 6 * time.Minute},
		{"pending 1m ago -> 9m left", acted("Pending", time.Minute), 9 * time.Minute},
		{"applied 11m ago -> out of the window", acted("Applied", 11*time.Minute), 0},
		{"resolved without an action -> none", acted("ConditionGone", time.Minute), 0},
		{"never attempted -> none", record(phase(v1alpha1.PhaseResolved)), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := r.coolingDown(c.rec, t0); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

// A pass that began just before a second boundary creates its record just
// after it: the stored times must not predate the record's creation, or the
// next process clamps them to it (trusted) and the first sight moves.
func TestSync_newRecordTimesNotBeforeItsCreation(t *testing.T) {
	f := safeFinding()
	f.Namespace, f.Object = "ns", drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm", UID: "vmi-uid"}
	created := metav1.NewTime(t0) // the server's time, whole seconds
	c := fakeClient(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if err := c.Create(ctx, obj, opts...); err != nil {
			return err
		}
		obj.SetCreationTimestamp(created)
		return nil
	}})
	cfg := graceConfig(10*time.Minute, check.OrphanHotplugVolume)
	rs := testRecords(t, c, cfg)
	pass := t0.Add(-20 * time.Millisecond) // the pass's clock, read before the create
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	apply := func(context.Context, drift.Finding) drift.Result { t.Fatal("acted"); return drift.Result{} }
	if _, err := rs.Sync(context.Background(), Path{Apply: apply}, vmiSubject(vmi), f, nil, pass); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.Finding
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: recordName(f)}, &got); err != nil {
		t.Fatal(err)
	}
	got.CreationTimestamp = created
	for name, ts := range map[string]*metav1.Time{"firstObserved": got.Status.FirstObserved, "safeSince": got.Status.SafeSince, "lastObserved": got.Status.LastObserved} {
		if ts == nil || ts.Before(&created) {
			t.Errorf("%s %v is before the record's creation %v", name, ts, created)
		}
	}
	if first := firstObserved(&got, t0.Add(time.Minute)); !first.Equal(got.Status.FirstObserved.Time) {
		t.Errorf("the next pass reads the first sight as %v, stored %v", first, got.Status.FirstObserved)
	}
}

// An action whose process died after its claim left the record Acting with
// no outcome: it may have changed something, so it counts in the window
// the next process seeds.
func TestRecentActions_countsAClaimWithoutOutcome(t *testing.T) {
	claimed := v1alpha1.Finding{Status: v1alpha1.FindingStatus{Phase: v1alpha1.PhaseActing, LastAttempt: mt(t0.Add(-time.Minute))}}
	claimed.Namespace, claimed.Name = "ns", "r"
	if got := actionsOnly([]v1alpha1.Finding{claimed}, t0, 10*time.Minute); len(got) != 1 || !got["ns/r"].Equal(t0.Add(-time.Minute)) {
		t.Fatalf("an unfinished claim is not counted: %v", got)
	}
}

// The Acting claim is written, with the attempt's time, before the action
// runs: a process that dies during the action leaves a record that counts.
func TestSync_claimCarriesTheAttemptTime(t *testing.T) {
	f := safeFinding()
	f.Namespace, f.Object = "ns", drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm", UID: "vmi-uid"}
	c := fakeClient(interceptor.Funcs{})
	rs := testRecords(t, c, graceConfig(0, check.OrphanHotplugVolume))
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	ran := false
	apply := func(ctx context.Context, f drift.Finding) drift.Result {
		ran = true
		var claim v1alpha1.Finding
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: recordName(f)}, &claim); err != nil {
			t.Fatal(err)
		}
		if claim.Status.Phase != v1alpha1.PhaseActing || claim.Status.LastAttempt == nil || !claim.Status.LastAttempt.Time.Equal(t0) {
			t.Fatalf("during the action the record shows phase %s, lastAttempt %v: want the claim with the attempt's time", claim.Status.Phase, claim.Status.LastAttempt)
		}
		return drift.Result{Outcome: drift.Applied}
	}
	if _, err := rs.Sync(context.Background(), Path{Apply: apply}, vmiSubject(vmi), f, nil, t0); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the action did not run")
	}
}

// Two processes that decide from the same record never both act: one whose
// cache already shows the other's fresh claim (Acting, no outcome) waits,
// and one whose cache is behind gets a conflict on its own claim.
func TestSync_neverActsAlongsideAnotherClaim(t *testing.T) {
	f := safeFinding()
	f.Namespace, f.Object = "ns", drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm", UID: "vmi-uid"}
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.WithUID("vmi-uid"))
	waiting := ours(&v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: recordName(f), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       v1alpha1.FindingSpec{ID: f.ID, Check: f.Check, Subject: v1alpha1.SubjectRef{Kind: "VirtualMachineInstance", Name: "vm"}},
		Status:     v1alpha1.FindingStatus{Phase: v1alpha1.PhaseWaiting, FirstObserved: mt(t0.Add(-time.Hour)), SafeSince: mt(t0.Add(-time.Hour))},
	})
	c := fakeClient(interceptor.Funcs{}, waiting)
	cfg := graceConfig(time.Minute, check.OrphanHotplugVolume)
	read := func() *v1alpha1.Finding {
		var r v1alpha1.Finding
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(waiting), &r); err != nil {
			t.Fatal(err)
		}
		return ours(&r)
	}
	seenByA, seenByB := read(), read() // both caches at the same resourceVersion
	ran := 0
	apply := func(context.Context, drift.Finding) drift.Result { ran++; return drift.Result{Outcome: drift.Applied} }
	block := make(chan struct{})
	// A claims and, while its action runs, B decides.
	a := testRecords(t, c, cfg)
	a.AfterClaim = func(drift.Finding) {
		b := testRecords(t, c, cfg)
		if _, err := b.Sync(context.Background(), Path{Apply: apply}, vmiSubject(vmi), f, seenByB, t0); err == nil {
			t.Error("B claimed over A's claim from a stale cache")
		}
		claimed := read()
		if wait, err := b.Sync(context.Background(), Path{Apply: apply}, vmiSubject(vmi), f, claimed, t0.Add(time.Second)); err != nil || wait <= 0 {
			t.Errorf("B, seeing A's fresh claim, must wait: wait %s, error %v", wait, err)
		}
		close(block)
	}
	if _, err := a.Sync(context.Background(), Path{Apply: apply}, vmiSubject(vmi), f, seenByA, t0); err != nil {
		t.Fatal(err)
	}
	<-block
	if ran != 1 {
		t.Fatalf("the action ran %d times, want once", ran)
	}
}
