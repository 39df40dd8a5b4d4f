package records

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func safeFinding() drift.Finding {
	return drift.Finding{ID: "abc", Check: check.OrphanHotplugVolume, Severity: drift.SeverityWarning,
		Action: drift.Action{Type: check.VMIRemoveVolume, Safe: true}}
}

func blockedFinding(r drift.BlockReason) drift.Finding {
	f := safeFinding()
	f.Action.Safe, f.Action.BlockedBy = false, r
	return f
}

type recOpt func(*v1alpha1.Finding)

// record is a stored record the controller wrote (its field manager owns
// the status), last observed 30s before t0.
func record(opts ...recOpt) *v1alpha1.Finding {
	r := &v1alpha1.Finding{ObjectMeta: metav1.ObjectMeta{
		CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
		ManagedFields:     []metav1.ManagedFieldsEntry{statusBy(v1alpha1.FieldManager)},
	}}
	r.Status.LastObserved = mt(t0.Add(-30 * time.Second))
	for _, o := range opts {
		o(r)
	}
	return r
}

func statusBy(manager string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", APIVersion: "tether.dev/v1alpha1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:lastObserved":{},"f:safeSince":{}}}`)}}
}

func observedAt(t time.Time) recOpt {
	return func(r *v1alpha1.Finding) { r.Status.LastObserved = mt(t) }
}

func editedBy(manager string) recOpt {
	return func(r *v1alpha1.Finding) { r.ManagedFields = append(r.ManagedFields, statusBy(manager)) }
}

func reason(s string) recOpt { return func(r *v1alpha1.Finding) { r.Status.Reason = s } }

// watchingAllAlong: the deciding process has watched since before any
// stored time (no restart in between).
var watchingAllAlong = t0.Add(-24 * time.Hour)

