package controller

import (
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/eventreason"
)

// Event reasons the record keeper records besides the action outcomes of
// package act (contract: operators alert on them).
const (
	EventFindingObserved  = records.EventFindingObserved
	EventBlastRadius      = records.EventBlastRadius
	EventRecordDistrusted = records.EventRecordDistrusted
)

// Reasons the record keeper gives for holding a safe action (contract: a
// record's status.reason).
const (
	ReasonDryRun              = records.ReasonDryRun
	ReasonBlastRadius         = records.ReasonBlastRadius
	ReasonBackoff             = records.ReasonBackoff
	ReasonForbidden           = records.ReasonForbidden
	ReasonResolvedAfterAction = records.ReasonResolvedAfterAction
)

// EventMultiAttach is the reason of the Event the controller records on a pod
// that waits for a volume attached to another node (contract: operators
// alert on it). Like the attach/detach controller's own Multi-Attach Events,
// it names pods only in the waiting pod's namespace and counts the others.
const EventMultiAttach = eventreason.MultiAttach
