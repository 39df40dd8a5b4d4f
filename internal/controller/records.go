package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/metrics"
)

// records keeps the Finding records of every reconciler: it names, creates,
// relabels, retires and resolves them, steps their grace periods (step.go),
// holds the one blast-radius budget (budget.go) and runs the actions.
//
// The reconcilers (hot-plug, storage, restart) only decide which subjects to
// look at and which findings are open; everything that happens to a record
// after that happens here, the same way for every check.
type records struct {
	// Cache is the informer-backed reader: records and the budget seed are
	// read from it.
	Cache client.Reader
	// Live writes records (its field manager is the controller's, which
	// makes their times evidence) and reads one back when it must.
	Live   client.Client
	Config *config.Config
	Budget *budget
	// Recorder records the Events; nil records none.
	Recorder *act.Recorder
	Now      func() time.Time
	Log      logr.Logger
	// Namespace is the controller's namespace: it holds the breaker record
	// (findingrecord.Breaker) that every process recording there honours.
	Namespace string
	// Identity names this process in its Acting claims.
	Identity string
	// watching is when this process began deciding (nil: every stored time
	// predates the process).
	watching *watchClock
	// afterClaim and afterAction, when set, run right after the Acting
	// claim is stored and right after the action returns (fault-injection
	// tests stop the process there).
	afterClaim, afterAction func(drift.Finding)
}

// applyFunc carries out one finding's action through package act, which
// re-reads live state and re-checks before it writes.
type applyFunc func(context.Context, drift.Finding) drift.Result

// path is what one reconciler brings to the sequence every record goes
// through (sync): how it acts, and the hooks of a mode that decides more
// than the step does. The hooks are optional; without them a finding is
// recorded, announced, held and acted on as every check's is.
type path struct {
	// apply carries out the action.
	apply applyFunc
	// grace is a finding's grace period; nil: its check's configured one.
	grace func(drift.Finding) time.Duration
	// told runs on every pass once the step is decided, before anything is
	// acted on: the mode tells of the finding in Events of its own.
	told func(context.Context, drift.Finding)
	// settle runs on every pass of a safe finding (not in dry run) and
	// returns how long it must still wait before it may be acted on: the
	// finding is Waiting until then, whatever the step decided.
	settle func(drift.Finding, time.Time) time.Duration
	// ready runs right before the budget is taken and confirms that the
	// finding may be acted on now; false leaves it alone for this pass,
	// writing nothing.
	ready func(context.Context, drift.Finding) (bool, error)
	// acted runs after the action's outcome is stored; its error is the
	// pass's.
	acted func(context.Context, drift.Finding, drift.Result) error
}

// watchClock is when the process made its first decision (as leader): the
// time from which it has watched without a gap.
type watchClock struct {
	mu    sync.Mutex
	since time.Time
}

