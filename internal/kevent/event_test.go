package kevent

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestNew_fillsTheNewFormAndFits(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ev := New(Spec{
		Namespace: "ns", NameSuffix: "tether-abc",
		Object: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: strings.Repeat("p", 300)},
		Reason: "R", Type: corev1.EventTypeWarning, Message: strings.Repeat("m", 2000), Component: "replica-1",
	}, now)
	if !Valid(ev.Name) || !strings.HasSuffix(ev.Name, ".tether-abc") {
		t.Fatalf("name %q is not a valid Event name ending in the suffix", ev.Name)
	}
	if ev.Action != "Report" || len(ev.Message) > 1024 {
		t.Fatalf("not fitted: action %q, message length %d", ev.Action, len(ev.Message))
	}
	if ev.ReportingController != ReportingController || ev.ReportingInstance != "replica-1" || ev.Source.Component != "replica-1" {
		t.Fatalf("reporter: %q/%q/%q", ev.ReportingController, ev.ReportingInstance, ev.Source.Component)
	}
	if !ev.EventTime.Time.Equal(now) || !ev.FirstTimestamp.Time.Equal(now) || !ev.LastTimestamp.Time.Equal(now) || ev.Count != 1 {
		t.Fatalf("times/count: %v %v %v %d", ev.EventTime, ev.FirstTimestamp, ev.LastTimestamp, ev.Count)
	}
	if ev.InvolvedObject.Name != strings.Repeat("p", 300) || ev.Namespace != "ns" || ev.Type != corev1.EventTypeWarning {
		t.Fatalf("object/namespace/type not kept: %+v", ev)
	}
}
