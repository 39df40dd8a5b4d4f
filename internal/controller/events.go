package controller

// Event reasons the controller records besides the action outcomes of
// package act (contract: operators alert on them).
const (
	EventFindingObserved = "TetherFindingObserved"
	EventBlastRadius     = "TetherBlastRadiusExceeded"
	// EventRecordDistrusted: a Finding record's stored times were not used
	// (written by another field manager, or in the future); its clocks
	// start again.
	EventRecordDistrusted = "TetherRecordDistrusted"
)

// EventMultiAttach is the reason of the Event the controller records on a pod
// that waits for a volume attached to another node (contract: operators
// alert on it). Like the attach/detach controller's own Multi-Attach Events,
// it names pods only in the waiting pod's namespace and counts the others.
const EventMultiAttach = "TetherMultiAttachConflict"

// Event reasons of the "on restart" mode (contract: operators alert on
// them), recorded on the VM besides the action outcomes of package act.
const (
	// EventDanglingRemovedOnStart: a dangling hot-plugged reference was
	// removed from a VM that is about to start.
	EventDanglingRemovedOnStart = "TetherDanglingRemovedOnStart"
	// EventDanglingBlocksStart: a dangling reference of a starting VM that
	// tether does not remove (a boot or other non-hot-pluggable disk, or a
	// hold of the check); the message names the claim and the procedure.
	EventDanglingBlocksStart = "TetherDanglingBlocksStart"
	// EventDanglingWouldRemove: dry run; the reference would be removed.
	EventDanglingWouldRemove = "TetherDanglingWouldRemoveOnStart"
)
