package act

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Cause names what happened when an action did not simply apply: which
// answer the server gave, read by what it means, or what the live state
// showed. The Outcome stays one of five (contract); Cause says which of
// its reasons it was.
type Cause string

// Causes.
const (
	// AlreadyGone: removevolume answered 409 "does not exist" and a live
	// re-read shows the volume left the addressed spec: the goal was
	// reached by someone else.
	AlreadyGone Cause = "AlreadyGone"
	// SubjectGone: the VM or VMI addressed is gone (404).
	SubjectGone Cause = "SubjectGone"
	// Conflict: virt-api's validation refused the call (409): the volume
	// is not hotpluggable, already exists, or a queued request clashes.
	Conflict Cause = "Conflict"
	// NotRunning: the VMI is not Running (409 "VMI is not running").
	NotRunning Cause = "NotRunning"
	// Race: the JSON patch virt-api wrote failed its `test` (422): the VM
	// or VMI changed in between.
	Race Cause = "Race"
	// Denied: an admission webhook denied virt-api's patch (other 422).
	Denied Cause = "Denied"
	// GateMissing: the feature gate the call needs is off (400): neither
	// hot-plug gate, or HotplugVolumes for a VM-owned VMI.
	GateMissing Cause = "GateMissing"
	// MigrationInProgress: the VMI migrates (read before acting, or 422
	// from the VM route under HotplugVolumes).
	MigrationInProgress Cause = "MigrationInProgress"
	// Unauthorized: virt-api's own authorization refused the caller (401).
	Unauthorized Cause = "Unauthorized"
	// Forbidden: RBAC refused the caller (403).
	Forbidden Cause = "Forbidden"
	// Timeout: the call timed out; nothing is known to have changed.
	Timeout Cause = "Timeout"
	// ServerError: any other refusal or error.
	ServerError Cause = "ServerError"
	// UnmountStuck: the volume left the VMI spec, but virt-handler has not
	// unmounted it within the wait.
	UnmountStuck Cause = "UnmountStuck"
)

// Messages of virt-api (pkg/virt-api/rest/volumes.go and subresource.go,
// KubeVirt v1.9.0) and of the API server, matched to classify an answer.
const (
	// volumes.go:314: verifyVolumeOption, remove of a missing volume.
	msgDoesNotExist = "because it does not exist"
	// subresource.go:54: vmiNotRunning.
	msgNotRunning = "VMI is not running"
	// volumes.go:40: hotplugVolumeNotEnabledError.
	msgGateOff = "feature gate to use this API"
	// volumes.go:221: VMI-level call on a VM-owned VMI without HotplugVolumes.
	msgOwnedByVM = "is owned by a VM"
	// pkg/virt-api/webhooks/validating-webhook/admitters/vms-admitter.go:450-456.
	msgMigrationInProgress = "while VMI migration is in progress"
	// k8s.io/apiserver handlers/patch.go:412-415 answers a failed JSON
	// patch with NewGenericServerResponse(422), whose message is
	// apimachinery's generic text for 422 (api/errors/errors.go).
	msgPatchRejected = "the server rejected our request due to an error in our request"
)

// answer is what one error answer of virt-api to addvolume/removevolume
// means, and what tether does about it.
type answer struct {
	cause   Cause
	outcome Outcome
	// hint says what the answer means for the operator.
	hint string
}

// classifyAnswer reads a virt-api error answer by its status and message,
// never by the status alone: 409 is a validation conflict, not a
// migration (virt-api accepts calls on a migrating VMI with 202).
func classifyAnswer(err error) answer {
	code, msg := statusOf(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		return answer{Timeout, Failed, "timed out; nothing is known to have changed"}
	case code == http.StatusNotFound:
		return answer{SubjectGone, Refused, "the VM or VMI is gone; nothing to remove"}
	case code == http.StatusConflict && strings.Contains(msg, msgDoesNotExist):
		return answer{AlreadyGone, Refused, "virt-api says the volume does not exist"}
	case code == http.StatusConflict && strings.Contains(msg, msgNotRunning):
		return answer{NotRunning, Refused, "the VMI is not running; try again once it runs"}
	case code == http.StatusConflict:
		return answer{Conflict, Refused, "virt-api's validation refused the call; retrying will not help until the VM or VMI changes"}
	case code == http.StatusBadRequest && (strings.Contains(msg, msgGateOff) || strings.Contains(msg, msgOwnedByVM)):
		return answer{GateMissing, Refused, "the KubeVirt feature gate this call needs is off; see the finding's remedy"}
	case code == http.StatusUnprocessableEntity && strings.Contains(msg, msgMigrationInProgress):
		return answer{MigrationInProgress, Migrating, "the VMI migrates; retry after the migration ended"}
	case code == http.StatusUnprocessableEntity && isPatchTestFailure(err, msg):
		return answer{Race, Refused, "the VM or VMI changed while virt-api patched it; re-read and retry"}
	case code == http.StatusUnprocessableEntity:
		return answer{Denied, Failed, "an admission webhook denied the change; read its message"}
	case code == http.StatusUnauthorized:
		return answer{Unauthorized, Failed, "virt-api's own authorization refused tether's account; grant it the KubeVirt subresource permissions"}
	case code == http.StatusForbidden:
		return answer{Forbidden, Failed, "forbidden: tether's account may not do this, and nothing was changed; grant the permission " +
			"(for the storage remediations: `kubectl apply -k config/rbac/storage-remediation`), or run in dry run"}
	}
	return answer{ServerError, Failed, "refused; nothing is known to have changed"}
}

// statusOf is an error's HTTP status code (0 if none) and message.
func statusOf(err error) (int, string) {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		return int(s.Code), s.Message
	}
	return 0, err.Error()
}

// isPatchTestFailure tells a failed JSON-patch `test` (the generic 422 of
// the API server, its cause naming the failed test) from a webhook denial
// (a 422 whose message names the webhook).
func isPatchTestFailure(err error, msg string) bool {
	if msg == msgPatchRejected {
		return true
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			if strings.Contains(c.Message, "test failed") || strings.Contains(c.Message, "testing value") {
				return true
			}
		}
	}
	return false
}

// volumeRefusal is the result of a volume call answered with err.
func volumeRefusal(step string, err error) Result {
	a := classifyAnswer(err)
	return Result{Outcome: a.outcome, Cause: a.cause, Err: err,
		Message: fmt.Sprintf("%s answered %s (%s): %s", step, answerName(err), a.hint, err.Error())}
}

// answerName is "409 Conflict" and the like, or "error" without a status.
func answerName(err error) string {
	code, _ := statusOf(err)
	if code == 0 {
		return "error"
	}
	return fmt.Sprintf("%d %s", code, http.StatusText(code))
}