// at returns the first decision's time, making now that time if there was
// none yet. A nil clock is always now.
func (w *watchClock) at(now time.Time) time.Time {
	if w == nil {
		return now
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() {
		w.since = now
	}
	return w.since
}

// subject is where a finding's record is filed: its namespace, its owner
// (the finding's subject, so that the record goes when the subject goes),
// what the record says about the subject's node, and the Event that
// announces a new record.
type subject struct {
	namespace string
	owner     metav1.OwnerReference
	// node is the node concerned (spec.node), if any.
	node string
	// nodeGoneSince is since when node has been seen missing, if it is.
	nodeGoneSince *time.Time
	// observeEvery is how often lastObserved is refreshed (0: a minute).
	observeEvery time.Duration
	// observed builds the Event recorded when the record is created; nil
	// records EventFindingObserved with the finding's message.
	observed func(drift.Finding) (reason, typ, msg string)
}

// recordName is the Finding object's name: check and id, both stable.
func recordName(f drift.Finding) string {
	return findingrecord.Name(f.Check, f.ID)
}

// sync creates or updates one record, acts through p when the decision
// says so, and returns when to look again.
func (rs *records) sync(ctx context.Context, p path, subj subject, f drift.Finding, rec *v1alpha1.Finding, now time.Time) (time.Duration, error) {
	log := rs.Log.WithValues("finding", f.ID, "check", f.Check, strings.ToLower(subj.owner.Kind), drift.Qualified(f.Namespace, f.Object.Name), "volume", f.Volume)
	rec, wait, err := rs.current(ctx, log, f, rec, now)
	if err != nil || wait > 0 {
		return wait, err
	}
	if rec == nil {
		if rec, now, err = rs.open(ctx, log, subj, f, now); err != nil {
			return 0, err
		}
	}
	st := rs.step(p, subj, f, rec, now)
	if p.told != nil {
		p.told(ctx, f)
	}
	rs.settle(log, p, f, &st, now)
	if !st.Act {
		return st.RequeueAfter, rs.writeStatus(ctx, rec, st.Status)
	}
	return rs.tryAct(ctx, log, p, f, rec, st, now)
}

// open creates f's record and announces it; it returns the record and the
// pass's time, moved to the record's creation if that came later.
func (rs *records) open(ctx context.Context, log logr.Logger, subj subject, f drift.Finding, now time.Time) (*v1alpha1.Finding, time.Time, error) {
	rec, err := rs.create(ctx, subj, f)
	if err != nil {
		return nil, now, err
	}
	// The server stamped the creation after this pass read its clock,
	// possibly in the next second: no stored time may predate it, or the
	// next reader clamps it (trusted) and the first sight moves.
	if created := rec.CreationTimestamp.Time; now.Before(created) {
		now = created
	}
	reason, typ, msg := subj.announce(f)
	rs.event(ctx, f, reason, typ, msg)
	log.Info("finding observed", "severity", f.Severity, "action", f.Action.Type, "safe", f.Action.Safe, "blockedBy", f.Action.BlockedBy)
	return rec, now, nil
}

// step decides the record's next state and counts a finding that became
// blocked.
func (rs *records) step(p path, subj subject, f drift.Finding, rec *v1alpha1.Finding, now time.Time) step {
	grace := rs.Config.Grace(f.Check)
	if p.grace != nil {
		grace = p.grace(f)
	}
	st := decide(stepInput{
		Finding: f, Record: rec, Now: now, Grace: grace, DryRun: rs.Config.DryRun,
		Backoff:       rs.backoff(),
		ObserveEvery:  subj.observeEvery,
		WatchingSince: rs.watching.at(now),
	})
	if subj.nodeGoneSince != nil {
		st.Status.NodeGoneSince = mt(trusted(rec, &metav1.Time{Time: *subj.nodeGoneSince}, now))
	}
	if st.Status.Phase == v1alpha1.PhaseBlocked && rec.Status.Reason != st.Status.Reason {
		metrics.Blocked.WithLabelValues(f.Check, st.Status.Reason).Inc()
	}
	return st
}

// settle holds a safe finding that the path's settle says has not settled
// yet: it is Waiting, and looked at again once it may have.
func (rs *records) settle(log logr.Logger, p path, f drift.Finding, st *step, now time.Time) {
	if p.settle == nil || !f.Action.Safe || rs.Config.DryRun {
		return
	}
	wait := p.settle(f, now)
	if wait <= 0 {
		return
	}
	log.Info("finding seen; waiting for it to settle", "wait", wait.String())
	if st.Act {
		st.Status.Phase, st.Act = v1alpha1.PhaseWaiting, false
	}
	st.RequeueAfter = max(wait, st.RequeueAfter)
}

// tryAct acts on a finding the step decided to act on, unless another
// attempt holds its claim, the path is not ready, or the budget is spent.
func (rs *records) tryAct(ctx context.Context, log logr.Logger, p path, f drift.Finding, rec *v1alpha1.Finding, st step, now time.Time) (time.Duration, error) {
	if wait := claimInFlight(rec, now, rs.Config.ActionTimeout.Duration); wait > 0 {
		// Another attempt claimed this record and has not stored its
		// outcome, and may still be running: never a second one alongside
		// it. Once the action timeout has passed, the claim counts as dead
		// (it stays counted in the window).
		log.Info("the action is claimed by another attempt; waiting", "claim", rec.Status.Claim, "wait", wait.String())
		return wait, nil
	}
	if p.ready != nil {
		if ok, err := p.ready(ctx, f); err != nil || !ok {
			return 0, err
		}
	}
	ok, err := rs.take(ctx, now, rec)
	if err != nil {
		return 0, err
	}
	if !ok {
		rs.overBudget(ctx, log, f, rec, &st)
		return st.RequeueAfter, rs.writeStatus(ctx, rec, st.Status)
	}
	res, requeue, err := rs.act(ctx, log, p.apply, f, rec, st.Status, now)
	if err != nil || p.acted == nil {
		return requeue, err
	}
	return requeue, p.acted(ctx, f, res)
}

// current returns the record that stands for this run of the condition:
// nil when there is none or when the stored one was retired (finished, or
// its times are no evidence), and how long to wait when a finished record
// is still cooling down.
func (rs *records) current(ctx context.Context, log logr.Logger, f drift.Finding, rec *v1alpha1.Finding, now time.Time) (*v1alpha1.Finding, time.Duration, error) {
	if rec != nil && finished(rec) {
		if wait := rs.coolingDown(rec, now); wait > 0 {
			// Acted on recently: the record is what the blast-radius
			// window counts after a restart, and the condition may simply
			// not have converged yet (a VolumeAttachment detaches after
			// its pods go). Look again once the action leaves the window.
			return rec, wait, nil
		}
		// The condition is back after it was resolved: a new run, with a
		// new record whose server-set creationTimestamp anchors its clock
		// (the old record's creation cannot vouch for times in this run).
		return nil, 0, rs.retire(ctx, rec)
	}
	if rec != nil && rec.Status.Phase != v1alpha1.PhaseResolved {
		if why := distrust(rec, now); why != "" {
			// A record whose times are no evidence counts as new: it is
			// replaced, so its clocks start again from a record only the
			// controller wrote.
			log.Info("stored record is no evidence; replacing it", "record", rec.Name, "why", why)
			rs.event(ctx, f, EventRecordDistrusted, corev1.EventTypeWarning,
				fmt.Sprintf("record %s/%s: %s; it is replaced and its clocks start again now", rec.Namespace, rec.Name, why))
			return nil, 0, rs.retire(ctx, rec)
		}
	}
	return rec, 0, nil
}

// announce is the Event that tells of a new record.
func (s subject) announce(f drift.Finding) (reason, typ, msg string) {
	if s.observed != nil {
		return s.observed(f)
	}
	return EventFindingObserved, corev1.EventTypeNormal, f.Message
}

// overBudget turns a decision to act into Blocked(BlastRadiusExceeded) and
// tells once per record.
func (rs *records) overBudget(ctx context.Context, log logr.Logger, f drift.Finding, rec *v1alpha1.Finding, st *step) {
	st.Status.Phase, st.Status.Reason = v1alpha1.PhaseBlocked, ReasonBlastRadius
	st.Status.Message = rs.blastRadiusMessage()
	st.Act = false
	// Look again now and then: an operator's reset lets it act.
	st.RequeueAfter = breakerRecheck
	if rec.Status.Reason != ReasonBlastRadius {
		metrics.Blocked.WithLabelValues(f.Check, ReasonBlastRadius).Inc()
		rs.event(ctx, f, EventBlastRadius, corev1.EventTypeWarning, st.Status.Message)
		log.Info("blast-radius limit reached; not acting", "maxActions", rs.Config.BlastRadius.MaxActions)
	}
}

func (rs *records) blastRadiusMessage() string {
	return fmt.Sprintf("acting stopped: more than %d actions within %s; investigate, then run `tether controller reset-breaker -n %s`", rs.Config.BlastRadius.MaxActions, rs.Config.BlastRadius.Interval.Duration, rs.Namespace)
}

func (rs *records) backoff() func(int32) time.Duration {
	return backoff(rs.Config.Backoff.Base.Duration, rs.Config.Backoff.Max.Duration)
}

// coolingDown returns how long a finished record whose action changed
// something (Applied or Pending) still lies within the blast-radius window,
// or 0.
func (rs *records) coolingDown(rec *v1alpha1.Finding, now time.Time) time.Duration {
	la := rec.Status.LastAttempt
	if la == nil || rs.Budget == nil || !actedOn(rec) {
		return 0
	}
	if left := la.Add(rs.Budget.interval).Sub(now); left > 0 {
		return left
	}
	return 0
}

// finished reports whether a record belongs to a run of the condition that
// has ended (only a resolved record carries resolvedAt).
func finished(rec *v1alpha1.Finding) bool {
	return rec.Status.Phase == v1alpha1.PhaseResolved || rec.Status.ResolvedAt != nil
}

// retire deletes a finished record, on the condition that it is still the
// one the cache showed (UID precondition).
func (rs *records) retire(ctx context.Context, rec *v1alpha1.Finding) error {
	uid := rec.UID
	err := rs.Live.Delete(ctx, rec, client.Preconditions{UID: &uid})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Already gone or replaced: the cache is behind; decide again once
		// it catches up.
		return fmt.Errorf("resolved finding %s changed since the cache saw it: %w", rec.Name, err)
	default:
		return err
	}
}

