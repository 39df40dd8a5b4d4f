package records

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/go-logr/logr"
	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/metrics"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keeper keeps the Finding records of every reconciler: it names, creates,
// relabels, retires and resolves them, steps their grace periods (step.go),
// holds the one blast-radius budget (budget.go) and runs the actions.
//
// The reconcilers (hot-plug, storage, restart) only decide which subjects to
// look at and which findings are open; everything that happens to a record
// after that happens here, the same way for every check.
type Keeper struct {
	// Cache is the informer-backed reader: records and the budget seed are
	// read from it.
	Cache client.Reader
	// Live writes records (its field manager is the controller's, which
	// makes their times evidence) and reads one back when it must.
	Live   client.Client
	Config *config.Config
	Budget *Budget
	// Recorder records the Events; nil records none.
	Recorder *act.Recorder
	Now      func() time.Time
	Log      logr.Logger
	// Namespace is the controller's namespace: it holds the breaker record
	// (findingrecord.Breaker) that every process recording there honours.
	Namespace string
	// Identity names this process in its Acting claims.
	Identity string
	// AfterClaim and AfterAction, when set, run right after the Acting
	// claim is stored and right after the action returns (fault-injection
	// tests stop the process there).
	AfterClaim, AfterAction func(drift.Finding)
	// watching is when this process began deciding (nil: every stored time
	// predates the process).
	watching *watchClock
}

// New returns a keeper with a blast-radius budget of cfg's limits, whose
// watch begins at its first decision. Its other fields are to be set.
func New(cfg *config.Config) *Keeper {
	return &Keeper{
		Config:   cfg,
		Budget:   NewBudget(cfg.BlastRadius.MaxActions, cfg.BlastRadius.Interval.Duration),
		watching: &watchClock{},
	}
}

// WatchingSince makes at the time from which this process has watched, as
// if its first decision had been then (tests of a process that watched
// all along).
func (rs *Keeper) WatchingSince(at time.Time) {
	rs.watching = &watchClock{since: at}
}

// ApplyFunc carries out one finding's action through package act, which
// re-reads live state and re-checks before it writes.
type ApplyFunc func(context.Context, drift.Finding) drift.Result

