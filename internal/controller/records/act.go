package records

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/go-logr/logr"
	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/metrics"
)

// runAction carries out f's action, reserved in the budget at taken, within
// the action timeout, and counts it. An action that changed nothing (the
// live re-check refused, the VMI migrates, RBAC forbade it) gives its
// budget back.
func (rs *Keeper) runAction(ctx context.Context, log logr.Logger, apply ApplyFunc, f drift.Finding, rec *v1alpha1.Finding, taken time.Time) drift.Result {
	actx, cancel := context.WithTimeout(ctx, rs.Config.ActionTimeout.Duration)
	started := time.Now()
	res := apply(actx, f)
	cancel()
	metrics.Actions.WithLabelValues(f.Check, string(f.Action.Type), string(res.Outcome)).Inc()
	log.Info("action finished", "action", f.Action.Type, "result", res.Outcome, "message", res.Message,
		"took", time.Since(started).Round(time.Millisecond).String())
	if changedNothing(res) {
		rs.Budget.refund(recordKey(rec), taken)
	}
	return res
}

// changedNothing reports whether an action's result proves that nothing was
// written: the live state said not safe now, or the API server forbade the
// dry run or the write.
func changedNothing(res drift.Result) bool {
	return res.Outcome == drift.Refused || res.Outcome == drift.Migrating || apierrors.IsForbidden(res.Err)
}

// act records Acting, runs the action and stores the outcome; it returns
// the action's result (zero when the claim was not stored and nothing ran).
func (rs *Keeper) act(ctx context.Context, log logr.Logger, apply ApplyFunc, f drift.Finding, rec *v1alpha1.Finding, st v1alpha1.FindingStatus, taken time.Time) (drift.Result, time.Duration, error) {
	// The claim carries the attempt's time: should the process die during
	// the action, the record still counts in the next budget window. It
	// also carries a claim id of its own, so it is always a real write
	// against the resourceVersion this pass read: of two processes that
	// decided from the same record, one gets a conflict and does not act.
	st.LastAttempt = mt(taken)
	st.Claim = rs.claimID(taken)
	if err := rs.claim(ctx, rec, st); err != nil {
		rs.Budget.refund(recordKey(rec), taken) // nothing was done
		return drift.Result{}, 0, err           // conflict or error: requeue and decide again
	}
	if rs.AfterClaim != nil {
		rs.AfterClaim(f)
	}
	if st.ActAfter != nil {
		late := rs.Now().Sub(st.ActAfter.Time)
		metrics.GraceToActionSeconds.Observe(late.Seconds())
		log.Info("acting", "action", f.Action.Type, "afterGrace", late.String())
	}
	res := rs.runAction(ctx, log, apply, f, rec, taken)
	if rs.AfterAction != nil {
		rs.AfterAction(f)
	}
	st, requeue := rs.outcome(st, res)
	return res, requeue, rs.writeStatus(ctx, rec, st)
}

// outcome is the record's status after an action, and when to look again.
func (rs *Keeper) outcome(st v1alpha1.FindingStatus, res drift.Result) (v1alpha1.FindingStatus, time.Duration) {
	now := rs.Now()
	st.LastAttempt = mt(now)
	st.Message = res.Message
	st.Reason = string(res.Outcome)
	switch res.Outcome {
	case drift.Applied:
		st.Phase, st.ResolvedAt, st.Attempts = v1alpha1.PhaseResolved, mt(now), 0
		return st, 0
	case drift.Pending:
		st.Phase = v1alpha1.PhaseActing
		return st, pendingRequeue
	}
	st.Attempts++
	st.Phase = v1alpha1.PhaseFailed
	switch {
	case res.Outcome == drift.Refused || res.Outcome == drift.Migrating:
		// The live state says not safe now: the grace period starts
		// again once the action is safe again.
		st.Phase = v1alpha1.PhaseBlocked
		st.SafeSince, st.ActAfter = nil, nil
	case apierrors.IsForbidden(res.Err):
		// RBAC refused the dry run or the write (a missing role must not
		// trip the blast-radius limit for every other check).
		st.Reason = ReasonForbidden
	}
	return st, rs.backoff()(st.Attempts)
}

// claimInFlight returns how long an Acting claim without an outcome may
// still be running (its attempt began less than the action timeout ago),
// or 0.
func claimInFlight(rec *v1alpha1.Finding, now time.Time, timeout time.Duration) time.Duration {
	if rec == nil || rec.Status.Phase != v1alpha1.PhaseActing || rec.Status.Reason != "" || rec.Status.LastAttempt == nil {
		return 0
	}
	// A second of margin: the stored time is cut to the second.
	if left := rec.Status.LastAttempt.Add(timeout + time.Second).Sub(now); left > 0 {
		return left
	}
	return 0
}

// breakerRecheck is how often a finding held by the blast-radius limit is
// looked at again (after a reset, acting resumes within it).
const breakerRecheck = 15 * time.Second

// pendingRequeue is when to look again after an action that was accepted
// but has not taken effect yet.
const pendingRequeue = 10 * time.Second