func firstAt(t time.Time) recOpt {
	return func(r *v1alpha1.Finding) { r.Status.FirstObserved = mt(t) }
}
func safeAt(t time.Time) recOpt {
	return func(r *v1alpha1.Finding) { r.Status.SafeSince = mt(t) }
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
		f           drift.Finding
		rec         *v1alpha1.Finding
		now         time.Time
		dryRun      bool
		wantPhase   v1alpha1.Phase
		wantReason  string
		wantAct     bool
		wantRequeue time.Duration
		wantFirst   time.Time
		// wantSafe is the expected safeSince (zero: unset); actAfter must
		// be wantSafe+grace.
		wantSafe time.Time
		// watching is when the deciding process began (default: all along).
		watching time.Time
		grace    time.Duration // default 10m
		// wantDistrust is a substring of why the record was not trusted.
		wantDistrust string
	}{
		{name: "new safe finding -> waiting the whole grace", f: safeFinding(), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0, wantSafe: t0},
		{name: "mid-grace after restart -> waits only the rest, from the stored safe-since",
			f: safeFinding(), rec: record(firstAt(t0.Add(-7*time.Minute)), safeAt(t0.Add(-7*time.Minute)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: 3 * time.Minute, wantFirst: t0.Add(-7 * time.Minute), wantSafe: t0.Add(-7 * time.Minute)},
		{name: "safe, restart mid-grace -> keeps safeSince",
			f: safeFinding(), rec: record(firstAt(t0.Add(-30*time.Minute)), safeAt(t0.Add(-4*time.Minute)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: 6 * time.Minute, wantFirst: t0.Add(-30 * time.Minute), wantSafe: t0.Add(-4 * time.Minute)},
		{name: "grace passed -> act", f: safeFinding(), rec: record(firstAt(t0.Add(-grace)), safeAt(t0.Add(-grace)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseActing, wantAct: true, wantFirst: t0.Add(-grace), wantSafe: t0.Add(-grace)},
		{name: "grace passed, dry run -> blocked DryRun, never act, safe-since kept", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), safeAt(t0.Add(-time.Hour))), now: t0, dryRun: true,
			wantPhase: v1alpha1.PhaseBlocked, wantReason: ReasonDryRun, wantFirst: t0.Add(-time.Hour), wantSafe: t0.Add(-time.Hour)},
		{name: "blocked by migration -> blocked, no requeue (the VMI change wakes us)", f: blockedFinding(check.VMIMigrating), now: t0,
			wantPhase: v1alpha1.PhaseBlocked, wantReason: string(check.VMIMigrating), wantFirst: t0},
		{name: "blocked keeps the first-observed clock and clears safe-since", f: blockedFinding(check.VMIMigrating),
			rec: record(firstAt(t0.Add(-20*time.Minute)), safeAt(t0.Add(-20*time.Minute)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseBlocked, wantReason: string(check.VMIMigrating), wantFirst: t0.Add(-20 * time.Minute)},
		{name: "blocked an hour, becomes safe -> waits the full grace from safeSince", f: safeFinding(),
			rec: func() *v1alpha1.Finding {
				r := record(firstAt(t0.Add(-time.Hour)), phase(v1alpha1.PhaseBlocked))
				r.Status.Reason = string(check.VMIMigrating)
				return r
			}(), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0.Add(-time.Hour), wantSafe: t0},
		{name: "tenant unreachable for an hour, becomes safe -> waits the full grace", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), phase(v1alpha1.PhaseBlocked)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0.Add(-time.Hour), wantSafe: t0},
		{name: "resolved record and condition back -> clock restarts", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), safeAt(t0.Add(-time.Hour)), phase(v1alpha1.PhaseResolved)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0, wantSafe: t0},
		{name: "first-observed and safe-since edited to before the record existed -> creation time counts",
			f: safeFinding(), rec: record(createdAt(t0.Add(-2*time.Minute)), firstAt(t0.Add(-24*time.Hour)), safeAt(t0.Add(-24*time.Hour)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: 8 * time.Minute, wantFirst: t0.Add(-2 * time.Minute), wantSafe: t0.Add(-2 * time.Minute)},
		{name: "first-observed and safe-since in the future -> record not trusted, clocks start now", f: safeFinding(),
			rec: record(firstAt(t0.Add(time.Hour)), safeAt(t0.Add(time.Hour)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0, wantSafe: t0, wantDistrust: "in the future"},
		{name: "last-observed in the future (forged or a clock ahead) -> not trusted, full grace", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), safeAt(t0.Add(-time.Hour)), observedAt(t0.Add(time.Hour)), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0, wantSafe: t0, wantDistrust: "lastObserved"},
		{name: "status edited by another field manager -> not trusted, full grace", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), safeAt(t0.Add(-time.Hour)), editedBy("kubectl-edit"), phase(v1alpha1.PhaseWaiting)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0, wantSafe: t0, wantDistrust: "field manager"},
		{name: "pre-created record with no status of ours -> not trusted", f: safeFinding(),
			rec: func() *v1alpha1.Finding {
				r := record(firstAt(t0.Add(-time.Hour)), safeAt(t0.Add(-time.Hour)), phase(v1alpha1.PhaseWaiting))
				r.ManagedFields = []metav1.ManagedFieldsEntry{statusBy("kubectl-create")}
				return r
			}(), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0, wantSafe: t0, wantDistrust: "field manager"},
		// Only watched time counts (review F4): the controller was down
		// between lastObserved and its restart.
		{name: "restart after a gap longer than the blind-gap bound -> grace starts again", f: safeFinding(),
			rec: record(firstAt(t0.Add(-50*time.Minute)), safeAt(t0.Add(-50*time.Minute)), observedAt(t0.Add(-40*time.Minute)), phase(v1alpha1.PhaseWaiting)),
			now: t0, watching: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0.Add(-50 * time.Minute), wantSafe: t0},
		{name: "restart after a short gap -> only the watched time counts", f: safeFinding(),
			rec: record(firstAt(t0.Add(-6*time.Minute)), safeAt(t0.Add(-6*time.Minute)), observedAt(t0.Add(-2*time.Minute)), phase(v1alpha1.PhaseWaiting)),
			now: t0, watching: t0,
			// watched 4m before the gap of 2m: 6m of grace remain
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: 6 * time.Minute, wantFirst: t0.Add(-6 * time.Minute), wantSafe: t0.Add(-4 * time.Minute)},
		{name: "restart after a short gap, grace already watched in full -> act", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), safeAt(t0.Add(-time.Hour)), observedAt(t0.Add(-time.Minute)), phase(v1alpha1.PhaseWaiting)),
			now: t0, watching: t0,
			wantPhase: v1alpha1.PhaseActing, wantAct: true, wantFirst: t0.Add(-time.Hour), wantSafe: t0.Add(-time.Hour + time.Minute)},
		{name: "gap longer than a short grace -> grace starts again", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), safeAt(t0.Add(-time.Hour)), observedAt(t0.Add(-2*time.Minute)), phase(v1alpha1.PhaseWaiting)),
			now: t0, watching: t0, grace: time.Minute,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: time.Minute, wantFirst: t0.Add(-time.Hour), wantSafe: t0},
		{name: "no lastObserved -> nothing was watched, grace starts again", f: safeFinding(),
			rec: func() *v1alpha1.Finding {
				r := record(firstAt(t0.Add(-time.Hour)), safeAt(t0.Add(-time.Hour)), phase(v1alpha1.PhaseWaiting))
				r.Status.LastObserved = nil
				return r
			}(), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0.Add(-time.Hour), wantSafe: t0},
		{name: "safe through a dry run, now acting -> the full grace runs after the switch", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), safeAt(t0.Add(-time.Hour)), phase(v1alpha1.PhaseBlocked), reason(ReasonDryRun)), now: t0,
			wantPhase: v1alpha1.PhaseWaiting, wantRequeue: grace, wantFirst: t0.Add(-time.Hour), wantSafe: t0},
		{name: "failed twice, backoff not over -> wait", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), safeAt(t0.Add(-time.Hour)), failed(2, t0.Add(-5*time.Second))), now: t0,
			wantPhase: v1alpha1.PhaseFailed, wantRequeue: 5 * time.Second, wantFirst: t0.Add(-time.Hour), wantSafe: t0.Add(-time.Hour)},
		{name: "failed twice, backoff over -> act again", f: safeFinding(),
			rec: record(firstAt(t0.Add(-time.Hour)), safeAt(t0.Add(-time.Hour)), failed(2, t0.Add(-10*time.Second))), now: t0,
			wantPhase: v1alpha1.PhaseActing, wantAct: true, wantFirst: t0.Add(-time.Hour), wantSafe: t0.Add(-time.Hour)},
		{name: "information only -> observed", f: drift.Finding{ID: "i", Severity: drift.SeverityInfo, Action: drift.Action{Type: drift.None}}, now: t0,
			wantPhase: v1alpha1.PhaseObserved, wantFirst: t0},
	} {
		t.Run(c.name, func(t *testing.T) {
			watching, grace := c.watching, grace
			if watching.IsZero() {
				watching = watchingAllAlong
			}
			if c.grace != 0 {
				grace = c.grace
			}
			got := decide(stepInput{Finding: c.f, Record: c.rec, Now: c.now, Grace: grace, DryRun: c.dryRun, Backoff: backoff(5*time.Second, time.Minute), WatchingSince: watching})
			if (c.wantDistrust == "") != (got.Distrusted == "") || !strings.Contains(got.Distrusted, c.wantDistrust) {
				t.Fatalf("distrusted = %q, want %q", got.Distrusted, c.wantDistrust)
			}
			if got.Status.Phase != c.wantPhase || got.Status.Reason != c.wantReason || got.Act != c.wantAct || got.RequeueAfter != c.wantRequeue {
				t.Fatalf("got phase=%s reason=%q act=%v requeue=%s", got.Status.Phase, got.Status.Reason, got.Act, got.RequeueAfter)
			}
			if !got.Status.FirstObserved.Time.Equal(c.wantFirst) {
				t.Fatalf("first observed %s, want %s", got.Status.FirstObserved.Time, c.wantFirst)
			}
			if c.wantSafe.IsZero() {
				if got.Status.SafeSince != nil || got.Status.ActAfter != nil {
					t.Fatalf("safe since %v, act after %v: want both unset while not safe", got.Status.SafeSince, got.Status.ActAfter)
				}
				return
			}
			if got.Status.SafeSince == nil || !got.Status.SafeSince.Time.Equal(c.wantSafe) {
				t.Fatalf("safe since %v, want %s", got.Status.SafeSince, c.wantSafe)
			}
			if !got.Status.ActAfter.Time.Equal(c.wantSafe.Add(grace)) {
				t.Fatalf("act after %s, want %s", got.Status.ActAfter.Time, c.wantSafe.Add(grace))
			}
		})
	}
}

