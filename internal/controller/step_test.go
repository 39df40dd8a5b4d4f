package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/check"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func safeFinding() check.Finding {
	return check.Finding{ID: "abc", Check: check.OrphanHotplugVolume, Severity: check.SeverityWarning,
		Action: check.Action{Type: check.VMIRemoveVolume, Safe: true}}
}

func blockedFinding(r check.BlockReason) check.Finding {
	f := safeFinding()
	f.Action.Safe, f.Action.BlockedBy = false, r
	return f
}

type recOpt func(*v1alpha1.Finding)

func record(opts ...recOpt) *v1alpha1.Finding {
	r := &v1alpha1.Finding{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))}}
	for _, o := range opts {
		o(r)
	}
	return r
}

func firstAt(t time.Time) recOpt {
	return func(r *v1alpha1.Finding) { r.Status.FirstObserved = mt(t) }
}
func phase(p v1alpha1.Phase) recOpt { return func(r *v1alpha1.Finding) { r.Status.Phase = p } }
func createdAt(t time.Time) recOpt {
	return func(r *v1alpha1.Finding) { r.CreationTimestamp = metav1.NewTime(t) }
}
func failed(attempts int32, last time.Time) recOpt {
	return func(r *v1alpha1.Finding) {
		r.Status.Attempts, r.Status.LastAttempt, r.Status.Phase = attempts, mt(last), v1alpha1.PhaseFailed
	}
}

