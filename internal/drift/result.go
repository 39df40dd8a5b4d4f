package drift

// Outcome is how an attempt ended (contract: shown in plans, Events,
// metrics). There are five; the Cause says which of an outcome's reasons
// applied.
type Outcome string

// Outcomes.
const (
	// Applied: the change was made and the drift is gone.
	Applied Outcome = "Applied"
	// Pending: the change was accepted but had not converged within the wait.
	Pending Outcome = "Pending"
	// Refused: the action was not safe (blocked, or the live re-check
	// disagreed with the plan); nothing was changed.
	Refused Outcome = "Refused"
	// Migrating: the subject migrates (read before acting, or answered by
	// the platform); nothing was changed; retry after the migration ended.
	Migrating Outcome = "Migrating"
	// Failed: the server refused or errored (a webhook denial, an
	// authorization failure, a server error, a change that does not
	// converge); nothing is known to have changed, or the change is stuck.
	Failed Outcome = "Failed"
)

// Cause names what happened when an action did not simply apply: which
// answer the server gave, read by what it means, or what the live state
// showed. Platforms add causes of their own.
type Cause string

// The causes every platform meets.
const (
	// AlreadyGone: the server says the thing to remove does not exist, and
	// a live re-read agrees: the goal was reached by someone else.
	AlreadyGone Cause = "AlreadyGone"
	// SubjectGone: the object addressed is gone (404).
	SubjectGone Cause = "SubjectGone"
	// Conflict: the server's validation refused the call (409).
	Conflict Cause = "Conflict"
	// Race: a precondition of the write failed (the object changed in
	// between).
	Race Cause = "Race"
	// Denied: an admission webhook denied the change.
	Denied Cause = "Denied"
	// Unauthorized: the server did not accept the caller's credentials (401).
	Unauthorized Cause = "Unauthorized"
	// Forbidden: the caller may not do this (403).
	Forbidden Cause = "Forbidden"
	// Timeout: the call timed out; nothing is known to have changed.
	Timeout Cause = "Timeout"
	// ServerError: any other refusal or error.
	ServerError Cause = "ServerError"
)

// Result is the outcome of one action.
type Result struct {
	FindingID string
	Outcome   Outcome
	Message   string
	// Cause says which reason of the Outcome applied ("" when Applied
	// without anything to note).
	Cause Cause `json:",omitempty"`
	Err   error `json:"-"`
}
