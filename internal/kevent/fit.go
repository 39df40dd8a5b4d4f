package kevent

import (
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// Limits the API server enforces on a core/v1 Event that has eventTime set.
const (
	MaxMessage           = 1024
	MaxReason            = 128
	MaxAction            = 128
	MaxReportingInstance = 128
)

// cut is appended to a message that was shortened.
const cut = " [cut]"

// DefaultAction is the action of an Event about an observation rather
// than a change.
const DefaultAction = "Report"

// Fit shortens ev's message, reason, action and reporting instance to what
// the API server accepts, keeping whole UTF-8 characters, and fills an
// empty action with DefaultAction. A shortened message ends with " [cut]".
func Fit(ev *corev1.Event) {
	if len(ev.Message) > MaxMessage {
		ev.Message = prefix(ev.Message, MaxMessage-len(cut)) + cut
	}
	ev.Reason = prefix(ev.Reason, MaxReason)
	if ev.Action == "" {
		ev.Action = DefaultAction
	}
	ev.Action = prefix(ev.Action, MaxAction)
	ev.ReportingInstance = prefix(ev.ReportingInstance, MaxReportingInstance)
}

// prefix returns the longest beginning of s of at most n bytes that does
// not split a UTF-8 character.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
