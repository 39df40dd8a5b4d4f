package records

// Event reasons the record keeper records besides the action outcomes of
// package act (contract: operators alert on them).
const (
	EventFindingObserved = "TetherFindingObserved"
	EventBlastRadius     = "TetherBlastRadiusExceeded"
	// EventAnomalyGuard: an action held because the anomaly guard is tripped.
	EventAnomalyGuard = "TetherAnomalyGuard"
	// EventRecordDistrusted: a Finding record's stored times were not used
	// (written by another field manager, or in the future); its clocks
	// start again.
	EventRecordDistrusted = "TetherRecordDistrusted"
)
