package records

import (
	"context"
	"errors"
	"fmt"
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
)

// recordName is the Finding object's name: check and id, both stable.
func recordName(f drift.Finding) string {
	return findingrecord.Name(f.Check, f.ID)
}

// current returns the record that stands for this run of the condition:
// nil when there is none or when the stored one was retired (finished, or
// its times are no evidence), and how long to wait when a finished record
// is still cooling down.
func (rs *Keeper) current(ctx context.Context, log logr.Logger, f drift.Finding, rec *v1alpha1.Finding, now time.Time) (*v1alpha1.Finding, time.Duration, error) {
	if rec != nil && findingrecord.Finished(rec) {
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
		return nil, 0, rs.Retire(ctx, rec)
	}
	if rec != nil && rec.Status.Phase != v1alpha1.PhaseResolved {
		if why := distrust(rec, now); why != "" {
			// A record whose times are no evidence counts as new: it is
			// replaced, so its clocks start again from a record only the
			// controller wrote.
			log.Info("stored record is no evidence; replacing it", "record", rec.Name, "why", why)
			rs.Event(ctx, f, EventRecordDistrusted, corev1.EventTypeWarning,
				fmt.Sprintf("record %s/%s: %s; it is replaced and its clocks start again now", rec.Namespace, rec.Name, why))
			return nil, 0, rs.Retire(ctx, rec)
		}
	}
	return rec, 0, nil
}

// coolingDown returns how long a finished record whose action changed
// something (Applied or Pending) still lies within the blast-radius window,
// or 0.
func (rs *Keeper) coolingDown(rec *v1alpha1.Finding, now time.Time) time.Duration {
	la := rec.Status.LastAttempt
	if la == nil || rs.Budget == nil || !actedOn(rec) {
		return 0
	}
	if left := la.Add(rs.Budget.limits.Interval).Sub(now); left > 0 {
		return left
	}
	return 0
}

// Retire deletes a finished record, on the condition that it is still the
// one the cache showed (UID precondition).
func (rs *Keeper) Retire(ctx context.Context, rec *v1alpha1.Finding) error {
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

// ResolveGone resolves every open record of this controller's scope whose
// finding is not current (see scopeID).
func (rs *Keeper) ResolveGone(ctx context.Context, current map[string]drift.Finding, recs map[string]*v1alpha1.Finding, now time.Time) error {
	var errs []error
	for id, rec := range recs {
		if findingrecord.OfOtherScope(rec, rs.scope()) {
			continue
		}
		if _, open := current[id]; !open && rec.Status.Phase != v1alpha1.PhaseResolved {
			errs = append(errs, rs.resolve(ctx, rec, now, "the condition no longer holds"))
		}
	}
	return errors.Join(errs...)
}

// RetireFinished deletes the finished records of recs whose action no
// longer counts in the blast-radius window: the records of a subject that
// is gone and owns none of them (Subject.Cluster).
func (rs *Keeper) RetireFinished(ctx context.Context, recs map[string]*v1alpha1.Finding, now time.Time) error {
	var errs []error
	for _, rec := range recs {
		if findingrecord.OfOtherScope(rec, rs.scope()) || !findingrecord.Finished(rec) || rs.coolingDown(rec, now) > 0 {
			continue
		}
		errs = append(errs, rs.Retire(ctx, rec))
	}
	return errors.Join(errs...)
}

func (rs *Keeper) resolve(ctx context.Context, rec *v1alpha1.Finding, now time.Time, why string) error {
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

func (rs *Keeper) create(ctx context.Context, subj Subject, f drift.Finding) (*v1alpha1.Finding, error) {
	rec := &v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: subj.Namespace,
			Name:      recordName(f),
			Labels: map[string]string{
				v1alpha1.LabelCheck: f.Check, v1alpha1.LabelSubjectUID: string(subj.Owner.UID), v1alpha1.LabelFindingID: f.ID,
				v1alpha1.LabelScope: rs.scope(),
			},
		},
		Spec: v1alpha1.FindingSpec{
			ID: f.ID, Check: f.Check, Volume: f.Volume, Node: subj.Node,
			Subject: v1alpha1.SubjectRef{APIVersion: subj.Owner.APIVersion, Kind: f.Object.Kind, Name: f.Object.Name, UID: f.Object.UID},
		},
	}
	if subj.Cluster == "" {
		rec.OwnerReferences = []metav1.OwnerReference{subj.Owner}
	} else {
		rec.Labels[v1alpha1.LabelCluster] = subj.Cluster
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
func (rs *Keeper) relabel(ctx context.Context, want *v1alpha1.Finding, exists error) error {
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
func (rs *Keeper) scope() string {
	if rs.Config == nil {
		return ""
	}
	return ScopeID(rs.Config.Scope)
}

// ScopeID is the scope id of a controller's scope configuration
// (findingrecord.ScopeID).
func ScopeID(s config.ScopeConfig) string {
	return findingrecord.ScopeID(s.Namespaces, s.Selector, s.VolumePrefix)
}

// claim writes the Acting claim: always a write (never skipped as equal),
// with the record's resourceVersion as precondition.
func (rs *Keeper) claim(ctx context.Context, rec *v1alpha1.Finding, st v1alpha1.FindingStatus) error {
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
func (rs *Keeper) claimID(at time.Time) string {
	return fmt.Sprintf("%s/%d/%s", rs.Identity, at.UnixNano(), rand.String(6))
}

// writeStatus stores st when it differs from what is stored (compared as
// stored: semantically). The update carries the record's resourceVersion,
// so a stale cache cannot overwrite a newer status (a conflict requeues the
// subject).
func (rs *Keeper) writeStatus(ctx context.Context, rec *v1alpha1.Finding, st v1alpha1.FindingStatus) error {
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

// Event records an Event about f's object.
func (rs *Keeper) Event(ctx context.Context, f drift.Finding, reason, typ, msg string) {
	if rs.Recorder != nil {
		rs.Recorder.Event(ctx, f, reason, typ, msg)
	}
}