// runAction carries out f's action, reserved in the budget at taken, within
// the action timeout, and counts it. An action that changed nothing (the
// live re-check refused, the VMI migrates, RBAC forbade it) gives its
// budget back.
func (rs *records) runAction(ctx context.Context, log logr.Logger, apply applyFunc, f drift.Finding, rec *v1alpha1.Finding, taken time.Time) drift.Result {
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
func (rs *records) act(ctx context.Context, log logr.Logger, apply applyFunc, f drift.Finding, rec *v1alpha1.Finding, st v1alpha1.FindingStatus, taken time.Time) (drift.Result, time.Duration, error) {
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
	if rs.afterClaim != nil {
		rs.afterClaim(f)
	}
	if st.ActAfter != nil {
		late := rs.Now().Sub(st.ActAfter.Time)
		metrics.GraceToActionSeconds.Observe(late.Seconds())
		log.Info("acting", "action", f.Action.Type, "afterGrace", late.String())
	}
	res := rs.runAction(ctx, log, apply, f, rec, taken)
	if rs.afterAction != nil {
		rs.afterAction(f)
	}
	st, requeue := rs.outcome(st, res)
	return res, requeue, rs.writeStatus(ctx, rec, st)
}

// outcome is the record's status after an action, and when to look again.
func (rs *records) outcome(st v1alpha1.FindingStatus, res drift.Result) (v1alpha1.FindingStatus, time.Duration) {
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

// resolveGone resolves every open record of this controller's scope whose
// finding is not current (see scopeID).
func (rs *records) resolveGone(ctx context.Context, current map[string]drift.Finding, recs map[string]*v1alpha1.Finding, now time.Time) error {
	var errs []error
	for id, rec := range recs {
		if ofOtherScope(rec, rs.scope()) {
			continue
		}
		if _, open := current[id]; !open && rec.Status.Phase != v1alpha1.PhaseResolved {
			errs = append(errs, rs.resolve(ctx, rec, now, "the condition no longer holds"))
		}
	}
	return errors.Join(errs...)
}

func (rs *records) resolve(ctx context.Context, rec *v1alpha1.Finding, now time.Time, why string) error {
	st := *rec.Status.DeepCopy()
	reason := "ConditionGone"
	if rec.Status.Phase == v1alpha1.PhaseActing && rec.Status.LastAttempt != nil {
		// An action was claimed and its outcome never stored (the process
		// stopped), or it was pending: it may be what resolved the
		// condition, and it keeps counting in the blast-radius window.
		reason = ReasonResolvedAfterAction
		why += " after an action whose outcome was not recorded"
	}
	st.Phase, st.Reason, st.Message, st.ResolvedAt = v1alpha1.PhaseResolved, reason, why, mt(now)
	return rs.writeStatus(ctx, rec, st)
}

func (rs *records) create(ctx context.Context, subj subject, f drift.Finding) (*v1alpha1.Finding, error) {
	rec := &v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: subj.namespace,
			Name:      recordName(f),
			Labels: map[string]string{
				v1alpha1.LabelCheck: f.Check, v1alpha1.LabelSubjectUID: string(subj.owner.UID), v1alpha1.LabelFindingID: f.ID,
				v1alpha1.LabelScope: rs.scope(),
			},
			OwnerReferences: []metav1.OwnerReference{subj.owner},
		},
		Spec: v1alpha1.FindingSpec{
			ID: f.ID, Check: f.Check, Volume: f.Volume, Node: subj.node,
			Subject: v1alpha1.SubjectRef{APIVersion: subj.owner.APIVersion, Kind: f.Object.Kind, Name: f.Object.Name, UID: f.Object.UID},
		},
	}
	if err := rs.Live.Create(ctx, rec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Usually the cache is behind our own write: decide again once
			// it catches up. But a record whose labels were edited is never
			// found by them again: put the labels back.
			return nil, rs.relabel(ctx, rec, err)
		}
		return nil, err
	}
	return rec, nil
}

