package act_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/emulator"
)

// virt-handler never unmounts (the emulator leaves the VMI's status alone):
// the removevolume is accepted and the volume leaves the VMI spec, but its
// status entry stays Ready. The wait is bounded and says which node's
// virt-handler has not unmounted what, instead of waiting forever.
func TestApply_handlerNeverUnmounts_boundedUnmountStuck(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-h")
	s.hotplug(virtapi.VMI, "node-h", "pvc-h")
	vmi := s.vmi("node-h")
	if vmi.Annotations == nil {
		vmi.Annotations = map[string]string{}
	}
	vmi.Annotations[emulator.PausedAnnotation] = "true"
	if err := s.c.Update(s.ctx, vmi); err != nil {
		t.Fatal(err)
	}
	f, ex := s.plan(policy(), s.tenant(), "node-h", "pvc-h"), s.executor(policy(), s.tenant())
	ex.WaitTimeout = 2 * time.Second
	started := time.Now()
	r := ex.Apply(s.ctx, f, act.Evidence{})
	if took := time.Since(started); took > 20*time.Second {
		t.Errorf("the wait took %s, want it bounded by about %s", took, ex.WaitTimeout)
	}
	if r.Outcome != drift.Failed || r.Cause != act.UnmountStuck || !strings.Contains(r.Message, `has not unmounted "pvc-h" after 2s`) ||
		!strings.Contains(r.Message, "virt-handler on node "+vmi.Status.NodeName) {
		t.Fatalf("want Failed/UnmountStuck naming node %s, got %s/%s: %s", vmi.Status.NodeName, r.Outcome, r.Cause, r.Message)
	}
}
