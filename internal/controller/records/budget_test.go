package records

import (
	"fmt"
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
)

// none is a window whose records show no action and no trip.
var none = window{}

func TestBudget_tripsAndStaysTripped(t *testing.T) {
	b := NewBudget(2, time.Minute)
	if !takes(b, t0, "a", none) || !takes(b, t0.Add(time.Second), "b", none) {
		t.Fatal("the first two actions must pass")
	}
	if takes(b, t0.Add(2*time.Second), "c", none) {
		t.Fatal("the third within the window must be refused")
	}
	if takes(b, t0.Add(time.Hour), "d", none) || !b.IsTripped() {
		t.Fatal("once tripped, acting stays stopped")
	}
	if !b.unrecorded() {
		t.Fatal("a trip not yet in the breaker record must be written")
	}
}

func TestBudget_windowSlides(t *testing.T) {
	b := NewBudget(2, time.Minute)
	for i := 0; i < 10; i++ {
		if !takes(b, t0.Add(time.Duration(i)*31*time.Second), string(rune('a'+i)), none) {
			t.Fatalf("action %d refused though at most 2 fall in any minute", i)
		}
	}
}

func TestBudget_refundGivesTheActionBack(t *testing.T) {
	b := NewBudget(1, time.Minute)
	if !takes(b, t0, "a", none) {
		t.Fatal("the first action must pass")
	}
	b.refund("a", t0)
	if !takes(b, t0.Add(time.Second), "b", none) {
		t.Fatal("a refunded action still counts")
	}
	b.refund("b", t0.Add(time.Hour)) // nothing reserved then: no effect
	if takes(b, t0.Add(2*time.Second), "c", none) || !b.IsTripped() {
		t.Fatal("the limit no longer holds after a refund of nothing")
	}
}

// The records' actions count whichever process made them, and an own
// reservation the record already shows is not counted twice.
func TestBudget_countsRecordedActionsOnce(t *testing.T) {
	b := NewBudget(3, time.Minute)
	if !takes(b, t0, "ns/a", none) {
		t.Fatal("first action refused")
	}
	w := window{actions: map[string]time.Time{
		"ns/a":     t0.Truncate(time.Second),  // this process's own claim, now in the cache
		"ns/other": t0.Add(-30 * time.Second), // an earlier process, or fix --apply
		"ns/old":   t0.Add(-2 * time.Minute),  // out of the window
	}}
	if !takes(b, t0.Add(time.Second), "ns/b", w) {
		t.Fatal("2 actions in the window, limit 3: must pass")
	}
	if takes(b, t0.Add(2*time.Second), "ns/c", w) {
		t.Fatal("a, other and b make 3: the fourth must be refused")
	}
}

// A trip shown by the breaker record stops this process too, and only a
// reset of that record starts it again, with the actions before the reset
// no longer counted.
func TestBudget_durableTripHeldUntilReset(t *testing.T) {
	b := NewBudget(2, time.Hour)
	recent := map[string]time.Time{"ns/x": t0.Add(-time.Minute), "ns/y": t0.Add(-time.Minute)}
	tripped := window{actions: recent, breaker: findingrecord.BreakerState{Tripped: true}}
	if takes(b, t0, "ns/a", tripped) || !b.IsTripped() {
		t.Fatal("a tripped breaker record must stop a fresh process")
	}
	if b.unrecorded() {
		t.Fatal("the trip is in the record already: nothing to write")
	}
	if takes(b, t0.Add(time.Second), "ns/a", window{actions: recent, breaker: findingrecord.BreakerState{Tripped: true}}) {
		t.Fatal("still tripped")
	}
	reset := window{actions: recent, breaker: findingrecord.BreakerState{ResetAt: t0.Add(2 * time.Second)}}
	if !takes(b, t0.Add(3*time.Second), "ns/a", reset) {
		t.Fatal("after the reset the actions before it must not count")
	}
	if b.IsTripped() {
		t.Fatal("the reset did not clear the trip")
	}
}

// An operator may reset the trip this process wrote before its cache ever
// showed it tripped: the reset of that trip (same trip time) clears it.
func TestBudget_resetOfOwnTripSeenOnlyAsReset(t *testing.T) {
	b := NewBudget(1, time.Hour)
	takes(b, t0, "ns/a", none)
	if takes(b, t0.Add(time.Second), "ns/b", none) {
		t.Fatal("over the limit")
	}
	b.recorded(t0.Add(time.Second))
	reset := window{breaker: findingrecord.BreakerState{TrippedAt: t0.Add(time.Second), ResetAt: t0.Add(5 * time.Second)}}
	if !takes(b, t0.Add(6*time.Second), "ns/c", reset) {
		t.Fatal("the reset of this process's own trip did not clear it")
	}
}

// A trip of this process that the cache does not show yet (just written,
// or the write failed) is never read as a reset.
func TestBudget_ownTripNotClearedByALaggingCache(t *testing.T) {
	b := NewBudget(1, time.Hour)
	takes(b, t0, "ns/a", none)
	if takes(b, t0.Add(time.Second), "ns/b", none) {
		t.Fatal("over the limit")
	}
	b.recorded(t0.Add(time.Second))
	if takes(b, t0.Add(2*time.Second), "ns/c", window{}) {
		t.Fatal("a cache that does not show the trip yet cleared it")
	}
	if takes(b, t0.Add(2*time.Second), "ns/c", window{breaker: findingrecord.BreakerState{TrippedAt: t0.Add(-time.Hour), ResetAt: t0.Add(-time.Minute)}}) {
		t.Fatal("the reset of an earlier trip cleared this one")
	}
	if takes(b, t0.Add(3*time.Second), "ns/c", window{breaker: findingrecord.BreakerState{Tripped: true}}) {
		t.Fatal("tripped")
	}
	// An operator's reset before this trip (an old resolvedAt) is no
	// reset of it: the record shows Blocked once this trip is written.
	if !takes(b, t0.Add(4*time.Second), "ns/c", window{breaker: findingrecord.BreakerState{ResetAt: t0.Add(4 * time.Second)}}) {
		t.Fatal("the record's reset must clear a trip the cache had shown")
	}
}

