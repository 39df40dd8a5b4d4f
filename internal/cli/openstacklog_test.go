package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack"
	oscheck "github.com/tether-dev/tether/internal/openstack/check"
)

// Every finding and every repair's outcome is one log line with a stable
// reason and the finding's fields, in logfmt or JSON; none writes nothing.
func TestOpenStackLogLines(t *testing.T) {
	f := drift.Finding{ID: "abc123", Check: oscheck.StaleCinderAttachment, Namespace: "proj",
		Object: drift.ObjectRef{Kind: "Attachment", Name: "att-1", UID: types.UID("att-1")}, Volume: "vol-1",
		Severity: drift.SeverityWarning, Message: "held for a server Nova does not have",
		Action: drift.Action{Type: oscheck.DeleteCinderAttachment, BlockedBy: drift.NotSeenTwice}}

	var buf bytes.Buffer
	log := (&osLogFlags{format: "json"}).logger(&buf)
	logObserved(log, f)
	logOutcome(log, f, drift.Result{Outcome: drift.Refused, Cause: drift.Conflict, Message: "the attachment changed"})
	logOutcome(log, f, drift.Result{Outcome: drift.Applied, Message: "deleted"})
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	want := []map[string]any{
		{"level": "WARN", "reason": openstack.ReasonFindingObserved, "finding": "abc123", "check": oscheck.StaleCinderAttachment, "project": "proj",
			"object": "Attachment/att-1", "volume": "vol-1", "action": string(oscheck.DeleteCinderAttachment), "safe": false, "blockedBy": string(drift.NotSeenTwice),
			"message": "held for a server Nova does not have"},
		{"level": "WARN", "reason": openstack.ReasonActionRefused, "finding": "abc123", "outcome": "Refused", "cause": "Conflict", "message": "the attachment changed"},
		{"level": "INFO", "reason": openstack.ReasonActionApplied, "finding": "abc123", "outcome": "Applied", "object": "Attachment/att-1"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s=%v, want %v", i, k, lines[i][k], v)
			}
		}
	}

	buf.Reset()
	logObserved((&osLogFlags{format: "text"}).logger(&buf), f)
	if got := buf.String(); !strings.Contains(got, "reason="+openstack.ReasonFindingObserved) || !strings.Contains(got, "finding=abc123") || !strings.Contains(got, `message="held for a server Nova does not have"`) {
		t.Errorf("logfmt line: %s", got)
	}
	buf.Reset()
	logObserved((&osLogFlags{format: "none"}).logger(&buf), f)
	if buf.Len() != 0 {
		t.Errorf("--log-format none wrote %q", buf.String())
	}
	if err := (&osLogFlags{format: "xml"}).validate(); err == nil || !strings.Contains(err.Error(), "text (logfmt), json or none") {
		t.Errorf("--log-format xml: %v", err)
	}
}
