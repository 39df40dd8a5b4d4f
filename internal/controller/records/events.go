package records

import "github.com/tether-dev/tether/internal/eventreason"

// Event reasons the record keeper records besides the action outcomes of
// package act (contract: operators alert on them).
const (
	EventFindingObserved = eventreason.FindingObserved
	EventBlastRadius     = eventreason.BlastRadius
	// EventAnomalyGuard: an action held because the anomaly guard is tripped.
	EventAnomalyGuard = eventreason.AnomalyGuard
	// EventRecordDistrusted: a Finding record's stored times were not used
	// (written by another field manager, or in the future); its clocks
	// start again.
	EventRecordDistrusted = eventreason.RecordDistrusted
)
