package kevent

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReportingController names tether in every Event it records.
const ReportingController = "tether.dev/tether"

// Spec is what varies between tether's Events; New fills in the rest.
type Spec struct {
	// Namespace is where the Event is stored (the object's namespace, or
	// "default" for a cluster-scoped object).
	Namespace string
	// NameSuffix makes the Event's name unique; it follows the object's
	// name (see Name).
	NameSuffix string
	Labels     map[string]string
	Object     corev1.ObjectReference
	Reason     string
	Type       string
	Message    string
	// Action is what tether did or would do (empty: Report).
	Action string
	// Component is the reporting instance (the replica's identity).
	Component string
}

// New builds one core/v1 Event recorded now, fitted to the API server's
// limits (Fit), so that it is never refused for its size or name.
func New(s Spec, now time.Time) *corev1.Event {
	t := metav1.NewTime(now)
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      Name(s.Object.Name, s.NameSuffix),
			Labels:    s.Labels,
		},
		InvolvedObject:      s.Object,
		Reason:              s.Reason,
		Type:                s.Type,
		Message:             s.Message,
		Source:              corev1.EventSource{Component: s.Component},
		ReportingController: ReportingController,
		ReportingInstance:   s.Component,
		Action:              s.Action,
		FirstTimestamp:      t,
		LastTimestamp:       t,
		EventTime:           metav1.NewMicroTime(now),
		Count:               1,
	}
	Fit(ev)
	return ev
}
