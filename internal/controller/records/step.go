package records

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
)

// Reasons the controller itself gives for holding a safe action.
const (
	// ReasonDryRun: the controller runs in report-only mode.
	ReasonDryRun = "DryRun"
	// ReasonBlastRadius: the action limit was reached; acting has stopped.
	ReasonBlastRadius = "BlastRadiusExceeded"
	// ReasonAnomalyGuard: the anomaly guard is tripped; acting has stopped.
	ReasonAnomalyGuard = "AnomalyGuard"
	// ReasonBlastRadiusShared: actions of `tether fix --apply` fill the
	// blast-radius window; waiting until they leave it (no trip).
	ReasonBlastRadiusShared = "BlastRadiusShared"
	// ReasonBackoff: an earlier attempt did not apply; waiting to retry.
	ReasonBackoff = "Backoff"
	// ReasonForbidden: the last attempt was refused by RBAC; nothing changed.
	ReasonForbidden = "Forbidden"
	// ReasonResolvedAfterAction: the condition went after an action was
	// claimed whose outcome was never stored (its process stopped); the
	// action counts in the blast-radius window as if it had applied.
	ReasonResolvedAfterAction = findingrecord.ResolvedAfterAction
)

// stepInput is what decides a finding record's next state.
type stepInput struct {
	Finding drift.Finding
	// Record is the stored Finding object, or nil when there is none yet.
	Record  *v1alpha1.Finding
	Now     time.Time
	Grace   time.Duration
	DryRun  bool
	Backoff func(attempts int32) time.Duration
	// ObserveEvery is how often lastObserved (and evidence that differs
	// only in the ages it quotes) is refreshed; zero means once a minute.
	ObserveEvery time.Duration
	// WatchingSince is when this process began deciding (its first pass as
	// leader). A record last observed before then was written by an
	// earlier process, and the time in between was watched by nobody.
	// Zero means Now: nothing stored is known to have been watched.
	WatchingSince time.Time
}

// step is the decision: the status to store, whether to act now (subject to
// the blast-radius budget), and when to look again.
type step struct {
	Status       v1alpha1.FindingStatus
	Act          bool
	RequeueAfter time.Duration
	// Distrusted says why the stored record's times were not used (empty
	// when they were, or when there were none): the caller reports it.
	Distrusted string
}

// distrust returns why a stored record's times are no evidence, or "": its
// status was written by another field manager than the controller's (a
// hand edit), or one of its times lies in the future (a clock that ran
// ahead, or a forged record). Such a record counts as new: every clock
// starts again now.
func distrust(rec *v1alpha1.Finding, now time.Time) string {
	st := rec.Status
	if st.FirstObserved == nil && st.LastObserved == nil && st.SafeSince == nil {
		return "" // no status yet: nothing to trust
	}
	if !rec.StatusWrittenBy(v1alpha1.FieldManager) {
		return fmt.Sprintf("its status was written by %v, not only by the controller's field manager %s; a hand-edited record is no evidence", rec.StatusWriters(), v1alpha1.FieldManager)
	}
	if t := st.FutureTime(now); t != "" {
		return fmt.Sprintf("its %s lies in the future (now %s)", t, now.UTC().Format(time.RFC3339))
	}
	return ""
}

// firstObserved returns when the current run of the condition began: the
// stored time, unless there is none or the record was resolved (the clock
// restarts when a condition reappears). It is the record of first sight.
func firstObserved(rec *v1alpha1.Finding, now time.Time) time.Time {
	if rec == nil || rec.Status.Phase == v1alpha1.PhaseResolved {
		return now
	}
	return trusted(rec, rec.Status.FirstObserved, now)
}

// safeSince returns when the action became safe in its current stretch of
// safety, counting only time the controller watched:
//   - none stored (the action was not safe at the last decision), a
//     resolved record, or no lastObserved: now;
//   - safe only in dry run, and the controller now acts: now (time seen in
//     report-only mode is not credited; the full grace period runs after
//     the switch);
//   - last observed before this process began watching (a restart or a new
//     leader): the gap in between was watched by nobody. Over a gap longer
//     than the blind-gap bound (or the grace period) the stretch starts
//     again now; over a shorter one it is moved forward by the gap, so only
//     the watched time counts.
func safeSince(in stepInput) time.Time {
	rec, now := in.Record, in.Now
	if rec == nil || rec.Status.Phase == v1alpha1.PhaseResolved || rec.Status.SafeSince == nil || rec.Status.LastObserved == nil {
		return now
	}
	if rec.Status.Reason == ReasonDryRun && !in.DryRun {
		return now
	}
	t := trusted(rec, rec.Status.SafeSince, now)
	watching := in.watching()
	if last := rec.Status.LastObserved.Time; last.Before(watching) {
		gap := watching.Sub(last)
		bound := findingrecord.MaxBlindGap // as for the durable node-gone records
		if in.Grace > 0 && in.Grace < bound {
			bound = in.Grace
		}
		if gap > bound {
			return now
		}
		t = t.Add(gap)
	}
	if t.After(now) {
		t = now
	}
	return t
}

// watching is when this process began watching, at the latest now.
func (in stepInput) watching() time.Time {
	if in.WatchingSince.IsZero() || in.WatchingSince.After(in.Now) {
		return in.Now
	}
	return in.WatchingSince
}