// Path is what one reconciler brings to the sequence every record goes
// through (Sync): how it acts, and the hooks of a mode that decides more
// than the step does. The hooks are optional; without them a finding is
// recorded, announced, held and acted on as every check's is.
type Path struct {
	// Apply carries out the action.
	Apply ApplyFunc
	// Grace is a finding's grace period; nil: its check's configured one.
	Grace func(drift.Finding) time.Duration
	// Told runs on every pass once the step is decided, before anything is
	// acted on: the mode tells of the finding in Events of its own.
	Told func(context.Context, drift.Finding)
	// Settle runs on every pass of a safe finding (not in dry run) and
	// returns how long it must still wait before it may be acted on: the
	// finding is Waiting until then, whatever the step decided.
	Settle func(drift.Finding, time.Time) time.Duration
	// Ready runs right before the budget is taken and confirms that the
	// finding may be acted on now; false leaves it alone for this pass,
	// writing nothing.
	Ready func(context.Context, drift.Finding) (bool, error)
	// Acted runs after the action's outcome is stored; its error is the
	// pass's.
	Acted func(context.Context, drift.Finding, drift.Result) error
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

// Subject is where a finding's record is filed: its namespace, its owner
// (the finding's subject, so that the record goes when the subject goes),
// what the record says about the subject's node, and the Event that
// announces a new record.
type Subject struct {
	Namespace string
	Owner     metav1.OwnerReference
	// Node is the node concerned (spec.node), if any.
	Node string
	// NodeGoneSince is since when Node has been seen missing, if it is.
	NodeGoneSince *time.Time
	// ObserveEvery is how often lastObserved is refreshed (0: a minute).
	ObserveEvery time.Duration
	// Observed builds the Event recorded when the record is created; nil
	// records EventFindingObserved with the finding's message.
	Observed func(drift.Finding) (reason, typ, msg string)
	// Cluster, when set, is the tenant cluster the subject lives in: the
	// record is labelled with it (v1alpha1.LabelCluster) and carries no
	// owner reference (Owner only names the subject), so the loop that
	// writes it retires it when the subject goes (RetireFinished).
	Cluster string
}

// Sync creates or updates one record, acts through p when the decision
// says so, and returns when to look again.
func (rs *Keeper) Sync(ctx context.Context, p Path, subj Subject, f drift.Finding, rec *v1alpha1.Finding, now time.Time) (time.Duration, error) {
	log := rs.Log.WithValues("finding", f.ID, "check", f.Check, strings.ToLower(subj.Owner.Kind), drift.Qualified(f.Namespace, f.Object.Name), "volume", f.Volume)
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
	if p.Told != nil {
		p.Told(ctx, f)
	}
	rs.settle(log, p, f, &st, now)
	if !st.Act {
		return st.RequeueAfter, rs.writeStatus(ctx, rec, st.Status)
	}
	return rs.tryAct(ctx, log, p, f, rec, st, now)
}

// open creates f's record and announces it; it returns the record and the
// pass's time, moved to the record's creation if that came later.
func (rs *Keeper) open(ctx context.Context, log logr.Logger, subj Subject, f drift.Finding, now time.Time) (*v1alpha1.Finding, time.Time, error) {
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
	rs.Event(ctx, f, reason, typ, msg)
	log.Info("finding observed", "severity", f.Severity, "action", f.Action.Type, "safe", f.Action.Safe, "blockedBy", f.Action.BlockedBy)
	return rec, now, nil
}

// step decides the record's next state and counts a finding that became
// blocked.
func (rs *Keeper) step(p Path, subj Subject, f drift.Finding, rec *v1alpha1.Finding, now time.Time) step {
	grace := rs.Config.Grace(f.Check)
	if p.Grace != nil {
		grace = p.Grace(f)
	}
	st := decide(stepInput{
		Finding: f, Record: rec, Now: now, Grace: grace, DryRun: rs.Config.DryRun,
		Backoff:       rs.backoff(),
		ObserveEvery:  subj.ObserveEvery,
		WatchingSince: rs.watching.at(now),
	})
	if subj.NodeGoneSince != nil {
		st.Status.NodeGoneSince = mt(trusted(rec, &metav1.Time{Time: *subj.NodeGoneSince}, now))
	}
	if st.Status.Phase == v1alpha1.PhaseBlocked && rec.Status.Reason != st.Status.Reason {
		metrics.Blocked.WithLabelValues(f.Check, st.Status.Reason).Inc()
	}
	return st
}

// settle holds a safe finding that the path's settle says has not settled
// yet: it is Waiting, and looked at again once it may have.
func (rs *Keeper) settle(log logr.Logger, p Path, f drift.Finding, st *step, now time.Time) {
	if p.Settle == nil || !f.Action.Safe || rs.Config.DryRun {
		return
	}
	wait := p.Settle(f, now)
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
func (rs *Keeper) tryAct(ctx context.Context, log logr.Logger, p Path, f drift.Finding, rec *v1alpha1.Finding, st step, now time.Time) (time.Duration, error) {
	if wait := claimInFlight(rec, now, rs.Config.ActionTimeout.Duration); wait > 0 {
		// Another attempt claimed this record and has not stored its
		// outcome, and may still be running: never a second one alongside
		// it. Once the action timeout has passed, the claim counts as dead
		// (it stays counted in the window).
		log.Info("the action is claimed by another attempt; waiting", "claim", rec.Status.Claim, "wait", wait.String())
		return wait, nil
	}
	if p.Ready != nil {
		if ok, err := p.Ready(ctx, f); err != nil || !ok {
			return 0, err
		}
	}
	if g, err := findingrecord.Guard(ctx, rs.Cache, rs.Namespace); err != nil {
		return 0, err
	} else if g.Tripped {
		rs.guarded(ctx, log, f, rec, &st, g)
		return st.RequeueAfter, rs.writeStatus(ctx, rec, st.Status)
	}
	ok, wait, err := rs.take(ctx, now, rec)
	if err != nil {
		return 0, err
	}
	if !ok {
		if wait > 0 {
			rs.sharedBudget(ctx, log, f, rec, &st, now, wait)
		} else {
			rs.overBudget(ctx, log, f, rec, &st)
		}
		return st.RequeueAfter, rs.writeStatus(ctx, rec, st.Status)
	}
	res, requeue, err := rs.act(ctx, log, p.Apply, f, rec, st.Status, now)
	if err != nil || p.Acted == nil {
		return requeue, err
	}
	return requeue, p.Acted(ctx, f, res)
}

// announce is the Event that tells of a new record.
func (s Subject) announce(f drift.Finding) (reason, typ, msg string) {
	if s.Observed != nil {
		return s.Observed(f)
	}
	return EventFindingObserved, corev1.EventTypeNormal, f.Message
}

// overBudget turns a decision to act into Blocked(BlastRadiusExceeded) and
// tells once per record.
func (rs *Keeper) overBudget(ctx context.Context, log logr.Logger, f drift.Finding, rec *v1alpha1.Finding, st *step) {
	st.Status.Phase, st.Status.Reason = v1alpha1.PhaseBlocked, ReasonBlastRadius
	st.Status.Message = rs.blastRadiusMessage()
	st.Act = false
	// Look again now and then: an operator's reset lets it act.
	st.RequeueAfter = breakerRecheck
	if rec.Status.Reason != ReasonBlastRadius {
		metrics.Blocked.WithLabelValues(f.Check, ReasonBlastRadius).Inc()
		rs.Event(ctx, f, EventBlastRadius, corev1.EventTypeWarning, st.Status.Message)
		log.Info("blast-radius limit reached; not acting", "maxActions", rs.Config.BlastRadius.MaxActions)
	}
}

// guarded turns a decision to act into Blocked(AnomalyGuard) while the
// anomaly guard is tripped, and tells once per record.
func (rs *Keeper) guarded(ctx context.Context, log logr.Logger, f drift.Finding, rec *v1alpha1.Finding, st *step, g findingrecord.GuardState) {
	st.Status.Phase, st.Status.Reason = v1alpha1.PhaseBlocked, ReasonAnomalyGuard
	st.Status.Message = g.Message
	st.Act = false
	st.RequeueAfter = breakerRecheck
	if rec.Status.Reason != ReasonAnomalyGuard {
		metrics.Blocked.WithLabelValues(f.Check, ReasonAnomalyGuard).Inc()
		rs.Event(ctx, f, EventAnomalyGuard, corev1.EventTypeWarning, g.Message)
		log.Info("the anomaly guard is tripped; not acting", "guard", rs.Namespace+"/"+findingrecord.GuardName)
	}
}

// sharedBudget turns a decision to act into Blocked(BlastRadiusShared):
// supervised actions fill the window, and the finding waits until the
// first of them leaves it; the breaker does not trip.
func (rs *Keeper) sharedBudget(ctx context.Context, log logr.Logger, f drift.Finding, rec *v1alpha1.Finding, st *step, now time.Time, wait time.Duration) {
	st.Status.Phase, st.Status.Reason = v1alpha1.PhaseBlocked, ReasonBlastRadiusShared
	st.Status.Message = fmt.Sprintf("the blast-radius window (%d actions per %s) is full with actions of `tether fix --apply`, which count in it but never trip the breaker: acting resumes at about %s, when the first of them leaves the window",
		rs.Config.BlastRadius.MaxActions, rs.Config.BlastRadius.Interval.Duration, now.Add(wait).UTC().Format(time.RFC3339))
	st.Act = false
	st.RequeueAfter = wait
	if rec.Status.Reason != ReasonBlastRadiusShared {
		metrics.Blocked.WithLabelValues(f.Check, ReasonBlastRadiusShared).Inc()
		log.Info("the blast-radius window is full with supervised actions; waiting", "wait", wait.String())
	}
}

func (rs *Keeper) blastRadiusMessage() string {
	return fmt.Sprintf("acting stopped: more than %d actions within %s; investigate, then run `tether controller reset-breaker -n %s`", rs.Config.BlastRadius.MaxActions, rs.Config.BlastRadius.Interval.Duration, rs.Namespace)
}

func (rs *Keeper) backoff() func(int32) time.Duration {
	return backoff(rs.Config.Backoff.Base.Duration, rs.Config.Backoff.Max.Duration)
}
