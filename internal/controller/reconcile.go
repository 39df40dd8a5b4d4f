package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/act"
	"github.com/tether-dev/tether/internal/check"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/observe"
	"github.com/tether-dev/tether/internal/snapshot"
)

// Event reasons the controller records besides the action outcomes of
// package act (contract: operators alert on them).
const (
	EventFindingObserved = "TetherFindingObserved"
	EventBlastRadius     = "TetherBlastRadiusExceeded"
	// EventRecordDistrusted: a Finding record's stored times were not used
	// (written by another field manager, or in the future); its clocks
	// start again.
	EventRecordDistrusted = "TetherRecordDistrusted"
)

// Reconciler keeps the Finding records of one VMI in step with what the
// checks conclude from the cache, and acts on safe findings whose grace
// period has passed. It is level-based: it decides from current state only.
type Reconciler struct {
	// Cache is the informer-backed client: reads are free.
	Cache client.Client
	// Executor acts with live reads; it never uses the cache.
	Executor *act.Executor
	Config   *config.Config
	Policy   check.Policy
	Budget   *budget
	Now      func() time.Time
	Log      logr.Logger
	// Tenants are the watched tenant clusters (their evidence).
	Tenants []*tenantWatch
	// watching is when this process began deciding; shared by the copies
	// of the reconciler (nil: every stored time predates the process).
	watching *watchClock
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

// Reconcile handles one VMI, named by req.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t0 := time.Now()
	defer func() { metrics.ReconcileSeconds.Observe(time.Since(t0).Seconds()) }()
	now := r.Now()

	snap, err := r.snapshotFor(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(snap.VMIs) == 0 {
		// A deleted VMI's records go with it (owner reference, garbage
		// collector); nothing to decide.
		return ctrl.Result{}, nil
	}
	vmi := snap.VMIs[0]
	// The snapshot holds only the VMI, its VM, the gates and the tenants:
	// checks that need more (claims, pods) would report falsely here.
	policy := r.Policy
	policy.Checks = config.ControllerChecks()
	current := map[string]check.Finding{}
	for _, f := range check.Run(snap, policy, now) {
		if f.Object.UID == vmi.UID && r.Config.Enabled(f.Check) {
			current[f.ID] = f
		}
	}
	records, err := r.records(ctx, &vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	var requeue time.Duration
	subj := vmiSubject(&vmi)
	for id, f := range current {
		after, err := r.syncFinding(ctx, subj, f, records[id], now)
		if err != nil {
			return ctrl.Result{}, err
		}
		if after > 0 && (requeue == 0 || after < requeue) {
			requeue = after
		}
	}
	for id, rec := range records {
		if _, open := current[id]; !open && rec.Status.Phase != v1alpha1.PhaseResolved {
			if err := r.resolve(ctx, rec, now, "the condition no longer holds"); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// snapshotFor builds the decision input for one VMI from the caches with
// observe.VMI, the gatherer the live re-check reads with: the VMI, its
// owning VM, the KubeVirt feature gates and, from the tenant watches, the
// tenants' attachments on the node named after the VMI. A VMI that is gone
// yields an empty snapshot.
func (r *Reconciler) snapshotFor(ctx context.Context, key client.ObjectKey) (*snapshot.Snapshot, error) {
	tenants := func(vmi *kubevirtv1.VirtualMachineInstance) []snapshot.Tenant {
		var out []snapshot.Tenant
		for _, tw := range r.Tenants {
			if tw.applies(vmi.Namespace) {
				out = append(out, tw.evidence(vmi))
			}
		}
		return out
	}
	return observe.VMI(ctx, r.Cache, key.Namespace, key.Name, observe.Tenants{Of: tenants})
}

// records returns the VMI's Finding objects by finding id.
func (r *Reconciler) records(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (map[string]*v1alpha1.Finding, error) {
	var list v1alpha1.FindingList
	if err := r.Cache.List(ctx, &list, client.InNamespace(vmi.Namespace), client.MatchingLabels{v1alpha1.LabelSubjectUID: string(vmi.UID)}); err != nil {
		return nil, err
	}
	out := make(map[string]*v1alpha1.Finding, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Spec.ID] = &list.Items[i]
	}
	return out, nil
}

// recordName is the Finding object's name: check and id, both stable.
func recordName(f check.Finding) string {
	return strings.ToLower(f.Check) + "-" + f.ID
}

// subject is where a finding's record is filed: its namespace, its owner
// (the finding's subject, so that the record goes when the subject goes),
// and what the record says about the subject's node.
type subject struct {
	namespace string
	owner     metav1.OwnerReference
	// node is the node concerned (spec.node), if any.
	node string
	// nodeGoneSince is since when node has been seen missing, if it is.
	nodeGoneSince *time.Time
	// evidence is what the live re-check of an action needs from the pass.
	evidence act.Evidence
	// observeEvery is how often lastObserved is refreshed (0: a minute).
	observeEvery time.Duration
}

// vmiSubject files a hot-plug finding under its VMI.
func vmiSubject(vmi *kubevirtv1.VirtualMachineInstance) subject {
	return subject{namespace: vmi.Namespace, owner: metav1.OwnerReference{
		APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID,
	}}
}

// syncFinding creates or updates one record, acts when the decision says so,
// and returns when to look again.
func (r *Reconciler) syncFinding(ctx context.Context, subj subject, f check.Finding, rec *v1alpha1.Finding, now time.Time) (time.Duration, error) {
	log := r.Log.WithValues("finding", f.ID, "check", f.Check, strings.ToLower(subj.owner.Kind), qualified(f.Namespace, f.Object.Name), "volume", f.Volume)
	if rec != nil && finished(rec) {
		if wait := r.coolingDown(rec, now); wait > 0 {
			// Acted on recently: the record is what the blast-radius
			// window counts after a restart, and the condition may simply
			// not have converged yet (a VolumeAttachment detaches after
			// its pods go). Look again once the action leaves the window.
			return wait, nil
		}
		// The condition is back after it was resolved: a new run, with a
		// new record whose server-set creationTimestamp anchors its clock
		// (the old record's creation cannot vouch for times in this run).
		if err := r.retire(ctx, rec); err != nil {
			return 0, err
		}
		rec = nil
	}
	if rec != nil && rec.Status.Phase != v1alpha1.PhaseResolved {
		if why := distrust(rec, now); why != "" {
			// A record whose times are no evidence counts as new: it is
			// replaced, so its clocks start again from a record only the
			// controller wrote.
			log.Info("stored record is no evidence; replacing it", "record", rec.Name, "why", why)
			r.event(ctx, f, EventRecordDistrusted, corev1.EventTypeWarning,
				fmt.Sprintf("record %s/%s: %s; it is replaced and its clocks start again now", rec.Namespace, rec.Name, why))
			if err := r.retire(ctx, rec); err != nil {
				return 0, err
			}
			rec = nil
		}
	}
	if rec == nil {
		created, err := r.create(ctx, subj, f)
		if err != nil {
			return 0, err
		}
		rec = created
		if f.Check == check.MultiAttachConflict {
			// Who holds the volume, within the namespace-privacy rule.
			r.event(ctx, f, EventMultiAttach, corev1.EventTypeWarning, multiAttachEvent(f))
		} else {
			r.event(ctx, f, EventFindingObserved, corev1.EventTypeNormal, f.Message)
		}
		log.Info("finding observed", "severity", f.Severity, "action", f.Action.Type, "safe", f.Action.Safe, "blockedBy", f.Action.BlockedBy)
	}
	st := decide(stepInput{
		Finding: f, Record: rec, Now: now, Grace: r.Config.Grace(f.Check), DryRun: r.Config.DryRun,
		Backoff:       backoff(r.Config.Backoff.Base.Duration, r.Config.Backoff.Max.Duration),
		ObserveEvery:  subj.observeEvery,
		WatchingSince: r.watching.at(now),
	})
	if subj.nodeGoneSince != nil {
		st.Status.NodeGoneSince = mt(trusted(rec, &metav1.Time{Time: *subj.nodeGoneSince}, now))
	}
	if st.Status.Phase == v1alpha1.PhaseBlocked && rec.Status.Reason != st.Status.Reason {
		metrics.Blocked.WithLabelValues(f.Check, st.Status.Reason).Inc()
	}
	if st.Act {
		if err := r.seedBudget(ctx, now); err != nil {
			return 0, err
		}
	}
	if st.Act && !r.Budget.take(now) {
		st.Status.Phase, st.Status.Reason = v1alpha1.PhaseBlocked, ReasonBlastRadius
		st.Status.Message = fmt.Sprintf("acting stopped: more than %d actions within %s; investigate, then restart the controller", r.Config.BlastRadius.MaxActions, r.Config.BlastRadius.Interval.Duration)
		st.Act = false
		if rec.Status.Reason != ReasonBlastRadius {
			metrics.Blocked.WithLabelValues(f.Check, ReasonBlastRadius).Inc()
			r.event(ctx, f, EventBlastRadius, corev1.EventTypeWarning, st.Status.Message)
			log.Info("blast-radius limit reached; not acting", "maxActions", r.Config.BlastRadius.MaxActions)
		}
	}
	if !st.Act {
		return st.RequeueAfter, r.writeStatus(ctx, rec, st.Status)
	}
	return r.act(ctx, log, f, subj.evidence, rec, st.Status, now)
}

// coolingDown returns how long a finished record whose action changed
// something (Applied or Pending) still lies within the blast-radius window,
// or 0.
func (r *Reconciler) coolingDown(rec *v1alpha1.Finding, now time.Time) time.Duration {
	la := rec.Status.LastAttempt
	if la == nil || r.Budget == nil || (rec.Status.Reason != string(act.Applied) && rec.Status.Reason != string(act.Pending)) {
		return 0
	}
	if left := la.Add(r.Budget.interval).Sub(now); left > 0 {
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
func (r *Reconciler) retire(ctx context.Context, rec *v1alpha1.Finding) error {
	uid := rec.UID
	err := r.Executor.Client.Delete(ctx, rec, client.Preconditions{UID: &uid})
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

// seedBudget fills the blast-radius window, once, from the actions that the
// Finding records show within it, so that a restart or a change of leader
// does not reset the window.
func (r *Reconciler) seedBudget(ctx context.Context, now time.Time) error {
	if r.Budget.isSeeded() {
		return nil
	}
	var list v1alpha1.FindingList
	if err := r.Cache.List(ctx, &list); err != nil {
		return fmt.Errorf("reading the Finding records for the action budget: %w", err)
	}
	r.Budget.seed(recentActions(list.Items, now, r.Budget.interval))
	return nil
}

// recentActions returns the times of the actions that changed something
// (outcome Applied or Pending) within interval before now.
func recentActions(recs []v1alpha1.Finding, now time.Time, interval time.Duration) []time.Time {
	var out []time.Time
	for _, rec := range recs {
		la := rec.Status.LastAttempt
		if la == nil || now.Sub(la.Time) >= interval {
			continue
		}
		if rec.Status.Reason == string(act.Applied) || rec.Status.Reason == string(act.Pending) {
			out = append(out, la.Time)
		}
	}
	return out
}

// act records Acting, runs the action through the live-checking executor and
// stores the outcome.
func (r *Reconciler) act(ctx context.Context, log logr.Logger, f check.Finding, ev act.Evidence, rec *v1alpha1.Finding, st v1alpha1.FindingStatus, taken time.Time) (time.Duration, error) {
	if err := r.writeStatus(ctx, rec, st); err != nil {
		r.Budget.refund(taken) // nothing was done
		return 0, err          // conflict or error: requeue and decide again
	}
	if st.ActAfter != nil {
		late := r.Now().Sub(st.ActAfter.Time)
		metrics.GraceToActionSeconds.Observe(late.Seconds())
		log.Info("acting", "action", f.Action.Type, "afterGrace", late.String())
	}
	actx, cancel := context.WithTimeout(ctx, r.Config.ActionTimeout.Duration)
	started := time.Now()
	res := r.Executor.Apply(actx, f, ev)
	cancel()
	log = log.WithValues("took", time.Since(started).Round(time.Millisecond).String())
	metrics.Actions.WithLabelValues(f.Check, string(f.Action.Type), string(res.Outcome)).Inc()
	log.Info("action finished", "action", f.Action.Type, "result", res.Outcome, "message", res.Message)
	now := r.Now()
	st.LastAttempt = mt(now)
	st.Message = res.Message
	st.Reason = string(res.Outcome)
	var requeue time.Duration
	switch res.Outcome {
	case act.Applied:
		st.Phase, st.ResolvedAt, st.Attempts = v1alpha1.PhaseResolved, mt(now), 0
	case act.Pending:
		st.Phase, requeue = v1alpha1.PhaseActing, 10*time.Second
	default:
		st.Attempts++
		st.Phase = v1alpha1.PhaseFailed
		switch {
		case res.Outcome == act.Refused || res.Outcome == act.Migrating:
			// The live state says not safe now, and nothing changed: the
			// action gives its budget back, and the grace period starts
			// again once the action is safe again.
			st.Phase = v1alpha1.PhaseBlocked
			st.SafeSince, st.ActAfter = nil, nil
			r.Budget.refund(taken)
		case apierrors.IsForbidden(res.Err):
			// RBAC refused the dry run or the write: nothing changed, so
			// the budget is given back (a missing role must not trip the
			// blast-radius limit for every other check).
			st.Reason = ReasonForbidden
			r.Budget.refund(taken)
		}
		requeue = backoff(r.Config.Backoff.Base.Duration, r.Config.Backoff.Max.Duration)(st.Attempts)
	}
	return requeue, r.writeStatus(ctx, rec, st)
}

func (r *Reconciler) resolve(ctx context.Context, rec *v1alpha1.Finding, now time.Time, why string) error {
	st := *rec.Status.DeepCopy()
	st.Phase, st.Reason, st.Message, st.ResolvedAt = v1alpha1.PhaseResolved, "ConditionGone", why, mt(now)
	return r.writeStatus(ctx, rec, st)
}

func (r *Reconciler) create(ctx context.Context, subj subject, f check.Finding) (*v1alpha1.Finding, error) {
	rec := &v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: subj.namespace,
			Name:      recordName(f),
			Labels: map[string]string{
				v1alpha1.LabelCheck: f.Check, v1alpha1.LabelSubjectUID: string(subj.owner.UID), v1alpha1.LabelFindingID: f.ID,
			},
			OwnerReferences: []metav1.OwnerReference{subj.owner},
		},
		Spec: v1alpha1.FindingSpec{
			ID: f.ID, Check: f.Check, Volume: f.Volume, Node: subj.node,
			Subject: v1alpha1.SubjectRef{APIVersion: subj.owner.APIVersion, Kind: f.Object.Kind, Name: f.Object.Name, UID: f.Object.UID},
		},
	}
	if err := r.Executor.Client.Create(ctx, rec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Usually the cache is behind our own write: decide again once
			// it catches up. But a record whose labels were edited is never
			// found by them again: put the labels back.
			return nil, r.relabel(ctx, rec, err)
		}
		return nil, err
	}
	return rec, nil
}

// relabel reads the existing record named like want, live, and restores
// the labels the controller finds its records by, if they were changed. It
// returns an error either way: the caller decides again on the next pass.
func (r *Reconciler) relabel(ctx context.Context, want *v1alpha1.Finding, exists error) error {
	var live v1alpha1.Finding
	if err := r.Executor.Client.Get(ctx, client.ObjectKeyFromObject(want), &live); err != nil {
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
	if err := r.Executor.Client.Update(ctx, upd); err != nil {
		return fmt.Errorf("restoring the labels of finding %s (%v): %w", want.Name, err, exists)
	}
	r.Log.Info("restored the labels of a finding record", "finding", want.Spec.ID, "record", want.Namespace+"/"+want.Name)
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

// writeStatus stores st when it differs from what is stored. The update
// carries the record's resourceVersion, so a stale cache cannot overwrite a
// newer status (a conflict requeues the subject).
func (r *Reconciler) writeStatus(ctx context.Context, rec *v1alpha1.Finding, st v1alpha1.FindingStatus) error {
	if statusEqual(rec.Status, st) {
		return nil
	}
	upd := rec.DeepCopy()
	upd.Status = st
	if err := r.Executor.Client.Status().Update(ctx, upd); err != nil {
		return err
	}
	*rec = *upd
	return nil
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func (r *Reconciler) event(ctx context.Context, f check.Finding, reason, typ, msg string) {
	if r.Executor.Recorder != nil {
		r.Executor.Recorder.Event(ctx, f, reason, typ, msg)
	}
}