// A hold that clears in the middle of a series of reconciles: the grace
// period counts from the moment the action became safe again.
func TestDecide_holdClearsRestartsGrace(t *testing.T) {
	grace := 10 * time.Minute
	rec := record(createdAt(t0))
	apply := func(f drift.Finding, now time.Time) step {
		st := decide(stepInput{Finding: f, Record: rec, Now: now, Grace: grace, WatchingSince: t0})
		rec.Status = st.Status
		return st
	}
	apply(safeFinding(), t0)                                         // safe from t0
	apply(blockedFinding(check.VMIMigrating), t0.Add(5*time.Minute)) // held
	back := t0.Add(time.Hour)
	if st := apply(safeFinding(), back); st.Act || st.Status.Phase != v1alpha1.PhaseWaiting || st.RequeueAfter != grace {
		t.Fatalf("right after the hold: phase %s act %v requeue %s; want the full grace", st.Status.Phase, st.Act, st.RequeueAfter)
	}
	if st := apply(safeFinding(), back.Add(grace-time.Second)); st.Act {
		t.Fatal("acted before the grace counted from the end of the hold")
	}
	if st := apply(safeFinding(), back.Add(grace)); !st.Act {
		t.Fatalf("not acting once the grace has passed: %s", st.Status.Phase)
	}
	if !rec.Status.FirstObserved.Time.Equal(t0) {
		t.Fatalf("first observed moved to %s", rec.Status.FirstObserved.Time)
	}
}

