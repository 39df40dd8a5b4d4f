package findingrecord

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
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
	var rec v1alpha1.Finding
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: BreakerName}, &rec)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return BreakerState{}, nil
	case err != nil:
		return BreakerState{}, fmt.Errorf("reading the blast-radius breaker %s/%s: %w", ns, BreakerName, err)
	}
	return breakerState(&rec), nil
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
	var rec v1alpha1.Finding
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: BreakerName}, &rec)
	if apierrors.IsNotFound(err) {
		rec = newBreaker(ns)
		if err = c.Create(ctx, &rec); apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, client.ObjectKeyFromObject(&rec), &rec)
		}
	}
	if err != nil {
		return fmt.Errorf("recording the blast-radius trip in %s/%s: %w", ns, BreakerName, err)
	}
	if rec.Status.Phase == v1alpha1.PhaseBlocked {
		return nil
	}
	st := rec.Status.DeepCopy()
	st.Phase, st.Reason, st.Message = v1alpha1.PhaseBlocked, BreakerTripped, msg
	st.FirstObserved, st.LastObserved = &metav1.Time{Time: now}, &metav1.Time{Time: now}
	rec.Status = *st
	// The update carries the resourceVersion read above: a reset written
	// in between is not overwritten (the next action decides again).
	if err := c.Status().Update(ctx, &rec); err != nil {
		return fmt.Errorf("recording the blast-radius trip in %s/%s: %w", ns, BreakerName, err)
	}
	return nil
}

// ResetBreaker clears a trip recorded in namespace ns at now: acting
// resumes, and the actions before now no longer count. It reports whether
// there was a trip to clear.
func ResetBreaker(ctx context.Context, c client.Client, ns string, now time.Time, by string) (bool, error) {
	var rec v1alpha1.Finding
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: BreakerName}, &rec); err != nil {
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
