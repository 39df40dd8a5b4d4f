package findingrecord

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/blastradius"
)

// The circuit breaker of the blast-radius limit is one Finding record in
// the controller's namespace (contract: operators read and reset it):
//
//	kubectl get finding -n tether-system blast-radius
//
// Phase Blocked, reason BlastRadiusExceeded: acting has stopped, in every
// controller process that records into that namespace, until an operator
// resets it (`tether controller reset-breaker`), which sets phase Resolved
// and resolvedAt; actions before resolvedAt no longer count.
const (
	BreakerName  = "blast-radius"
	BreakerCheck = "BlastRadius"
	// BreakerTripped is the record's reason while tripped.
	BreakerTripped = "BlastRadiusExceeded"
	// BreakerReset is the record's reason after a reset.
	BreakerReset = "Reset"
)

// BreakerState is what the breaker record says.
type BreakerState struct {
	// Tripped: acting has stopped.
	Tripped bool
	// TrippedAt is when it tripped (zero if it never did).
	TrippedAt time.Time
	// ResetAt is when an operator last reset it: actions before it do not
	// count towards the limit any more.
	ResetAt time.Time
	// Message says why it tripped.
	Message string
}

// Breaker reads the breaker record of namespace ns. No record, or no
// Finding CRD, is a breaker that never tripped.
func Breaker(ctx context.Context, r client.Reader, ns string) (BreakerState, error) {
	return readSwitch(ctx, r, ns, BreakerName, "blast-radius breaker")
}

// readSwitch reads a switch record (the breaker, the anomaly guard).
func readSwitch(ctx context.Context, r client.Reader, ns, name, what string) (BreakerState, error) {
	rec, err := getSwitch(ctx, r, ns, name, what)
	if err != nil || rec == nil {
		return BreakerState{}, err
	}
	return breakerState(rec), nil
}

// getSwitch reads switch record ns/name: nil when there is none, or no
// Finding CRD.
func getSwitch(ctx context.Context, r client.Reader, ns, name, what string) (*v1alpha1.Finding, error) {
	var rec v1alpha1.Finding
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rec)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the %s %s/%s: %w", what, ns, name, err)
	}
	return &rec, nil
}

func breakerState(rec *v1alpha1.Finding) BreakerState {
	var s BreakerState
	if rec.Status.FirstObserved != nil {
		s.TrippedAt = rec.Status.FirstObserved.Time
	}
	if rec.Status.ResolvedAt != nil {
		s.ResetAt = rec.Status.ResolvedAt.Time
	}
	s.Tripped = rec.Status.Phase != v1alpha1.PhaseResolved
	s.Message = rec.Status.Message
	return s
}

// TripBreaker records in namespace ns that acting stopped at now, for the
// reason msg. A record that already shows a trip is left as it is.
func TripBreaker(ctx context.Context, c client.Client, ns string, now time.Time, msg string) error {
	return tripSwitch(ctx, c, newBreaker(ns), BreakerTripped, "blast-radius trip", now, msg)
}

// tripSwitch records the trip of a switch record like want (created when
// missing), with reason and message msg; one that shows a trip already is
// left as it is.
func tripSwitch(ctx context.Context, c client.Client, want v1alpha1.Finding, reason, what string, now time.Time, msg string) error {
	rec := want
	err := c.Get(ctx, client.ObjectKeyFromObject(&want), &rec)
	if apierrors.IsNotFound(err) {
		rec = want
		if err = c.Create(ctx, &rec); apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, client.ObjectKeyFromObject(&rec), &rec)
		}
	}
	if err != nil {
		return fmt.Errorf("recording the %s in %s/%s: %w", what, want.Namespace, want.Name, err)
	}
	if rec.Status.Phase == v1alpha1.PhaseBlocked {
		return nil
	}
	st := rec.Status.DeepCopy()
	st.Phase, st.Reason, st.Message = v1alpha1.PhaseBlocked, reason, msg
	st.FirstObserved, st.LastObserved = &metav1.Time{Time: now}, &metav1.Time{Time: now}
	rec.Status = *st
	// The update carries the resourceVersion read above: a reset written
	// in between is not overwritten (the next action decides again).
	if err := c.Status().Update(ctx, &rec); err != nil {
		return fmt.Errorf("recording the %s in %s/%s: %w", what, want.Namespace, want.Name, err)
	}
	return nil
}

