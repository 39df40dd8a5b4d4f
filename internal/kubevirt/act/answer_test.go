package act_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/emulator"
)

// virt-api's 409s are validation conflicts (pkg/virt-api/rest/volumes.go:
// 190-193, 228-231, 263-266 in KubeVirt v1.9.0), never a migration: they
// are Refused with what they mean, and a 500 is Failed. A 422 JSON-patch
// race is tried again from a fresh live re-read, a bounded number of times.
// Nothing changes in any case.
func TestApply_serverAnswers_readByMeaning(t *testing.T) {
	s := newScene(t)
	f, ex := s.plannedOrphan("node-f", "pvc-f")
	conflict := `Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "node-f": `
	for _, c := range []struct {
		fault   emulator.Fault
		want    drift.Outcome
		cause   drift.Cause
		message string
	}{
		{emulator.Fault{Status: 409, Message: conflict + "Unable to remove volume [pvc-f] because it is not hotpluggable"}, drift.Refused, drift.Conflict, "not hotpluggable"},
		{emulator.Fault{Status: 409, Message: conflict + "VMI is not running"}, drift.Refused, act.NotRunning, "not running"},
		// "does not exist" while a live re-read still finds it: not gone.
		{emulator.Fault{Status: 409, Message: conflict + "Unable to remove volume [pvc-f] because it does not exist"}, drift.Refused, drift.Conflict, "still lists"},
		// Each try fails its dry run: three tries, then a refusal.
		{emulator.Fault{Status: 422, Count: 3, Message: "the server rejected our request due to an error in our request"}, drift.Refused, drift.Race, "after 3 tries"},
		{emulator.Fault{Status: 422, Message: `admission webhook "x" denied the request: update of VMI object is restricted`}, drift.Failed, drift.Denied, "webhook"},
		{emulator.Fault{Status: 500}, drift.Failed, drift.ServerError, "refused"},
	} {
		c.fault.Namespace, c.fault.Name = s.ns, "node-f"
		s.env.Emulator.InjectFaults(c.fault)
		r := ex.Apply(s.ctx, f, act.Evidence{})
		if r.Outcome != c.want || r.Cause != c.cause || !strings.Contains(r.Message, c.message) {
			t.Errorf("server %d %q: want %s/%s mentioning %q, got %s/%s: %s", c.fault.Status, c.fault.Message, c.want, c.cause, c.message, r.Outcome, r.Cause, r.Message)
		}
		if n := s.env.Emulator.PendingFaults(); n != 0 {
			s.env.Emulator.ClearFaults()
			t.Errorf("server %d: %d answers not asked for", c.fault.Status, n)
		}
		if !hasHotplug(s.vmi("node-f"), "pvc-f") {
			t.Fatalf("server %d: the volume was touched", c.fault.Status)
		}
	}
}

// A race lost once is won on the next try, from a fresh live re-read.
func TestApply_raceLostOnce_appliedOnRetry(t *testing.T) {
	s := newScene(t)
	f, ex := s.plannedOrphan("node-r", "pvc-r")
	ex.AfterDryRun = func(drift.Finding) {
		// The write (not the dry run) loses the race, once.
		s.env.Emulator.InjectFaults(emulator.Fault{Status: 422, Namespace: s.ns, Name: "node-r",
			Message: "the server rejected our request due to an error in our request"})
		ex.AfterDryRun = nil
	}
	r := ex.Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Applied {
		t.Fatalf("want Applied, got %s/%s: %s", r.Outcome, r.Cause, r.Message)
	}
}

// Someone else removes the volume just before tether's write: virt-api
// answers 409 "does not exist", a live re-read confirms the VMI spec no
// longer lists it, and the goal counts as reached.
func TestApply_removedByOtherBeforeWrite_alreadyGone(t *testing.T) {
	s := newScene(t)
	f, ex := s.plannedOrphan("node-x", "pvc-x")
	ex.Subresources = racingSubresources(t, s.sub)
	r := ex.Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Applied || r.Cause != drift.AlreadyGone {
		t.Fatalf("want Applied/AlreadyGone, got %s/%s: %s", r.Outcome, r.Cause, r.Message)
	}
	if lists(s.vmi("node-x"), "pvc-x") {
		t.Fatal("volume still listed")
	}
}

// racingSubresources is a subresources client whose real (not dry-run)
// removevolume first lets another client remove the volume through real,
// then answers as virt-api answers the loser: the real server's answer to
// the same call made second.
func racingSubresources(t *testing.T, real rest.Interface) rest.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/apis/subresources.kubevirt.io/v1/namespaces/"), "/")
		body, _ := io.ReadAll(r.Body)
		var opts kubevirtv1.RemoveVolumeOptions
		if len(parts) != 4 || json.Unmarshal(body, &opts) != nil {
			http.Error(w, "unexpected call "+r.URL.Path, http.StatusBadRequest)
			return
		}
		ns, kind, name := parts[0], virtapi.Kind(parts[1]), parts[2]
		if len(opts.DryRun) == 0 {
			other := &kubevirtv1.RemoveVolumeOptions{Name: opts.Name}
			if err := virtapi.RemoveVolume(r.Context(), real, kind, ns, name, other); err != nil {
				t.Errorf("the other client's removevolume: %v", err)
			}
		}
		err := virtapi.RemoveVolume(r.Context(), real, kind, ns, name, &opts)
		var st apierrors.APIStatus
		switch {
		case err == nil:
			w.WriteHeader(http.StatusAccepted)
		case errors.As(err, &st):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(st.Status().Code))
			out := st.Status()
			out.Kind, out.APIVersion = "Status", "v1"
			_ = json.NewEncoder(w).Encode(out)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := virtapi.NewSubresourceClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// plannedOrphan runs a VM, hot-plugs volume at VMI level, and plans its
// safe VMIRemoveVolume with tenant evidence; it returns the finding and an
// executor for it.
func (s *scene) plannedOrphan(vm, volume string) (drift.Finding, *act.Executor) {
	s.t.Helper()
	s.runningVM(vm)
	s.hotplug(virtapi.VMI, vm, volume)
	return s.plan(policy(), s.tenant(), vm, volume), s.executor(policy(), s.tenant())
}
