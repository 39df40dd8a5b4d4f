// Package v1alpha1 holds tether's own API (group tether.dev): the Finding
// resource, in which the controller keeps one durable record per open
// finding, and the controller's configuration file format.
//
// +groupName=tether.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// GroupVersion is tether.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "tether.dev", Version: "v1alpha1"}

// AddToScheme registers Finding and FindingList.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Finding{}, &FindingList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Phase is where a finding stands (contract: shown by kubectl get findings).
type Phase string

// Phases.
const (
	// PhaseObserved: reported; no action is proposed (information).
	PhaseObserved Phase = "Observed"
	// PhaseWaiting: a safe action waits for the grace period to pass.
	PhaseWaiting Phase = "Waiting"
	// PhaseBlocked: an action exists but is not allowed now; see Reason.
	PhaseBlocked Phase = "Blocked"
	// PhaseActing: the action was started and has not converged yet.
	PhaseActing Phase = "Acting"
	// PhaseResolved: the condition no longer holds (fixed by tether or not).
	PhaseResolved Phase = "Resolved"
	// PhaseFailed: the last attempt failed; it is retried with backoff.
	PhaseFailed Phase = "Failed"
)

// Labels on Finding objects, for selection.
const (
	LabelCheck      = "tether.dev/check"
	LabelSubjectUID = "tether.dev/subject-uid"
	LabelFindingID  = "tether.dev/finding"
	// LabelCluster names the tenant cluster a record's subject lives in
	// (a tenant Node of TenantNodeDown); absent for infra subjects.
	LabelCluster = "tether.dev/cluster"
	// LabelScope names the scope of the controller that filed the record
	// (a hash of scope.namespaces, selector and volumePrefix).
	LabelScope = "tether.dev/scope"
)

// Finding is the durable record of one finding about one subject.
type Finding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FindingSpec   `json:"spec"`
	Status FindingStatus `json:"status,omitempty"`
}

// FindingSpec identifies what the finding is about; it never changes.
type FindingSpec struct {
	// ID is the stable finding id (as in `tether audit`).
	ID string `json:"id"`
	// Check is the check's name.
	Check string `json:"check"`
	// Subject is the object the finding is about.
	Subject SubjectRef `json:"subject"`
	// Volume is the volume concerned, if any.
	Volume string `json:"volume,omitempty"`
	// Node is the node concerned, if any: the node a VolumeAttachment
	// attaches to (StaleVolumeAttachment), or the node a waiting pod is
	// bound to (MultiAttachConflict).
	Node string `json:"node,omitempty"`
}

// SubjectRef names the subject.
type SubjectRef struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
}

// FindingStatus is what the controller last concluded.
type FindingStatus struct {
	Phase Phase `json:"phase,omitempty"`
	// Reason is the block reason (Blocked), or the last outcome.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Severity is "critical", "warning" or "info".
	Severity string `json:"severity,omitempty"`
	// FirstObserved is when the condition was first seen in its current
	// run (a record of first sight). It never precedes the object's
	// creationTimestamp.
	FirstObserved *metav1.Time `json:"firstObserved,omitempty"`
	// LastObserved is when the condition was last seen (refreshed at most
	// once a minute for the hot-plug check, every 5 minutes for the storage
	// checks, every 10 seconds while a gone node's fencing clock runs).
	LastObserved *metav1.Time `json:"lastObserved,omitempty"`
	// SafeSince is when the proposed action last became safe; it is unset
	// while the action is not safe (blocked, or information only), so a
	// hold that clears restarts the grace period. It never precedes the
	// object's creationTimestamp.
	SafeSince *metav1.Time `json:"safeSince,omitempty"`
	// ActAfter is SafeSince plus the grace period; unset while the action
	// is not safe.
	ActAfter *metav1.Time `json:"actAfter,omitempty"`
	// Evidence are short facts a human can check with kubectl.
	Evidence []string `json:"evidence,omitempty"`
	// Action is the proposed action.
	Action ProposedAction `json:"action,omitempty"`
	// Attempts counts failed attempts, for backoff.
	Attempts int32 `json:"attempts,omitempty"`
	// LastAttempt is when the action was last tried.
	LastAttempt *metav1.Time `json:"lastAttempt,omitempty"`
	// Claim names the process attempt that claimed the action (Acting):
	// identity, time and a random part. Every claim is a new value, so two
	// processes can never both store one claim on the same record.
	Claim string `json:"claim,omitempty"`
	// ResolvedAt is when the finding was resolved.
	ResolvedAt *metav1.Time `json:"resolvedAt,omitempty"`
	// NodeGoneSince is the durable record of since when the controller has
	// seen spec.node missing (StaleVolumeAttachment); unset while the Node
	// exists. The opt-in rule that fences nodes gone for long counts from
	// here. It never precedes the object's creationTimestamp.
	NodeGoneSince *metav1.Time `json:"nodeGoneSince,omitempty"`
}

// ProposedAction mirrors the action of an audit finding.
type ProposedAction struct {
	Type      string `json:"type,omitempty"`
	Safe      bool   `json:"safe,omitempty"`
	BlockedBy string `json:"blockedBy,omitempty"`
	Remedy    string `json:"remedy,omitempty"`
}

// FindingList is a list of Findings.
type FindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Finding `json:"items"`
}