// FuzzDecide: whatever the stored record says, an unsafe finding is never
// acted on, dry run never acts, and an action needs the whole grace period
// of safety *watched by the controller*. The oracle states the rule from
// the record's contract (api/v1alpha1 FindingStatus), not from decide's
// helpers:
//   - watched time is the stored stretch [safeSince, lastObserved] plus the
//     time since this process began watching; the gap between lastObserved
//     and the start of watching was watched by nobody (and a gap longer than
//     the blind-gap bound or the grace period voids the stored stretch);
//   - no stored time is evidence when it lies after now, was written by
//     another field manager, or precedes the record's creation;
//   - a stretch safe only in dry run does not count once acting.
func FuzzDecide(f *testing.F) {
	f.Add(true, false, int64(0), int64(-600), int64(-3600), "Waiting", int32(0), int64(0), int64(-600), true, int64(-30), int64(-86400), false, "")
	f.Add(false, false, int64(-10), int64(-99999), int64(-5), "Resolved", int32(3), int64(-2), int64(-99999), true, int64(0), int64(0), false, "")
	f.Add(true, false, int64(0), int64(-9999), int64(-9999), "Blocked", int32(0), int64(0), int64(0), false, int64(-10), int64(0), false, "")
	f.Add(true, false, int64(0), int64(-3600), int64(-7200), "Waiting", int32(0), int64(0), int64(-3600), true, int64(-120), int64(0), false, "")
	f.Add(true, false, int64(0), int64(-3600), int64(-7200), "Waiting", int32(0), int64(0), int64(-3600), true, int64(3600), int64(-86400), false, "")
	f.Add(true, false, int64(0), int64(-3600), int64(-7200), "Waiting", int32(0), int64(0), int64(-3600), true, int64(-30), int64(-86400), true, "")
	f.Add(true, false, int64(0), int64(-3600), int64(-7200), "Blocked", int32(0), int64(0), int64(-3600), true, int64(-30), int64(-86400), false, ReasonDryRun)
	f.Fuzz(func(t *testing.T, safe, dryRun bool, nowOff, firstOff, createdOff int64, ph string, attempts int32, lastOff, safeOff int64, hasSafe bool,
		observedOff, watchingOff int64, handEdited bool, storedReason string) {
		now := t0.Add(time.Duration(nowOff) * time.Second)
		fd := safeFinding()
		if !safe {
			fd = blockedFinding(check.VMITerminating)
		}
		rec := record(createdAt(t0.Add(time.Duration(createdOff)*time.Second)), firstAt(t0.Add(time.Duration(firstOff)*time.Second)),
			phase(v1alpha1.Phase(ph)), failed(attempts, t0.Add(time.Duration(lastOff)*time.Second)),
			observedAt(t0.Add(time.Duration(observedOff)*time.Second)), reason(storedReason))
		rec.Status.Phase = v1alpha1.Phase(ph)
		if hasSafe {
			rec.Status.SafeSince = mt(t0.Add(time.Duration(safeOff) * time.Second))
		}
		if handEdited {
			rec.ManagedFields = append(rec.ManagedFields, statusBy("kubectl-edit"))
		}
		watching := t0.Add(time.Duration(watchingOff) * time.Second)
		grace := 10 * time.Minute
		got := decide(stepInput{Finding: fd, Record: rec, Now: now, Grace: grace, DryRun: dryRun, Backoff: backoff(time.Second, time.Minute), WatchingSince: watching})
		if !got.Act {
			if !safe && (got.Status.SafeSince != nil || got.Status.ActAfter != nil) {
				t.Fatal("an unsafe finding keeps a safe-since")
			}
			return
		}
		st := rec.Status
		switch {
		case !safe || dryRun:
			t.Fatalf("acted: safe=%v dryRun=%v", safe, dryRun)
		case ph == string(v1alpha1.PhaseResolved):
			t.Fatal("acted on a condition that just reappeared")
		case !hasSafe:
			t.Fatal("acted on a finding that was not safe at the last decision")
		case handEdited:
			t.Fatal("acted on times a hand-edited record claims")
		case storedReason == ReasonDryRun:
			t.Fatal("credited a stretch that was safe only in dry run")
		}
		for _, at := range []*metav1.Time{st.FirstObserved, st.LastObserved, st.SafeSince} {
			if at != nil && at.Time.After(now) {
				t.Fatalf("acted on a record with a time in the future: %s (now %s)", at.Time, now)
			}
		}
		// Second precision, as stored.
		from := st.SafeSince.Time.Truncate(time.Second)
		if created := rec.CreationTimestamp.Time.Truncate(time.Second); from.Before(created) {
			from = created
		}
		last := st.LastObserved.Time.Truncate(time.Second)
		w := watching
		if w.After(now) {
			w = now
		}
		var watched time.Duration
		if last.Before(w) {
			if gap := w.Sub(last); gap > grace || gap > 3*time.Minute {
				watched = now.Sub(w) // only the time since watching began
			} else {
				watched = last.Sub(from) + now.Sub(w)
			}
		} else {
			watched = now.Sub(from)
		}
		if watched < grace-time.Second {
			t.Fatalf("acted after %s of watched safety, want %s (safeSince %s, lastObserved %s, watching since %s, now %s)",
				watched, grace, st.SafeSince.Time, st.LastObserved.Time, watching, now)
		}
	})
}

