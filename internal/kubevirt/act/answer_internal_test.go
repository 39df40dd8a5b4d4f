package act

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
)

// virtAPIAnswer is one answer of virt-api v1.9.0 to removevolume, built the
// way virt-api builds it; cited per case.
type virtAPIAnswer struct {
	name      string
	status    *apierrors.StatusError // JSON metav1.Status body
	plain     int                    // or a text/plain answer with this code
	want      drift.Cause
	wantOut   drift.Outcome
	wantRetry bool
}

func virtAPIAnswers() []virtAPIAnswer {
	vmi := kubevirtv1.Resource("virtualmachineinstance")
	vm := kubevirtv1.Resource("virtualmachine")
	conflict := func(gr schema.GroupResource, msg string) *apierrors.StatusError {
		return apierrors.NewConflict(gr, "vm-a", errors.New(msg))
	}
	// k8s.io/apiserver@v0.34.2 pkg/endpoints/handlers/patch.go:412-415: a
	// JSON patch whose test fails; virt-api passes IsInvalid errors through
	// (pkg/virt-api/rest/volumes.go:202-206).
	race := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "",
		"testing value /spec/volumes failed: test failed", 0, false)
	webhook := func(msg string) *apierrors.StatusError {
		// pkg/util/webhooks/webhooks.go:54-88: webhook denials are 422 Invalid;
		// the API server prefixes the webhook's name.
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
			Reason: metav1.StatusReasonInvalid, Message: `admission webhook "virtualmachine-validator.kubevirt.io" denied the request: ` + msg}}
	}
	return []virtAPIAnswer{
		// volumes.go:314 (verifyVolumeOption), 409 at 190-193 and 228-231.
		{name: "remove of a volume that is gone", status: conflict(vmi, "Unable to remove volume [pvc-a] because it does not exist"), want: drift.AlreadyGone, wantOut: drift.Refused},
		{name: "remove on VM route of a volume that is gone", status: conflict(vm, "Unable to remove volume [pvc-a] because it does not exist"), want: drift.AlreadyGone, wantOut: drift.Refused},
		// volumes.go:305.
		{name: "not hotpluggable", status: conflict(vmi, "Unable to remove volume [pvc-a] because it is not hotpluggable"), want: drift.Conflict, wantOut: drift.Refused},
		// volumes.go:298,301.
		{name: "add: name exists", status: conflict(vm, "Unable to add volume [pvc-a] because volume with that name already exists"), want: drift.Conflict, wantOut: drift.Refused},
		// volumes.go:436 (queue, HotplugVolumes), 409 at 263-266.
		{name: "duplicate remove request", status: conflict(vm, "a remove volume request for volume [pvc-a] already exists and is still being processed"), want: drift.Conflict, wantOut: drift.Refused},
		// subresource.go:54, volumes.go:224-226.
		{name: "VMI not running", status: conflict(vmi, "VMI is not running"), want: NotRunning, wantOut: drift.Refused},
		// volumes.go:40,75-78.
		{name: "no hot-plug gate", status: apierrors.NewBadRequest("Enable DeclarativeHotplugVolumes or HotplugVolumes feature gate to use this API."), want: GateMissing, wantOut: drift.Refused},
		// volumes.go:220-222.
		{name: "VM-owned VMI without HotplugVolumes", status: apierrors.NewBadRequest("VMI ns/vm-a is owned by a VM"), want: GateMissing, wantOut: drift.Refused},
		{name: "bad request otherwise", status: apierrors.NewBadRequest("RemoveVolumeOptions requires name to be set"), want: drift.ServerError, wantOut: drift.Failed},
		{name: "JSON-patch test race", status: race, want: drift.Race, wantOut: drift.Refused, wantRetry: true},
		// vms-admitter.go:450-456.
		{name: "HotplugVolumes VM route while migrating", status: webhook("Cannot handle volume requests while VMI migration is in progress"), want: MigrationInProgress, wantOut: drift.Migrating},
		// storagehotplug.go:37-66; vmi-update-admitter.go:101-118.
		{name: "webhook: update restricted", status: webhook("update of VMI object is restricted"), want: drift.Denied, wantOut: drift.Failed},
		// vms-admitter.go: snapshot in progress.
		{name: "webhook: snapshot in progress", status: webhook(`Cannot update vm disks or volumes until snapshot "s" completes`), want: drift.Denied, wantOut: drift.Failed},
		// subresource.go:232-255.
		{name: "VMI gone", status: apierrors.NewNotFound(vmi, "vm-a"), want: drift.SubjectGone, wantOut: drift.Refused},
		{name: "server error", status: apierrors.NewInternalError(errors.New("unable to patch vm")), want: drift.ServerError, wantOut: drift.Failed},
		// api.go:906-919: virt-api's own SubjectAccessReview, text/plain 401.
		{name: "virt-api authorization", plain: http.StatusUnauthorized, want: drift.Unauthorized, wantOut: drift.Failed},
		{name: "RBAC", status: apierrors.NewForbidden(vmi, "vm-a", errors.New("no")), want: drift.Forbidden, wantOut: drift.Failed},
	}
}

// Every answer of virt-api, served over HTTP as virt-api writes it and read
// back through tether's subresource client, maps to the outcome named for
// what it means; no 409 is ever taken for a migration.
func TestClassifyAnswer_virtAPIAnswers(t *testing.T) {
	for _, c := range virtAPIAnswers() {
		t.Run(c.name, func(t *testing.T) {
			err := serveAnswer(t, c)
			if err == nil {
				t.Fatal("no error from the client")
			}
			got := classifyAnswer(err)
			if got.cause != c.want || got.outcome != c.wantOut {
				t.Fatalf("%v: got %s/%s, want %s/%s", err, got.cause, got.outcome, c.want, c.wantOut)
			}
			if (got.cause == drift.Race) != c.wantRetry {
				t.Fatalf("retry: got %v, want %v", got.cause == drift.Race, c.wantRetry)
			}
			if got.outcome == drift.Migrating && got.cause != MigrationInProgress {
				t.Fatalf("Migrating without a migration: %s", got.cause)
			}
		})
	}
}

// serveAnswer serves c from a test HTTP server and calls removevolume
// against it with tether's client.
func serveAnswer(t *testing.T, c virtAPIAnswer) error {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if c.status == nil {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(c.plain)
			fmt.Fprint(w, "Unauthorized")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(c.status.ErrStatus.Code))
		st := c.status.ErrStatus
		st.Kind, st.APIVersion = "Status", "v1"
		_ = json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	rc, err := virtapi.NewSubresourceClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return virtapi.RemoveVolume(context.Background(), rc, virtapi.VMI, "ns", "vm-a", &kubevirtv1.RemoveVolumeOptions{Name: "pvc-a"})
}

// A timeout is Failed, never a refusal: the write may have happened.
func TestClassifyAnswer_timeout(t *testing.T) {
	if a := classifyAnswer(context.DeadlineExceeded); a.cause != drift.Timeout || a.outcome != drift.Failed {
		t.Fatalf("got %+v", a)
	}
}