// relabel reads the existing record named like want, live, and restores
// the labels the controller finds its records by, if they were changed. It
// returns an error either way: the caller decides again on the next pass.
func (rs *records) relabel(ctx context.Context, want *v1alpha1.Finding, exists error) error {
	var live v1alpha1.Finding
	if err := rs.Live.Get(ctx, client.ObjectKeyFromObject(want), &live); err != nil {
		return fmt.Errorf("finding %s exists but cannot be read (%v): %w", want.Name, err, exists)
	}
	if live.Spec.ID != want.Spec.ID || live.Spec.Check != want.Spec.Check {
		return fmt.Errorf("finding %s exists with another id or check (%s/%s): delete it: %w", want.Name, live.Spec.Check, live.Spec.ID, exists)
	}
	if equalLabels(live.Labels, want.Labels) {
		return fmt.Errorf("finding %s exists but is not in the cache yet: %w", want.Name, exists)
	}
	upd := live.DeepCopy()
	if upd.Labels == nil {
		upd.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		upd.Labels[k] = v
	}
	if err := rs.Live.Update(ctx, upd); err != nil {
		return fmt.Errorf("restoring the labels of finding %s (%v): %w", want.Name, err, exists)
	}
	rs.Log.Info("restored the labels of a finding record", "finding", want.Spec.ID, "record", want.Namespace+"/"+want.Name)
	return fmt.Errorf("finding %s had lost its labels; restored them: %w", want.Name, exists)
}

func equalLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// scope is this controller's scope id ("" when it has no configuration,
// in unit tests).
func (rs *records) scope() string {
	if rs.Config == nil {
		return ""
	}
	return scopeID(rs.Config.Scope)
}

// claim writes the Acting claim: always a write (never skipped as equal),
// with the record's resourceVersion as precondition.
func (rs *records) claim(ctx context.Context, rec *v1alpha1.Finding, st v1alpha1.FindingStatus) error {
	upd := rec.DeepCopy()
	upd.Status = st
	if err := rs.Live.Status().Update(ctx, upd); err != nil {
		return err
	}
	*rec = *upd
	return nil
}

// claimID names one attempt of this process: its identity, the attempt's
// time and a random part.
func (rs *records) claimID(at time.Time) string {
	return fmt.Sprintf("%s/%d/%s", rs.Identity, at.UnixNano(), rand.String(6))
}

// writeStatus stores st when it differs from what is stored (compared as
// stored: semantically). The update carries the record's resourceVersion,
// so a stale cache cannot overwrite a newer status (a conflict requeues the
// subject).
func (rs *records) writeStatus(ctx context.Context, rec *v1alpha1.Finding, st v1alpha1.FindingStatus) error {
	if equality.Semantic.DeepEqual(rec.Status, st) {
		return nil
	}
	upd := rec.DeepCopy()
	upd.Status = st
	if err := rs.Live.Status().Update(ctx, upd); err != nil {
		return err
	}
	*rec = *upd
	return nil
}

// event records an Event about f's object.
func (rs *records) event(ctx context.Context, f drift.Finding, reason, typ, msg string) {
	if rs.Recorder != nil {
		rs.Recorder.Event(ctx, f, reason, typ, msg)
	}
}