func TestBackoff(t *testing.T) {
	bo := backoff(5*time.Second, time.Minute)
	for attempts, want := range map[int32]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 5: time.Minute, 50: time.Minute} {
		if got := bo(attempts); got != want {
			t.Errorf("attempts %d: got %s want %s", attempts, got, want)
		}
	}
}

// Evidence that differs only in the ages it quotes is not rewritten on
// every pass: it follows lastObserved, refreshed at most once a minute.
func TestDecide_evidenceAgesFollowLastObserved(t *testing.T) {
	stored := func(lastObserved time.Time) *v1alpha1.Finding {
		return record(phase(v1alpha1.PhaseObserved), func(r *v1alpha1.Finding) {
			r.Status.LastObserved = mt(lastObserved)
			r.Status.Message = "claim data has been terminating for 5m0s"
			r.Status.Evidence = []string{"pod job (created 1h2m3s ago) on node n1", "finalizer x"}
		})
	}
	f := blockedFinding("")
	f.Action.Type = drift.None
	f.Message = "claim data has been terminating for 5m30s"
	f.Evidence = []string{"pod job (created 1h2m33s ago) on node n1", "finalizer x"}
	for _, c := range []struct {
		name     string
		rec      *v1alpha1.Finding
		evidence []string
		keep     bool
	}{
		{"ages only, observed 10s ago -> stored evidence kept", stored(t0.Add(-10 * time.Second)), f.Evidence, true},
		{"ages only, observed 61s ago -> refreshed", stored(t0.Add(-61 * time.Second)), f.Evidence, false},
		{"another fact, observed 10s ago -> refreshed", stored(t0.Add(-10 * time.Second)), []string{"pod job (created 1h2m33s ago) on node n2", "finalizer x"}, false},
		{"one fact more -> refreshed", stored(t0.Add(-10 * time.Second)), append(slices.Clone(f.Evidence), "pod other"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := f
			in.Evidence = c.evidence
			st := decide(stepInput{Finding: in, Record: c.rec, Now: t0, Grace: time.Minute, WatchingSince: watchingAllAlong}).Status
			kept := slices.Equal(st.Evidence, c.rec.Status.Evidence) && st.Message == c.rec.Status.Message
			if kept != c.keep {
				t.Fatalf("kept=%v, want %v: %q / %q", kept, c.keep, st.Message, st.Evidence)
			}
			if !c.keep && (!slices.Equal(st.Evidence, c.evidence) || st.Message != f.Message) {
				t.Fatalf("not refreshed to the new text: %q / %q", st.Message, st.Evidence)
			}
		})
	}
}