// trusted clamps a stored time: none means now; a time earlier than the
// record's creation is not trusted (nobody can have seen the condition
// before the record existed, so a hand-edited time cannot shorten the grace
// period), and neither is one in the future.
func trusted(rec *v1alpha1.Finding, stored *metav1.Time, now time.Time) time.Time {
	if stored == nil {
		return now
	}
	t := stored.Time
	if created := rec.CreationTimestamp.Time; !created.IsZero() && t.Before(created) {
		t = created
	}
	if t.After(now) {
		t = now
	}
	return t
}

// decide computes the next state of one finding record. It is pure.
func decide(in stepInput) step {
	var distrusted string
	if in.Record != nil && in.Record.Status.Phase != v1alpha1.PhaseResolved {
		if distrusted = distrust(in.Record, in.Now); distrusted != "" {
			// Keep the record (its name and owner), not its times.
			rec := in.Record.DeepCopy()
			rec.Status = v1alpha1.FindingStatus{}
			in.Record = rec
		}
	}
	st := decideTrusted(in)
	st.Distrusted = distrusted
	return st
}

// decideTrusted is decide on a record whose times may be used.
//
// The grace period counts from safeSince, the start of the current stretch
// in which the action is safe: a finding held for an hour (migrating VMI,
// unreachable tenant, ...) waits the full grace period once the hold clears.
func decideTrusted(in stepInput) step {
	f := in.Finding
	// Stored times have second precision; decide on what will be stored.
	first := firstObserved(in.Record, in.Now).Truncate(time.Second)
	st := v1alpha1.FindingStatus{
		Severity:      string(f.Severity),
		Message:       f.Message,
		FirstObserved: mt(first),
		LastObserved:  mt(in.Now),
		Evidence:      f.Evidence,
		Action: v1alpha1.ProposedAction{
			Type: string(f.Action.Type), Safe: f.Action.Safe, BlockedBy: string(f.Action.BlockedBy), Remedy: f.Action.Remedy,
		},
	}
	if rec := in.Record; rec != nil && rec.Status.Phase != v1alpha1.PhaseResolved {
		st.Attempts, st.LastAttempt = rec.Status.Attempts, rec.Status.LastAttempt
		st.Reason = rec.Status.Reason
		every := in.ObserveEvery
		if every <= 0 {
			every = time.Minute
		}
		// A lastObserved from before this process watched is refreshed at
		// once: the unwatched gap behind it is then accounted for once.
		if lo := rec.Status.LastObserved; lo != nil && in.Now.Sub(lo.Time) < every && !lo.Time.Before(in.watching()) {
			st.LastObserved = lo.DeepCopy() // refresh at most that often
			// Evidence and message that differ only in the ages they
			// quote are refreshed with lastObserved, not on every pass.
			if sameButAges(rec.Status.Message, st.Message) && slices.EqualFunc(rec.Status.Evidence, st.Evidence, sameButAges) {
				st.Message, st.Evidence = rec.Status.Message, slices.Clone(rec.Status.Evidence)
			}
		}
	}
	switch {
	case !f.Action.Safe && f.Action.BlockedBy == "":
		st.Phase, st.Reason = v1alpha1.PhaseObserved, ""
		return step{Status: st}
	case !f.Action.Safe:
		st.Phase, st.Reason = v1alpha1.PhaseBlocked, string(f.Action.BlockedBy)
		return step{Status: st}
	}
	safe := safeSince(in).Truncate(time.Second)
	actAfter := safe.Add(in.Grace)
	st.SafeSince, st.ActAfter = mt(safe), mt(actAfter)
	switch {
	case in.Now.Before(actAfter):
		st.Phase, st.Reason = v1alpha1.PhaseWaiting, ""
		return step{Status: st, RequeueAfter: actAfter.Sub(in.Now)}
	case in.DryRun:
		st.Phase, st.Reason = v1alpha1.PhaseBlocked, ReasonDryRun
		return step{Status: st}
	}
	if st.Attempts > 0 && st.LastAttempt != nil && in.Backoff != nil {
		retryAt := st.LastAttempt.Add(in.Backoff(st.Attempts))
		if in.Now.Before(retryAt) {
			if in.Record != nil && in.Record.Status.Phase != "" {
				st.Phase = in.Record.Status.Phase
			} else {
				st.Phase = v1alpha1.PhaseFailed
			}
			return step{Status: st, RequeueAfter: retryAt.Sub(in.Now)}
		}
	}
	st.Phase, st.Reason = v1alpha1.PhaseActing, ""
	return step{Status: st, Act: true}
}

// backoff returns base·2^(attempts-1), capped at max.
func backoff(base, max time.Duration) func(int32) time.Duration {
	return func(attempts int32) time.Duration {
		d := base
		for i := int32(1); i < attempts && d < max; i++ {
			d *= 2
		}
		if d > max {
			d = max
		}
		return d
	}
}

func mt(t time.Time) *metav1.Time {
	m := metav1.NewTime(t.Truncate(time.Second))
	return &m
}

// ages matches the durations Go prints ("5m0s", "1h2m3.5s", "300ms").
var ages = regexp.MustCompile(`\d+(\.\d+)?(ns|µs|us|ms|s|m|h)(\d+(\.\d+)?(ns|µs|us|ms|s|m|h))*`)

// sameButAges reports whether a and b are equal once every duration in
// them is blanked out.
func sameButAges(a, b string) bool {
	if a == b {
		return true
	}
	return ages.ReplaceAllString(a, "#") == ages.ReplaceAllString(b, "#")
}
