package policyreport

import "github.com/tether-dev/tether/internal/drift"

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

// Classifier says what a platform's block reasons tell of their findings
// (the platform's check.BlockClassOf). A nil Classifier judges every finding
// by its severity.
type Classifier func(drift.BlockReason) drift.BlockClass

// class is the class of f's block reason.
func (c Classifier) class(f drift.Finding) drift.BlockClass {
	if c == nil || f.Action.BlockedBy == "" {
		return drift.Judged
	}
	return c(f.Action.BlockedBy)
}

// ResultOf is the PolicyReport result of a finding whose block reason
// classify classifies, the first rule that applies:
//
//   - error: its action is blocked because evidence could not be read
//     (drift.Unreadable: a tenant unreachable, the KubeVirt CR unreadable,
//     an OpenStack object no read confirmed gone);
//   - skip: its action is blocked because the subject is mid-change
//     (drift.MidChange: migrating, terminating, detaching, attaching, a
//     removal or addition pending, an attachment pod too young to judge,
//     a Nova task or a transitional server or volume status);
//   - warn: the finding is information (severity info: a divergence that
//     is legitimate or not proven) or of unknown severity;
//   - fail: otherwise (severity warning or critical: a proven problem).
//
// tether lists findings, not every object it checked, so it never writes
// pass: a finding that goes away leaves the report.
func ResultOf(f drift.Finding, classify Classifier) string {
	switch classify.class(f) {
	case drift.Unreadable:
		return Error
	case drift.MidChange:
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