// ResetBreaker clears a trip recorded in namespace ns at now: acting
// resumes, and the actions before now no longer count. It reports whether
// there was a trip to clear.
func ResetBreaker(ctx context.Context, c client.Client, ns string, now time.Time, by string) (bool, error) {
	return resetSwitch(ctx, c, ns, BreakerName, now, by)
}

// resetSwitch clears the trip of switch record ns/name at now.
func resetSwitch(ctx context.Context, c client.Client, ns, name string, now time.Time, by string) (bool, error) {
	var rec v1alpha1.Finding
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rec); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, err
	}
	if rec.Status.Phase == v1alpha1.PhaseResolved {
		return false, nil
	}
	rec.Status.Phase, rec.Status.Reason = v1alpha1.PhaseResolved, BreakerReset
	rec.Status.Message = "reset by " + by
	rec.Status.ResolvedAt = &metav1.Time{Time: now}
	if err := c.Status().Update(ctx, &rec); err != nil {
		return false, err
	}
	return true, nil
}

func newBreaker(ns string) v1alpha1.Finding {
	return v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: BreakerName,
			Labels: map[string]string{v1alpha1.LabelCheck: BreakerCheck},
		},
		Spec: v1alpha1.FindingSpec{
			ID: BreakerName, Check: BreakerCheck,
			Subject: v1alpha1.SubjectRef{APIVersion: "v1", Kind: "Namespace", Name: ns},
		},
	}
}

// FixCheck is the check name of the records `tether fix --apply` keeps in
// the controller's namespace, one per finding it acted on: the controller
// counts them in its blast-radius window like its own actions.
const FixCheck = "FixApply"

// FixRecordsKept is how long `tether fix --apply` keeps its records: the
// older ones are deleted when it records a new action.
const FixRecordsKept = 24 * time.Hour

// FixAction is one action `tether fix --apply` took.
type FixAction struct {
	Check, ID, Volume, Message string
	Subject                    v1alpha1.SubjectRef
	At                         time.Time
}

// RecordFixAction records a in namespace ns (create, or update the record
// of an earlier action on the same finding) and deletes the records of fix
// actions older than FixRecordsKept.
func RecordFixAction(ctx context.Context, c client.Client, ns string, a FixAction) error {
	name := Name(FixCheck, strings.ToLower(a.Check)+"-"+a.ID)
	rec := v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.LabelCheck: FixCheck, v1alpha1.LabelFindingID: a.ID}},
		Spec:       v1alpha1.FindingSpec{ID: "fix-" + a.ID, Check: FixCheck, Subject: a.Subject, Volume: a.Volume},
	}
	err := c.Create(ctx, &rec)
	if apierrors.IsAlreadyExists(err) {
		err = c.Get(ctx, client.ObjectKeyFromObject(&rec), &rec)
	}
	if err != nil {
		return err
	}
	at := metav1.NewTime(a.At)
	rec.Status = v1alpha1.FindingStatus{
		Phase: v1alpha1.PhaseResolved, Reason: "Applied", Message: a.Check + ": " + a.Message,
		LastAttempt: &at, ResolvedAt: &at, FirstObserved: &at,
	}
	if err := c.Status().Update(ctx, &rec); err != nil {
		return err
	}
	return pruneFixRecords(ctx, c, ns, a.At)
}