func TestDecide_observeEvery(t *testing.T) {
	rec := record(phase(v1alpha1.PhaseObserved), func(r *v1alpha1.Finding) { r.Status.LastObserved = mt(t0.Add(-2 * time.Minute)) })
	f := blockedFinding("")
	for _, c := range []struct {
		every   time.Duration
		refresh bool
	}{{0, true}, {5 * time.Minute, false}, {10 * time.Second, true}} {
		st := decide(stepInput{Finding: f, Record: rec, Now: t0, ObserveEvery: c.every, WatchingSince: watchingAllAlong}).Status
		if got := st.LastObserved.Equal(mt(t0)); got != c.refresh {
			t.Errorf("every %s, observed 2m ago: refreshed=%v, want %v", c.every, got, c.refresh)
		}
	}
}

// After a restart the unwatched gap is accounted for once: the first
// decision refreshes lastObserved, so later passes of the same process do
// not move safeSince again, and the action comes when the watched time
// reaches the grace period.
func TestDecide_gapCountedOnce(t *testing.T) {
	grace := 10 * time.Minute
	rec := record(firstAt(t0.Add(-6*time.Minute)), safeAt(t0.Add(-6*time.Minute)), observedAt(t0.Add(-2*time.Minute)), phase(v1alpha1.PhaseWaiting))
	watching := t0 // restarted at t0: 4m watched, 2m not
	var acted time.Time
	for now := t0; now.Before(t0.Add(grace)); now = now.Add(10 * time.Second) {
		st := decide(stepInput{Finding: safeFinding(), Record: rec, Now: now, Grace: grace, WatchingSince: watching, ObserveEvery: time.Minute})
		if st.Act {
			acted = now
			break
		}
		rec.Status = st.Status
	}
	if want := t0.Add(6 * time.Minute); !acted.Equal(want) {
		t.Fatalf("acted at %s, want %s (grace minus the 4m watched before the restart)", acted, want)
	}
}