func TestRecentActions_countsAppliedPendingAndClaims(t *testing.T) {
	at := func(ago time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(-ago)); return &m }
	rec := func(name string, phase v1alpha1.Phase, reason string, last *metav1.Time) v1alpha1.Finding {
		f := v1alpha1.Finding{Spec: v1alpha1.FindingSpec{Check: "OrphanHotplugVolume"}}
		f.Namespace, f.Name = "ns", name
		f.Status.Phase, f.Status.Reason, f.Status.LastAttempt = phase, reason, last
		return f
	}
	breaker := rec(findingrecord.BreakerName, v1alpha1.PhaseBlocked, findingrecord.BreakerTripped, at(time.Second))
	breaker.Spec.Check = findingrecord.BreakerCheck
	got := actionsOnly([]v1alpha1.Finding{
		rec("applied", v1alpha1.PhaseResolved, string(drift.Applied), at(time.Minute)),
		rec("pending", v1alpha1.PhaseActing, string(drift.Pending), at(time.Minute)),
		rec("claimed", v1alpha1.PhaseActing, "", at(time.Minute)),
		rec("refused", v1alpha1.PhaseBlocked, string(drift.Refused), at(time.Minute)),
		rec("old", v1alpha1.PhaseResolved, string(drift.Applied), at(2*time.Hour)),
		rec("never", v1alpha1.PhaseWaiting, "", nil),
		breaker,
	}, t0, time.Hour)
	want := []string{"ns/applied", "ns/claimed", "ns/pending"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// takes is Budget.take's verdict alone.
func takes(b *Budget, now time.Time, key string, w window) bool {
	ok, _ := b.take(now, key, w)
	return ok
}

// actionsOnly is recentActions' times alone.
func actionsOnly(recs []v1alpha1.Finding, now time.Time, interval time.Duration) map[string]time.Time {
	a, _ := recentActions(recs, now, interval)
	return a
}

// fixRecord is a record of an action `tether fix --apply` took at at, as
// findingrecord.RecordFixAction writes it.
func fixRecord(name string, at time.Time) v1alpha1.Finding {
	t := metav1.NewTime(at)
	return v1alpha1.Finding{ObjectMeta: metav1.ObjectMeta{Namespace: "tether-system", Name: name},
		Spec:   v1alpha1.FindingSpec{ID: "fix-" + name, Check: findingrecord.FixCheck},
		Status: v1alpha1.FindingStatus{Phase: v1alpha1.PhaseResolved, Reason: "Applied", LastAttempt: &t, ResolvedAt: &t}}
}

// One budget, said out loud: a supervised batch of six repairs fills the
// controller's window (limit 5 per 10m) and makes it wait until the first
// of them leaves it, without tripping its breaker; the controller's own
// actions still trip it, with or without supervised ones in the window.
func TestBudget_supervisedActionsCountButNeverTrip(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var recs []v1alpha1.Finding
	for i := range 6 {
		recs = append(recs, fixRecord(fmt.Sprintf("fix-%d", i), t0.Add(-time.Duration(6-i)*time.Minute)))
	}
	actions, supervised := recentActions(recs, t0, 10*time.Minute)
	b := NewBudget(5, 10*time.Minute)
	ok, wait := b.take(t0, "ns/own", window{actions: actions, supervised: supervised})
	if ok || b.IsTripped() {
		t.Fatalf("six supervised actions in the window: took %v, tripped %v; want a wait and no trip", ok, b.IsTripped())
	}
	if wait != 4*time.Minute {
		t.Errorf("wait %s, want 4m (the first supervised action, 6m old, leaves a 10m window)", wait)
	}
	// Two of them leave the window: room for the controller again.
	if ok, _ := b.take(t0.Add(5*time.Minute), "ns/own", window{actions: actions, supervised: supervised}); !ok {
		t.Error("no room once supervised actions left the window")
	}

	// Three of its own and two supervised: it waits, no trip.
	b = NewBudget(5, 10*time.Minute)
	own := map[string]time.Time{"ns/a": t0.Add(-time.Minute), "ns/b": t0.Add(-time.Minute), "ns/c": t0.Add(-time.Minute)}
	mixed := window{actions: maps.Clone(own), supervised: map[string]bool{"tether-system/fix-0": true, "tether-system/fix-1": true}}
	mixed.actions["tether-system/fix-0"], mixed.actions["tether-system/fix-1"] = t0.Add(-2*time.Minute), t0.Add(-3*time.Minute)
	if ok, wait := b.take(t0, "ns/d", mixed); ok || wait != 7*time.Minute || b.IsTripped() {
		t.Errorf("3 own + 2 supervised: took %v, wait %s, tripped %v; want a 7m wait, no trip", ok, wait, b.IsTripped())
	}
	// Five of its own: it trips, supervised ones or not.
	for _, k := range []string{"ns/d", "ns/e"} {
		own[k] = t0.Add(-time.Minute)
	}
	if ok, _ := b.take(t0, "ns/f", window{actions: own}); ok || !b.IsTripped() {
		t.Errorf("5 own actions: took %v, tripped %v; want the trip", ok, b.IsTripped())
	}
}