func pruneFixRecords(ctx context.Context, c client.Client, ns string, now time.Time) error {
	var list v1alpha1.FindingList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCheck: FixCheck}); err != nil {
		return err
	}
	for i := range list.Items {
		rec := &list.Items[i]
		if la := rec.Status.LastAttempt; la != nil && now.Sub(la.Time) > FixRecordsKept {
			uid := rec.UID
			if err := c.Delete(ctx, rec, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

// The controller publishes its blast-radius limit in a record of its own
// beside the breaker, so that `tether fix` can say, before it acts, what its
// actions do to the controller's window. (Not on the breaker record: one
// created without a status reads as tripped.)
const (
	LimitsName  = "blast-radius-limits"
	LimitsCheck = "BlastRadiusLimits"
	// AnnotationMaxActions and AnnotationInterval hold the limit.
	AnnotationMaxActions = "tether.dev/max-actions"
	AnnotationInterval   = "tether.dev/interval"
)

// Limits is a controller's blast-radius limit: at most Max actions within
// any window of length Interval (the one count of every blast-radius limit).
type Limits = blastradius.Limits

// PublishLimits records l in namespace ns (create, or update the record's
// annotations).
func PublishLimits(ctx context.Context, c client.Client, ns string, l Limits) error {
	want := map[string]string{AnnotationMaxActions: strconv.Itoa(l.Max), AnnotationInterval: l.Interval.String()}
	rec := v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: LimitsName, Labels: map[string]string{v1alpha1.LabelCheck: LimitsCheck}, Annotations: want},
		Spec: v1alpha1.FindingSpec{ID: LimitsName, Check: LimitsCheck,
			Subject: v1alpha1.SubjectRef{APIVersion: "v1", Kind: "Namespace", Name: ns}},
	}
	err := c.Create(ctx, &rec)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(&rec), &rec); err != nil {
		return err
	}
	if rec.Annotations[AnnotationMaxActions] == want[AnnotationMaxActions] && rec.Annotations[AnnotationInterval] == want[AnnotationInterval] {
		return nil
	}
	if rec.Annotations == nil {
		rec.Annotations = map[string]string{}
	}
	maps.Copy(rec.Annotations, want)
	return c.Update(ctx, &rec)
}

// ReadLimits reads the limit published in namespace ns; found is false when
// there is none (no controller records there, or one older than the
// record).
func ReadLimits(ctx context.Context, r client.Reader, ns string) (l Limits, found bool, err error) {
	var rec v1alpha1.Finding
	err = r.Get(ctx, client.ObjectKey{Namespace: ns, Name: LimitsName}, &rec)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return Limits{}, false, nil
	case err != nil:
		return Limits{}, false, err
	}
	l.Max, err = strconv.Atoi(rec.Annotations[AnnotationMaxActions])
	if err != nil || l.Max < 1 {
		return Limits{}, false, fmt.Errorf("%s/%s: annotation %s=%q is not a positive number", ns, LimitsName, AnnotationMaxActions, rec.Annotations[AnnotationMaxActions])
	}
	l.Interval, err = time.ParseDuration(rec.Annotations[AnnotationInterval])
	if err != nil || l.Interval <= 0 {
		return Limits{}, false, fmt.Errorf("%s/%s: annotation %s=%q is not a positive duration", ns, LimitsName, AnnotationInterval, rec.Annotations[AnnotationInterval])
	}
	return l, true, nil
}

// Supervised reports whether a record is of an action of `tether fix`,
// which counts in the controller's window but never trips its breaker.
func Supervised(rec *v1alpha1.Finding) bool { return rec.Spec.Check == FixCheck }

// NoFinding reports whether a record is the controller's own bookkeeping
// (the breaker, the published limit, the anomaly guard, a Switch) rather
// than a finding.
func NoFinding(rec *v1alpha1.Finding) bool {
	return rec.Spec.Check == BreakerCheck || rec.Spec.Check == LimitsCheck || rec.Spec.Check == GuardCheck || rec.Labels[LabelSwitch] == "true"
}

// ResolvedAfterAction is the reason of a record whose condition went after
// an action was claimed and its outcome never stored: it counts in the
// window as if it had applied.
const ResolvedAfterAction = "ResolvedAfterAction"

// ActedOn reports whether a record's last action changed something or may
// have: Applied, Pending, or resolved after a claim whose outcome was never
// stored.
func ActedOn(rec *v1alpha1.Finding) bool {
	switch rec.Status.Reason {
	case "Applied", "Pending", ResolvedAfterAction:
		return true
	}
	return false
}

// InWindow reports whether a record's last action counts in a
// blast-radius window of length interval ending at now: it changed
// something or may have (ActedOn, or claimed and still Acting), and lies
// within the window. The breaker and limits records never count.
func InWindow(rec *v1alpha1.Finding, now time.Time, interval time.Duration) bool {
	la := rec.Status.LastAttempt
	if la == nil || !(blastradius.Limits{Interval: interval}).Counts(la.Time, now, time.Time{}) || NoFinding(rec) {
		return false
	}
	return ActedOn(rec) || rec.Status.Phase == v1alpha1.PhaseActing
}
