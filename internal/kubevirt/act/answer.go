package act

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tether-dev/tether/internal/drift"
)

// KubeVirt's causes, beside the ones every platform meets (internal/drift).
const (
	// NotRunning: the VMI is not Running (409 "VMI is not running").
	NotRunning drift.Cause = "NotRunning"
	// GateMissing: the feature gate the call needs is off (400): neither
	// hot-plug gate, or HotplugVolumes for a VM-owned VMI.
	GateMissing drift.Cause = "GateMissing"
	// MigrationInProgress: the VMI migrates (read before acting, or 422
	// from the VM route under HotplugVolumes).
	MigrationInProgress drift.Cause = "MigrationInProgress"
	// UnmountStuck: the volume left the VMI spec, but virt-handler has not
	// unmounted it within the wait.
	UnmountStuck drift.Cause = "UnmountStuck"
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
	cause   drift.Cause
	outcome drift.Outcome
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
		return answer{drift.Timeout, drift.Failed, "timed out; nothing is known to have changed"}
	case code == http.StatusNotFound:
		return answer{drift.SubjectGone, drift.Refused, "the VM or VMI is gone; nothing to remove"}
	case code == http.StatusConflict && strings.Contains(msg, msgDoesNotExist):
		return answer{drift.AlreadyGone, drift.Refused, "virt-api says the volume does not exist"}
	case code == http.StatusConflict && strings.Contains(msg, msgNotRunning):
		return answer{NotRunning, drift.Refused, "the VMI is not running; try again once it runs"}
	case code == http.StatusConflict:
		return answer{drift.Conflict, drift.Refused, "virt-api's validation refused the call; retrying will not help until the VM or VMI changes"}
	case code == http.StatusBadRequest && (strings.Contains(msg, msgGateOff) || strings.Contains(msg, msgOwnedByVM)):
		return answer{GateMissing, drift.Refused, "the KubeVirt feature gate this call needs is off; see the finding's remedy"}
	case code == http.StatusUnprocessableEntity && strings.Contains(msg, msgMigrationInProgress):
		return answer{MigrationInProgress, drift.Migrating, "the VMI migrates; retry after the migration ended"}
	case code == http.StatusUnprocessableEntity && isPatchTestFailure(err, msg):
		return answer{drift.Race, drift.Refused, "the VM or VMI changed while virt-api patched it; re-read and retry"}
	case code == http.StatusUnprocessableEntity:
		return answer{drift.Denied, drift.Failed, "an admission webhook denied the change; read its message"}
	case code == http.StatusUnauthorized:
		return answer{drift.Unauthorized, drift.Failed, "virt-api's own authorization refused tether's account; grant it the KubeVirt subresource permissions"}
	case code == http.StatusForbidden:
		return answer{drift.Forbidden, drift.Failed, "forbidden: tether's account may not do this, and nothing was changed; grant the permission " +
			"(for the storage remediations: `kubectl apply -k config/rbac/storage-remediation`), or run in dry run"}
	}
	return answer{drift.ServerError, drift.Failed, "refused; nothing is known to have changed"}
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
func volumeRefusal(step string, err error) drift.Result {
	a := classifyAnswer(err)
	return drift.Result{Outcome: a.outcome, Cause: a.cause, Err: err,
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
