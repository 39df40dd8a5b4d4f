package policyreport

import (
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
)

// Results of a PolicyReport result (the CRDs' enum).
const (
	Pass  = "pass"
	Fail  = "fail"
	Warn  = "warn"
	Error = "error"
	Skip  = "skip"
)

// Severities of a PolicyReport result (the CRDs' enum).
const (
	Critical = "critical"
	High     = "high"
	Medium   = "medium"
	Low      = "low"
	Info     = "info"
)

// unreadable are the block reasons that say tether could not read evidence
// it needs, so the check could not be judged: result error.
var unreadable = map[drift.BlockReason]bool{
	check.TenantUnreachable:  true,
	check.HotplugGateUnknown: true,
}

// midChange are the block reasons that say the subject is changing under
// someone else's hand right now (being deleted, migrated, detached,
// attached, or a removal or addition is queued): the check waits for the
// next pass to judge it, so the result is skip.
var midChange = map[drift.BlockReason]bool{
	check.VMIMigrating:          true,
	check.VMITerminating:        true,
	check.VMTerminating:         true,
	check.OwnerGone:             true,
	check.DetachInProgress:      true,
	check.RemovalPending:        true,
	check.AdditionPending:       true,
	check.VolumeNotReady:        true,
	check.AttachmentPodTooYoung: true,
}

// ResultOf is the PolicyReport result of a finding, the first rule that
// applies:
//
//   - error: its action is blocked because evidence could not be read (a
//     tenant unreachable, the KubeVirt CR unreadable);
//   - skip: its action is blocked because the subject is mid-change
//     (migrating, terminating, detaching, attaching, a removal or addition
//     pending, an attachment pod too young to judge);
//   - warn: the finding is information (severity info: a divergence that
//     is legitimate or not proven) or of unknown severity;
//   - fail: otherwise (severity warning or critical: a proven problem).
//
// tether lists findings, not every object it checked, so it never writes
// pass: a finding that goes away leaves the report.
func ResultOf(f drift.Finding) string {
	switch b := f.Action.BlockedBy; {
	case unreadable[b]:
		return Error
	case midChange[b]:
		return Skip
	}
	if f.Severity.Rank() < drift.SeverityWarning.Rank() {
		return Warn
	}
	return Fail
}

// SeverityOf is the PolicyReport severity of a finding:
//
//   - critical: tether severity critical (it also stops KubeVirt's work on
//     other objects);
//   - high: severity warning and no safe action (a person has to act);
//   - medium: severity warning with a safe action (`tether fix` or the
//     controller can remove it);
//   - info: severity info, or unknown.
func SeverityOf(f drift.Finding) string {
	switch f.Severity {
	case drift.SeverityCritical:
		return Critical
	case drift.SeverityWarning:
		if f.Action.Safe {
			return Medium
		}
		return High
	}
	return Info
}

// Scored says whether a result counts towards a compliance score: only
// failures do (warn is "not met, not scored" in the PolicyReport API; skip
// and error were not judged).
func Scored(result string) bool { return result == Fail }
