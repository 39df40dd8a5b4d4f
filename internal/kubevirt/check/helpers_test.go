package check

import (
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// now is an hour after every fixture was created.
var now = fixture.Epoch().Add(time.Hour)

// outcome is what a table case expects of the one finding about its subject.
type outcome struct {
	severity drift.Severity
	action   drift.ActionType
	safe     bool
	blocked  drift.BlockReason
	// evidence are substrings that must each appear in some evidence line.
	evidence []string
}

func noFinding() *outcome { return nil }

func safe(a drift.ActionType) *outcome {
	return &outcome{severity: drift.SeverityWarning, action: a, safe: true}
}

func blocked(sev drift.Severity, a drift.ActionType, r drift.BlockReason, evidence ...string) *outcome {
	return &outcome{severity: sev, action: a, blocked: r, evidence: evidence}
}

// only returns the findings of check about object name (and volume, if set).
func only(fs []drift.Finding, check, name, volume string) []drift.Finding {
	var out []drift.Finding
	for _, f := range fs {
		if f.Check == check && f.Object.Name == name && (volume == "" || f.Volume == volume) {
			out = append(out, f)
		}
	}
	return out
}

func assertOutcome(t *testing.T, fs []drift.Finding, want *outcome) {
	t.Helper()
	if want == nil {
		if len(fs) != 0 {
			t.Fatalf("want no finding, got %d: %+v", len(fs), fs[0])
		}
		return
	}
	if len(fs) != 1 {
		t.Fatalf("want 1 finding, got %d: %+v", len(fs), fs)
	}
	f := fs[0]
	got := outcome{severity: f.Severity, action: f.Action.Type, safe: f.Action.Safe, blocked: f.Action.BlockedBy}
	if got.severity != want.severity || got.action != want.action || got.safe != want.safe || got.blocked != want.blocked {
		t.Fatalf("got severity=%s action=%s safe=%v blockedBy=%q, want severity=%s action=%s safe=%v blockedBy=%q\nmessage: %s\nevidence:\n  %s",
			got.severity, got.action, got.safe, got.blocked, want.severity, want.action, want.safe, want.blocked,
			f.Message, strings.Join(f.Evidence, "\n  "))
	}
	for _, sub := range want.evidence {
		if !containsLine(f.Evidence, sub) {
			t.Errorf("no evidence line contains %q:\n  %s", sub, strings.Join(f.Evidence, "\n  "))
		}
	}
	assertWellFormed(t, f)
}

func containsLine(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// assertWellFormed checks what every finding must satisfy.
func assertWellFormed(t *testing.T, f drift.Finding) {
	t.Helper()
	switch {
	case len(f.ID) != 12:
		t.Errorf("id %q is not 12 hex digits", f.ID)
	case f.ID != f.DerivedID() && !(f.Action.Type == RemoveOutOfServiceTaint && f.ID == unfenceID(f)) && !(f.Action.Type == UncordonTenantNode && f.ID == uncordonID(f)):
		t.Errorf("id %q is not derived from the finding", f.ID)
	case strings.Contains(f.Message, "\n") || f.Message == "":
		t.Errorf("message must be one non-empty line: %q", f.Message)
	case len(f.Evidence) == 0:
		t.Errorf("finding has no evidence")
	case f.Action.Remedy == "":
		t.Errorf("finding has no remedy")
	case f.Action.Safe == (f.Action.BlockedBy != ""):
		t.Errorf("safe=%v contradicts blockedBy=%q", f.Action.Safe, f.Action.BlockedBy)
	case f.Action.Safe && f.Severity.Rank() < drift.SeverityWarning.Rank():
		t.Errorf("safe action on a %s finding", f.Severity)
	}
}

func hotplugGate() snapshot.FeatureGates { return fixture.Gates(snapshot.HotplugVolumesGate) }

// bothGatesOff is KubeVirt v1.9.0 with DeclarativeHotplugVolumes disabled
// and HotplugVolumes not listed: the volume API refuses every call.
func bothGatesOff() snapshot.FeatureGates {
	return gatesWith(nil, []string{snapshot.DeclarativeHotplugVolumesGate})
}

// gatesWith is KubeVirt v1.9.0 with the given gates listed.
func gatesWith(enabled, disabled []string) snapshot.FeatureGates {
	g := fixture.Gates(enabled...)
	g.Disabled = disabled
	return g
}

// ownVMI and ownVM are what the checks read of a fixture's VMI or VM.
func ownVMI(vmi *kubevirtv1.VirtualMachineInstance) *snapshot.VMI {
	v := snapshot.VMIOf(vmi)
	return &v
}

func ownVM(vm *kubevirtv1.VirtualMachine) *snapshot.VM {
	v := snapshot.VMOf(vm)
	return &v
}
