package findingrecord

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
)

// Switch names one switch record of the breaker's kind beyond the
// controller's own (the breaker and the anomaly guard, above): the
// blast-radius breaker of a one-shot fix command that keeps its window in
// a namespace the operator gives it. It is read, tripped and reset as the
// controller's breaker is (phase Blocked while tripped, Resolved with
// resolvedAt after a reset), and carries the state of its runs in one
// annotation (State), written with the record's resourceVersion so that two
// runs never both write on what they read.
type Switch struct {
	// Name is the record's name; Check its spec.check and label (never a
	// check of any platform: the controller's window, gauges and reports
	// leave it out, NoFinding).
	Name, Check string
	// Reason is the record's reason while tripped; What says what it is in
	// messages ("blast-radius breaker of tether openstack fix").
	Reason, What string
}

// LabelSwitch marks the records of every Switch: bookkeeping, never a
// finding (NoFinding).
const LabelSwitch = "tether.dev/switch"

// AnnotationState holds a Switch's run state, as JSON.
const AnnotationState = "tether.dev/state"

// SwitchRecord is a Switch record as read: its switch, its run state (raw
// JSON, "" when none) and the resourceVersion a write must match.
type SwitchRecord struct {
	BreakerState
	State           string
	ResourceVersion string
	// Exists: the record is there (a write updates rather than creates).
	Exists bool
}

// Read reads the switch's record in namespace ns. No record is a switch
// that never tripped and holds no state; no Finding CRD is an error that
// says how to install it (the operator asked for records there).
func (sw Switch) Read(ctx context.Context, r client.Reader, ns string) (SwitchRecord, error) {
	var rec v1alpha1.Finding
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: sw.Name}, &rec)
	switch {
	case apierrors.IsNotFound(err):
		return SwitchRecord{}, nil
	case meta.IsNoMatchError(err):
		return SwitchRecord{}, fmt.Errorf("reading the %s %s/%s: the Finding CRD (tether.dev) is not installed: install it (kubectl apply -k config/crd), or keep the state in a file instead", sw.What, ns, sw.Name)
	case err != nil:
		return SwitchRecord{}, fmt.Errorf("reading the %s %s/%s: %w", sw.What, ns, sw.Name, err)
	}
	st := SwitchRecord{BreakerState: breakerState(&rec), State: rec.Annotations[AnnotationState], ResourceVersion: rec.ResourceVersion, Exists: true}
	if rec.Status.Phase == "" {
		// Created to hold state, never tripped.
		st.Tripped = false
	}
	return st, nil
}

// Write stores the run state (JSON of v) on the switch's record in
// namespace ns, created when missing, and trips it at now with msg when
// trip is set. The write carries resourceVersion (from Read; "" when the
// record did not exist): a record changed since is a conflict, and nothing
// is written.
func (sw Switch) Write(ctx context.Context, c client.Client, ns, resourceVersion string, v any, trip bool, now time.Time, msg string) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	rec := sw.record(ns)
	rec.Annotations = map[string]string{AnnotationState: string(raw)}
	if resourceVersion == "" {
		err = c.Create(ctx, &rec)
	} else {
		var cur v1alpha1.Finding
		if err = c.Get(ctx, client.ObjectKeyFromObject(&rec), &cur); err == nil {
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations[AnnotationState] = string(raw)
			cur.ResourceVersion = resourceVersion
			err = c.Update(ctx, &cur)
			rec = cur
		}
	}
	if err != nil {
		return "", fmt.Errorf("writing the %s %s/%s: %w", sw.What, ns, sw.Name, err)
	}
	if !trip {
		return rec.ResourceVersion, nil
	}
	if err := tripSwitch(ctx, c, sw.record(ns), sw.Reason, sw.What+"'s trip", now, msg); err != nil {
		return "", err
	}
	st, err := sw.Read(ctx, c, ns)
	return st.ResourceVersion, err
}

// Reset clears a trip of the switch in namespace ns at now, as
// ResetBreaker does; false when it was not tripped.
func (sw Switch) Reset(ctx context.Context, c client.Client, ns string, now time.Time, by string) (bool, error) {
	st, err := sw.Read(ctx, c, ns)
	if err != nil || !st.Tripped {
		return false, err
	}
	return resetSwitch(ctx, c, ns, sw.Name, now, by)
}

func (sw Switch) record(ns string) v1alpha1.Finding {
	return v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sw.Name, Labels: map[string]string{v1alpha1.LabelCheck: sw.Check, LabelSwitch: "true"}},
		Spec: v1alpha1.FindingSpec{ID: sw.Name, Check: sw.Check,
			Subject: v1alpha1.SubjectRef{APIVersion: "v1", Kind: "Namespace", Name: ns}},
	}
}
