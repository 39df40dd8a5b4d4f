package policyreport

import (
	"testing"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	oscheck "github.com/tether-dev/tether/internal/openstack/check"
)

func finding(sev drift.Severity, safe bool, block drift.BlockReason) drift.Finding {
	return drift.Finding{Check: check.OrphanHotplugVolume, Namespace: "ns", Severity: sev,
		Object: drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vmi", UID: "u1"},
		Action: drift.Action{Type: check.VMRemoveVolume, Safe: safe, BlockedBy: block}}
}

func TestResultAndSeverity(t *testing.T) {
	cases := []struct {
		name             string
		f                drift.Finding
		result, severity string
		scored           bool
	}{
		{"warning, safe -> fail, medium", finding(drift.SeverityWarning, true, ""), Fail, Medium, true},
		{"warning, report only -> fail, high", finding(drift.SeverityWarning, false, ""), Fail, High, true},
		{"warning, blocked by users -> fail, high", finding(drift.SeverityWarning, false, check.HeldByUsers), Fail, High, true},
		{"critical, blocked -> fail, critical", finding(drift.SeverityCritical, false, check.VolumeInUse), Fail, Critical, true},
		{"info -> warn, info", finding(drift.SeverityInfo, false, check.VMIOnlyHotplug), Warn, Info, false},
		{"unknown severity -> warn, info", finding("", false, ""), Warn, Info, false},
		{"tenant unreachable -> error", finding(drift.SeverityWarning, false, check.TenantUnreachable), Error, High, false},
		{"KubeVirt CR unreadable -> error", finding(drift.SeverityWarning, false, check.HotplugGateUnknown), Error, High, false},
		{"VMI migrating -> skip", finding(drift.SeverityWarning, false, check.VMIMigrating), Skip, High, false},
		{"detach in progress -> skip", finding(drift.SeverityWarning, false, check.DetachInProgress), Skip, High, false},
		{"owner gone -> skip", finding(drift.SeverityWarning, false, check.OwnerGone), Skip, High, false},
		{"critical but terminating -> skip, critical", finding(drift.SeverityCritical, false, check.VMITerminating), Skip, Critical, false},
		{"info, tenant unreachable -> error, info", finding(drift.SeverityInfo, false, check.TenantUnreachable), Error, Info, false},
		{"node not fenced -> fail", finding(drift.SeverityWarning, false, check.NodeNotFenced), Fail, High, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ResultFor(Entry{Finding: c.f}, check.BlockClassOf)
			if r.Result != c.result || r.Severity != c.severity || r.Scored != c.scored {
				t.Errorf("got result %s severity %s scored %v, want %s %s %v", r.Result, r.Severity, r.Scored, c.result, c.severity, c.scored)
			}
		})
	}
}

// TestResult_eachPlatformClassifiesItsReasons: the builder knows no block
// reason; the platform's classifier says which findings were not judged.
// OpenStack's reasons mean nothing to KubeVirt's classifier, and the other
// way round.
func TestResult_eachPlatformClassifiesItsReasons(t *testing.T) {
	blocked := func(b drift.BlockReason) drift.Finding {
		return drift.Finding{Check: oscheck.DanglingNovaAttachment, Namespace: "project", Severity: drift.SeverityWarning,
			Object: drift.ObjectRef{Kind: "Server", Name: "web-1", UID: "s1"}, Action: drift.Action{BlockedBy: b}}
	}
	cases := []struct {
		name     string
		f        drift.Finding
		classify Classifier
		want     string
	}{
		{"OpenStack, volume attaching -> skip", blocked(oscheck.VolumeTransitional), oscheck.BlockClassOf, Skip},
		{"OpenStack, Nova task -> skip", blocked(oscheck.ServerTaskState), oscheck.BlockClassOf, Skip},
		{"OpenStack, gone unconfirmed -> error", blocked(oscheck.Unconfirmed), oscheck.BlockClassOf, Error},
		{"OpenStack, server running -> fail", blocked(oscheck.ServerRunning), oscheck.BlockClassOf, Fail},
		{"OpenStack reason, KubeVirt's classifier -> fail", blocked(oscheck.VolumeTransitional), check.BlockClassOf, Fail},
		{"KubeVirt reason, OpenStack's classifier -> fail", blocked(check.VMIMigrating), oscheck.BlockClassOf, Fail},
		{"no classifier -> judged by severity", blocked(check.VMIMigrating), nil, Fail},
	}
	for _, c := range cases {
		if got := ResultOf(c.f, c.classify); got != c.want {
			t.Errorf("%s: got %s", c.name, got)
		}
	}
}
