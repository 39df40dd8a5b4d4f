package kevent_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kevent"
)

// The limits below are the API server's for a core/v1 Event with eventTime
// set (pkg/apis/core/validation/events.go: message 1024, reason, action and
// reportingInstance 128, action and reason required); they are written
// here as numbers, not taken from the package under test.
func TestFit(t *testing.T) {
	long := strings.Repeat("é", 700) // 1400 bytes, 2 bytes a character
	for _, tc := range []struct {
		name           string
		in             corev1.Event
		wantMsgChanged bool
	}{
		{"fits", corev1.Event{Message: "short", Reason: "R", Action: "A", ReportingInstance: "i"}, false},
		{"message of exactly 1024", corev1.Event{Message: strings.Repeat("m", 1024), Reason: "R", Action: "A"}, false},
		{"message of 1025", corev1.Event{Message: strings.Repeat("m", 1025), Reason: "R", Action: "A"}, true},
		{"multi-byte message", corev1.Event{Message: long, Reason: "R", Action: "A"}, true},
		{"no action", corev1.Event{Message: "m", Reason: "R"}, false},
		{"long fields", corev1.Event{Message: "m", Reason: strings.Repeat("r", 200), Action: strings.Repeat("a", 200), ReportingInstance: strings.Repeat("i", 300)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.in
			kevent.Fit(&ev)
			if len(ev.Message) > 1024 || len(ev.Reason) > 128 || len(ev.Action) > 128 || len(ev.ReportingInstance) > 128 {
				t.Fatalf("over the limits: message %d, reason %d, action %d, instance %d",
					len(ev.Message), len(ev.Reason), len(ev.Action), len(ev.ReportingInstance))
			}
			if ev.Action == "" || ev.Reason == "" {
				t.Fatalf("action %q, reason %q: both are required", ev.Action, ev.Reason)
			}
			if !utf8.ValidString(ev.Message) {
				t.Fatalf("message is not valid UTF-8 after the cut: %q", ev.Message[len(ev.Message)-8:])
			}
			if changed := ev.Message != tc.in.Message; changed != tc.wantMsgChanged {
				t.Fatalf("message changed = %v, want %v", changed, tc.wantMsgChanged)
			}
			if tc.wantMsgChanged && !strings.HasSuffix(ev.Message, "[cut]") {
				t.Fatalf("a shortened message does not say so: ...%q", ev.Message[len(ev.Message)-10:])
			}
			if tc.wantMsgChanged && !strings.HasPrefix(tc.in.Message, strings.TrimSuffix(ev.Message, " [cut]")) {
				t.Fatal("the shortened message is not the beginning of the original")
			}
		})
	}
}

func FuzzFit(f *testing.F) {
	f.Add("m", "R", "A", "i")
	f.Add(strings.Repeat("ü", 600), "", "", strings.Repeat("x", 129))
	f.Fuzz(func(t *testing.T, msg, reason, action, inst string) {
		ev := corev1.Event{Message: msg, Reason: reason, Action: action, ReportingInstance: inst}
		kevent.Fit(&ev)
		if len(ev.Message) > 1024 || len(ev.Reason) > 128 || len(ev.Action) > 128 || len(ev.ReportingInstance) > 128 || ev.Action == "" {
			t.Fatalf("not accepted by the API server: %+v", ev)
		}
		if len(msg) <= 1024 && ev.Message != msg {
			t.Fatal("a message within the limit was changed")
		}
		if utf8.ValidString(msg) && !utf8.ValidString(ev.Message) {
			t.Fatal("valid UTF-8 became invalid")
		}
	})
}
