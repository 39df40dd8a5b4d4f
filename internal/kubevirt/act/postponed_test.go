package act_test

import (
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// `tether fix --check DanglingVolumeReference --apply` on a stopped VM whose
// hot-plugged claim is Terminating but held by a finalizer: the plan
// proposes nothing, and a plan made while the claim was gone (a stale or
// hand-made one) is refused by the live re-check before any write.
func TestApply_danglingToPostponedClaim_refused(t *testing.T) {
	s := newScene(t)
	s.create(fixture.PVC("root"), fixture.PVC("held"),
		fixture.VM("vm-h", fixture.WithVolume("root", fixture.PVC("root")), fixture.WithVolume("held", fixture.PVC("held"), fixture.Hotpluggable())))
	s.deletePVC("held", false) // Terminating; the apiserver's kubernetes.io/pvc-protection holds it

	f := s.danglingPlan(danglingPolicy(), "VirtualMachine", "vm-h", "held")
	if f.Action.Safe || f.Action.BlockedBy != check.DeletionPostponed || f.Action.Type != drift.None {
		t.Fatalf("want no action, blocked by %s; got %+v\nevidence: %q", check.DeletionPostponed, f.Action, f.Evidence)
	}
	if !strings.Contains(strings.Join(f.Evidence, "\n"), "deletion postponed by") {
		t.Errorf("the evidence does not name what postpones the deletion: %q", f.Evidence)
	}
	// A plan that claims the removal is safe is refused live.
	forged := f
	forged.Action = drift.Action{Type: check.VMRemoveVolume, Safe: true}
	r := s.executor(danglingPolicy(), observe.Options{}).Apply(s.ctx, forged, act.Evidence{})
	if r.Outcome != drift.Refused {
		t.Fatalf("want Refused, got %s: %s", r.Outcome, r.Message)
	}
	if !specLists(s.getVM("vm-h"), "held") {
		t.Fatal("the reference to the claim whose deletion is postponed was removed")
	}
}
