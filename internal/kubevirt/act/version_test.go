package act_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/emulator"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// kubeVirt makes the emulator report version (status.observedKubeVirtVersion,
// "" for none) and, with ignoreDryRun, play virt-api before v0.49, which
// dropped the unknown dryRun field and really made the change. The
// defaults come back when the test ends.
func (s *scene) kubeVirt(version string, ignoreDryRun bool) {
	s.t.Helper()
	s.t.Cleanup(func() {
		_ = s.env.Emulator.SetIgnoreDryRun(s.ctx, false)
		_ = s.env.Emulator.SetKubeVirtVersion(s.ctx, emulator.DefaultKubeVirtVersion)
	})
	if err := s.env.Emulator.SetKubeVirtVersion(s.ctx, version); err != nil {
		s.t.Fatal(err)
	}
	if err := s.env.Emulator.SetIgnoreDryRun(s.ctx, ignoreDryRun); err != nil {
		s.t.Fatal(err)
	}
}

// untouched fails the test if still ever reports false within d: a
// "dry run" that was really carried out needs a moment to show.
func (s *scene) untouched(d time.Duration, what string, still func() bool) {
	s.t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if !still() {
			s.t.Fatalf("%s: a write happened", what)
		}
		if time.Now().After(deadline) {
			return
		}
	}
}

// refusedForVersion asserts a refusal made before any call, naming the
// version found and the remedy.
func refusedForVersion(t *testing.T, r drift.Result, found string) {
	t.Helper()
	if r.Outcome != drift.Refused {
		t.Fatalf("want Refused, got %s: %s (%v)", r.Outcome, r.Message, r.Err)
	}
	for _, want := range []string{found, "v0.49", "dryRun", "virtctl removevolume"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("refusal does not name %q: %s", want, r.Message)
		}
	}
}

// KubeVirt v0.48 does not honour dryRun on removevolume: a safe orphan is
// refused before the dry run, which would have removed the volume.
func TestApply_orphanOnKubeVirtWithoutDryRun_refusedBeforeDryRun(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-v")
	s.hotplug(virtapi.VMI, "node-v", "pvc-v")
	f := s.plan(policy(), s.tenant(), "node-v", "pvc-v")
	if !f.Action.Safe || f.Action.Type != check.VMIRemoveVolume {
		t.Fatalf("want a safe VMIRemoveVolume, got %+v", f.Action)
	}
	s.kubeVirt("v0.48.0", true)
	r := s.executor(policy(), s.tenant()).Apply(s.ctx, f, act.Evidence{})
	refusedForVersion(t, r, "v0.48.0")
	s.untouched(time.Second, "VMI status", func() bool { return hasHotplug(s.vmi("node-v"), "pvc-v") })
}

// The same for a safe dangling reference of a stopped VM: the VM spec keeps it.
func TestApply_danglingOnKubeVirtWithoutDryRun_refusedBeforeDryRun(t *testing.T) {
	s := newScene(t)
	f := s.stoppedVMDanglingPlan("vm-v")
	if !f.Action.Safe || f.Action.Type != check.VMRemoveVolume {
		t.Fatalf("want a safe VMRemoveVolume, got %+v\nevidence: %q", f.Action, f.Evidence)
	}
	s.kubeVirt("v0.48.0", true)
	r := s.executor(danglingPolicy(), observe.Options{}).Apply(s.ctx, f, act.Evidence{})
	refusedForVersion(t, r, "v0.48.0")
	s.untouched(time.Second, "VM spec", func() bool {
		vm := s.getVM("vm-v")
		return specLists(vm, "pvc-gone") && len(vm.Status.VolumeRequests) == 0
	})
}

// A KubeVirt object that reports no version: which gates are in effect is
// unknown, so the VMI-level call on a VM-owned VMI is held by the live
// re-check; nothing is done.
func TestApply_kubeVirtVersionUnknown_refused(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-u")
	s.hotplug(virtapi.VMI, "node-u", "pvc-u")
	f := s.plan(policy(), s.tenant(), "node-u", "pvc-u")
	s.kubeVirt("", false)
	r := s.executor(policy(), s.tenant()).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Refused || !strings.Contains(r.Message, string(check.HotplugGateUnknown)) {
		t.Fatalf("want Refused by %s, got %s: %s", check.HotplugGateUnknown, r.Outcome, r.Message)
	}
	s.untouched(500*time.Millisecond, "VMI status", func() bool { return hasHotplug(s.vmi("node-u"), "pvc-u") })
}

// The VM-level call, whose gates need no version, is refused before its dry
// run when the version is unknown: whether dryRun is honoured is unknown.
func TestApply_kubeVirtVersionUnknown_vmLevelRefusedBeforeDryRun(t *testing.T) {
	s := newScene(t)
	f := s.stoppedVMDanglingPlan("vm-u")
	s.kubeVirt("", false)
	r := s.executor(danglingPolicy(), observe.Options{}).Apply(s.ctx, f, act.Evidence{})
	refusedForVersion(t, r, "unknown")
	s.untouched(500*time.Millisecond, "VM spec", func() bool { return specLists(s.getVM("vm-u"), "pvc-gone") })
}

// stoppedVMDanglingPlan creates a stopped VM with a boot disk and a
// hot-plugged claim "pvc-gone", deletes the claim, and plans its
// DanglingVolumeReference finding.
func (s *scene) stoppedVMDanglingPlan(vm string) drift.Finding {
	s.t.Helper()
	s.create(fixture.PVC("root"), fixture.PVC("pvc-gone"),
		fixture.VM(vm, fixture.WithVolume("root", fixture.PVC("root")), fixture.WithVolume("pvc-gone", fixture.PVC("pvc-gone"), fixture.Hotpluggable())))
	s.deletePVC("pvc-gone", true)
	return s.danglingPlan(danglingPolicy(), "VirtualMachine", vm, "pvc-gone")
}