func TestDecide(t *testing.T) {
	grace := 10 * time.Minute
	for _, c := range []struct {
		name        string
		f           check.Finding
		rec         *v1alpha1.Finding
		now         time.Time
		dryRun      bool
		wantPhase   v1alpha1.Phase
		wantReason  string
		wantAct     bool
		wantRequeue time.Duration
		wantFirst   time.Time
	}{
		{name: "new safe finding -> waiting the whole grace", f: safeFinding(), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0},
		{name: "mid-grace after restart -> waits only the rest, from the stored first-observed",
			f: safeFinding(), rec: record(firstAt(t0.Add(-7*time.Minute)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: 3 * time.Minute, wantFirst: t0.Add(-7 * time.Minute)},
		{name: "grace passed -> act", f: safeFinding(), rec: record(firstAt(t0.Add(-grace)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseActing, wantAct: true, wantFirst: t0.Add(-grace)},
		{name: "grace passed, dry run -> blocked DryRun, never act", f: safeFinding(), rec: record(firstAt(t0.Add(-time.Hour))), now: t0, dryRun: true,
			wantPhase: v1alpha1.PhaseBlocked, wantReason: ReasonDryRun, wantFirst: t0.Add(-time.Hour)},
		{name: "blocked by migration -> blocked, no requeue (the VMI change wakes us)", f: blockedFinding(check.VMIMigrating), now: t0,
			wantPhase: v1alpha1.PhaseBlocked, wantReason: string(check.VMIMigrating), wantFirst: t0},
		{name: "blocked keeps the first-observed clock", f: blockedFinding(check.VMIMigrating),
			rec: record(firstAt(t0.Add(-20*time.Minute)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseBlocked, wantReason: string(check.VMIMigrating), wantFirst: t0.Add(-20 * time.Minute)},
		{name: "resolved record and condition back -> clock restarts", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), phase(v1alpha1.PhaseResolved)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0},
		{name: "first-observed edited to before the record existed -> creation time counts",
			f: safeFinding(), rec: record(createdAt(t0.Add(-2*time.Minute)), firstAt(t0.Add(-24*time.Hour)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: 8 * time.Minute, wantFirst: t0.Add(-2 * time.Minute)},
		{name: "first-observed in the future -> now", f: safeFinding(), rec: record(firstAt(t0.Add(time.Hour)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0},
		{name: "failed twice, backoff not over -> wait", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), failed(2, t0.Add(-5*time.Second))), now: t0,
			wantPhase: v1alpha1.PhaseFailed, wantRequeue: 5 * time.Second, wantFirst: t0.Add(-time.Hour)},
		{name: "failed twice, backoff over -> act again", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), failed(2, t0.Add(-10*time.Second))), now: t0,
			wantPhase: v1alpha1.PhaseActing, wantAct: true, wantFirst: t0.Add(-time.Hour)},
		{name: "information only -> observed", f: check.Finding{ID: "i", Severity: check.SeverityInfo, Action: check.Action{Type: check.None}}, now: t0,
			wantPhase: v1alpha1.PhaseObserved, wantFirst: t0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := decide(stepInput{Finding: c.f, Record: c.rec, Now: c.now, Grace: grace, DryRun: c.dryRun, Backoff: backoff(5*time.Second, time.Minute)})
			if got.Status.Phase != c.wantPhase || got.Status.Reason != c.wantReason || got.Act != c.wantAct || got.RequeueAfter != c.wantRequeue {
				t.Fatalf("got phase=%s reason=%q act=%v requeue=%s", got.Status.Phase, got.Status.Reason, got.Act, got.RequeueAfter)
			}
			if !got.Status.FirstObserved.Time.Equal(c.wantFirst) {
				t.Fatalf("first observed %s, want %s", got.Status.FirstObserved.Time, c.wantFirst)
			}
			if c.f.Action.Safe && !got.Status.ActAfter.Time.Equal(c.wantFirst.Add(grace)) {
				t.Fatalf("act after %s, want %s", got.Status.ActAfter.Time, c.wantFirst.Add(grace))
			}
		})
	}
}

// FuzzDecide: whatever the stored record says, an unsafe finding is never
// acted on, dry run never acts, and nothing acts before first-observed+grace
// measured from no earlier than the record's creation.
func FuzzDecide(f *testing.F) {
	f.Add(true, false, int64(0), int64(-600), int64(-3600), "Waiting", int32(0), int64(0))
	f.Add(false, false, int64(-10), int64(-99999), int64(-5), "Resolved", int32(3), int64(-2))
	f.Fuzz(func(t *testing.T, safe, dryRun bool, nowOff, firstOff, createdOff int64, ph string, attempts int32, lastOff int64) {
		now := t0.Add(time.Duration(nowOff) * time.Second)
		fd := safeFinding()
		if !safe {
			fd = blockedFinding(check.VMITerminating)
		}
		rec := record(createdAt(t0.Add(time.Duration(createdOff)*time.Second)), firstAt(t0.Add(time.Duration(firstOff)*time.Second)),
			phase(v1alpha1.Phase(ph)), failed(attempts, t0.Add(time.Duration(lastOff)*time.Second)))
		rec.Status.Phase = v1alpha1.Phase(ph)
		grace := 10 * time.Minute
		got := decide(stepInput{Finding: fd, Record: rec, Now: now, Grace: grace, DryRun: dryRun, Backoff: backoff(time.Second, time.Minute)})
		if got.Act && (!safe || dryRun) {
			t.Fatalf("acted: safe=%v dryRun=%v", safe, dryRun)
		}
		created := rec.CreationTimestamp.Time
		if got.Act && now.Before(created.Truncate(time.Second).Add(grace)) && ph != string(v1alpha1.PhaseResolved) {
			t.Fatalf("acted at %s before creation %s + grace", now, created)
		}
		if got.Act && ph == string(v1alpha1.PhaseResolved) {
			t.Fatal("acted on a condition that just reappeared")
		}
	})
}

func TestBudget_tripsAndStaysTripped(t *testing.T) {
	b := newBudget(2, time.Minute)
	if !b.take(t0) || !b.take(t0.Add(time.Second)) {
		t.Fatal("the first two actions must pass")
	}
	if b.take(t0.Add(2 * time.Second)) {
		t.Fatal("the third within the window must be refused")
	}
	if b.take(t0.Add(time.Hour)) || !b.isTripped() {
		t.Fatal("once tripped, acting stays stopped")
	}
}

func TestBudget_windowSlides(t *testing.T) {
	b := newBudget(2, time.Minute)
	for i := 0; i < 10; i++ {
		if !b.take(t0.Add(time.Duration(i) * 31 * time.Second)) {
			t.Fatalf("action %d refused though at most 2 fall in any minute", i)
		}
	}
}

func TestBackoff(t *testing.T) {
	bo := backoff(5*time.Second, time.Minute)
	for attempts, want := range map[int32]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 5: time.Minute, 50: time.Minute} {
		if got := bo(attempts); got != want {
			t.Errorf("attempts %d: got %s want %s", attempts, got, want)
		}
	}
}
