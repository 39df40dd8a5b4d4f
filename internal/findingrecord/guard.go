package findingrecord

import (
	"context"
	"encoding/json"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
)

// The controller's anomaly guard is a switch record like the breaker, the
// Finding "anomaly-guard" in the controller's namespace (contract:
// operators read and reset it):
//
//	kubectl get finding -n tether-system anomaly-guard
//
// Phase Blocked, reason AnomalyGuard: the picture the controller acts from
// looked wrong (a source that listed many objects lists none, or too many
// findings became safe at once), and no controller process that records
// into that namespace acts until an operator resets it (`tether controller
// reset-guard`). Its annotation tether.dev/counts holds the counts the
// controller last saw, so that a source that empties while no controller
// runs is still caught by the next.
const (
	GuardName  = "anomaly-guard"
	GuardCheck = "AnomalyGuard"
	// GuardTripped is the record's reason while tripped.
	GuardTripped = "AnomalyGuard"
	// AnnotationCounts holds the last Counts, as JSON.
	AnnotationCounts = "tether.dev/counts"
)

// Counts is what the anomaly guard compares from one look to the next.
type Counts struct {
	// VMIs is the number of VMIs in the controller's scope.
	VMIs int `json:"vmis"`
	// TenantAttachments is, by tenant, its VolumeAttachments of its
	// driver; Hotplugs, by tenant, the hot-plugged volumes of the VMIs it
	// serves. Only tenants whose evidence counted are listed.
	TenantAttachments map[string]int `json:"tenantAttachments,omitempty"`
	Hotplugs          map[string]int `json:"hotplugs,omitempty"`
	// Safe is the number of open findings that are safe to act on, and
	// Limit the most the guard lets through.
	Safe  int `json:"safe"`
	Limit int `json:"limit"`
}

// GuardState is the guard record: its switch and the last counts (nil when
// none were recorded).
type GuardState struct {
	BreakerState
	Last *Counts
}

// Guard reads the guard record of namespace ns. No record, or no Finding
// CRD, is a guard that never tripped and has no counts.
func Guard(ctx context.Context, r client.Reader, ns string) (GuardState, error) {
	rec, err := getSwitch(ctx, r, ns, GuardName, "anomaly guard")
	if err != nil || rec == nil {
		return GuardState{}, err
	}
	st := GuardState{BreakerState: breakerState(rec)}
	if rec.Status.Phase == "" {
		// Created to hold counts, never tripped.
		st.Tripped = false
	}
	if raw := rec.Annotations[AnnotationCounts]; raw != "" {
		var c Counts
		if json.Unmarshal([]byte(raw), &c) == nil {
			st.Last = &c
		}
	}
	return st, nil
}

func newGuard(ns string) v1alpha1.Finding {
	return v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: GuardName, Labels: map[string]string{v1alpha1.LabelCheck: GuardCheck}},
		Spec: v1alpha1.FindingSpec{ID: GuardName, Check: GuardCheck,
			Subject: v1alpha1.SubjectRef{APIVersion: "v1", Kind: "Namespace", Name: ns}},
	}
}

// RecordCounts stores c as the guard's last counts in namespace ns
// (creating the record, untripped, when missing).
func RecordCounts(ctx context.Context, c client.Client, ns string, counts Counts) error {
	raw, err := json.Marshal(counts)
	if err != nil {
		return err
	}
	rec := newGuard(ns)
	rec.Annotations = map[string]string{AnnotationCounts: string(raw)}
	err = c.Create(ctx, &rec)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(&rec), &rec); err != nil {
		return err
	}
	if rec.Annotations == nil {
		rec.Annotations = map[string]string{}
	}
	rec.Annotations[AnnotationCounts] = string(raw)
	return c.Update(ctx, &rec)
}

// TripGuard records in namespace ns that the guard stopped acting at now,
// for the reasons msg.
func TripGuard(ctx context.Context, c client.Client, ns string, now time.Time, msg string) error {
	return tripSwitch(ctx, c, newGuard(ns), GuardTripped, "anomaly guard's trip", now, msg)
}

// ResetGuard clears a trip of the guard in namespace ns at now.
func ResetGuard(ctx context.Context, c client.Client, ns string, now time.Time, by string) (bool, error) {
	st, err := Guard(ctx, c, ns)
	if err != nil || !st.Tripped {
		return false, err
	}
	return resetSwitch(ctx, c, ns, GuardName, now, by)
}
