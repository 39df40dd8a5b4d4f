package openstack

import (
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/eventreason"
)

// The reasons of the log lines `tether openstack` writes for its findings
// and actions (contract: log pipelines alert on them). They are the
// KubeVirt side's Event reasons where they mean the same; OpenStack has no
// Events, so each is one structured log line instead.
const (
	// ReasonFindingObserved: a run observed the finding.
	ReasonFindingObserved = eventreason.FindingObserved
	// ReasonActionApplied, ReasonActionPending, ReasonActionRefused and
	// ReasonActionFailed: how a repair ended.
	ReasonActionApplied = eventreason.ActionApplied
	ReasonActionPending = eventreason.ActionPending
	ReasonActionRefused = eventreason.ActionRefused
	ReasonActionFailed  = eventreason.ActionFailed
	// ReasonBlastRadiusExceeded: the runs' blast-radius breaker tripped; no
	// run repairs anything until an operator resets it.
	ReasonBlastRadiusExceeded = eventreason.BlastRadius
	// ReasonAnomalyGuard: the anomaly guard refused a run's whole batch.
	ReasonAnomalyGuard = eventreason.AnomalyGuard
)

// OutcomeReason is the reason of a repair's outcome.
func OutcomeReason(o drift.Outcome) string {
	switch o {
	case drift.Applied:
		return ReasonActionApplied
	case drift.Pending:
		return ReasonActionPending
	case drift.Refused:
		return ReasonActionRefused
	}
	return ReasonActionFailed
}
