package act_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// A VMI-level hot-plug that the tenant no longer attaches is detached with
// the VMI-level removevolume; the attachment pod goes, an Event is recorded.
func TestApply_vmiOnlyOrphanWithTenantEvidence_detached(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-a")
	s.hotplug(virtapi.VMI, "node-a", "pvc-orphan")
	f := s.plan(policy(), s.tenant(), "node-a", "pvc-orphan")
	if !f.Action.Safe || f.Action.Type != check.VMIRemoveVolume {
		t.Fatalf("want a safe VMIRemoveVolume, got %+v", f.Action)
	}
	r := s.executor(policy(), s.tenant()).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Applied {
		t.Fatalf("want Applied, got %s: %s (%v)", r.Outcome, r.Message, r.Err)
	}
	if vmi := s.vmi("node-a"); vmi == nil || lists(vmi, "pvc-orphan") {
		t.Fatalf("volume still listed after Apply")
	}
	evs := s.events(f.ID)
	if len(evs) != 1 || evs[0].Reason != act.ReasonOrphanDetached || evs[0].InvolvedObject.UID != f.Object.UID {
		t.Fatalf("want one %s Event on the VMI, got %+v", act.ReasonOrphanDetached, evs)
	}
}

// The tenant starts attaching the volume between plan and apply: the live
// re-check sees it and nothing is changed.
func TestApply_tenantWantsVolumeAgainAfterPlan_refused(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-b")
	s.hotplug(virtapi.VMI, "node-b", "pvc-back")
	f := s.plan(policy(), s.tenant(), "node-b", "pvc-back")

	tc, err := clients.New(s.env.Tenants["guest"].Config)
	if err != nil {
		t.Fatal(err)
	}
	pv := fixture.PV("tenant-pv-"+s.ns, "pvc-back")
	va := fixture.VolumeAttachment("va-"+s.ns, s.tenantNodeName("node-b"), pv.Name)
	for _, o := range []client.Object{pv, va} {
		o.SetUID("")
		if err := tc.Create(s.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = tc.Delete(s.ctx, va); _ = tc.Delete(s.ctx, pv) })

	r := s.executor(policy(), s.tenant()).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Refused {
		t.Fatalf("want Refused, got %s: %s", r.Outcome, r.Message)
	}
	if vmi := s.vmi("node-b"); !hasHotplug(vmi, "pvc-back") {
		t.Fatal("the volume was touched")
	}
}

// A tenant that cannot be reached at apply time is unknown evidence, which
// never counts as "not wanted".
func TestApply_tenantUnreachableAtApply_refused(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-c")
	s.hotplug(virtapi.VMI, "node-c", "pvc-c")
	f := s.plan(policy(), s.tenant(), "node-c", "pvc-c")
	dead := rest.CopyConfig(s.env.Tenants["guest"].Config)
	dead.Host = "https://127.0.0.1:1"
	o := observe.Options{TenantTimeout: 2 * time.Second, Tenants: []observe.TenantSource{{Name: "guest", Namespace: s.ns, Config: dead}}}
	r := s.executor(policy(), o).Apply(s.ctx, f, act.Evidence{})
	s.refusedUntouched(r, check.TenantUnreachable, "node-c", "pvc-c")
}

// With the HotplugVolumes gate switched off after planning, the re-check
// blocks the VMI-level call.
func TestApply_gateOffAtApply_refused(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-d")
	s.hotplug(virtapi.VMI, "node-d", "pvc-d")
	f := s.plan(policy(), s.tenant(), "node-d", "pvc-d")
	// Re-enable the gates for the tests that follow, whatever happens here.
	t.Cleanup(func() {
		s.gates(kubevirtv1HotplugVolumes)
		_ = s.env.Emulator.SetDisabledFeatureGates(s.ctx)
	})
	// Both hot-plug gates off: with DeclarativeHotplugVolumes still on, the
	// (emulated) virt-controller would itself drop VMI-only hot-plugs.
	if err := s.env.Emulator.SetDisabledFeatureGates(s.ctx, "DeclarativeHotplugVolumes"); err != nil {
		t.Fatal(err)
	}
	s.gates()
	r := s.executor(policy(), s.tenant()).Apply(s.ctx, f, act.Evidence{})
	s.refusedUntouched(r, check.HotplugGateDisabled, "node-d", "pvc-d")
}

// A migration that starts after planning: the re-check reads it from the
// VMI before acting and holds the action as Migrating.
func TestApply_migrationStartsAfterPlan_refused(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-e")
	s.hotplug(virtapi.VMI, "node-e", "pvc-e")
	f := s.plan(policy(), s.tenant(), "node-e", "pvc-e")
	s.create(&kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "mig-e"},
		Spec:       kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: "node-e"},
	})
	s.waitVMI("node-e", "migration started", func(vmi *kubevirtv1.VirtualMachineInstance) bool {
		v := snapshot.VMIOf(vmi)
		return check.IsMigrating(&v)
	})
	r := s.executor(policy(), s.tenant()).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Migrating || r.Cause != act.MigrationInProgress || !strings.Contains(r.Message, string(check.VMIMigrating)) {
		t.Fatalf("want Migrating by %s, got %s/%s: %s", check.VMIMigrating, r.Outcome, r.Cause, r.Message)
	}
	if !hasHotplug(s.vmi("node-e"), "pvc-e") {
		t.Fatal("the volume was touched")
	}
}

// A blocked finding is never acted on, whatever the cluster would allow.
func TestApply_blockedFinding_refusedWithoutCalls(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-g")
	s.hotplug(virtapi.VMI, "node-g", "pvc-g")
	f := s.plan(policy(), observe.Options{}, "node-g", "pvc-g") // no tenant: VMI-only, info
	if f.Action.Safe || f.Action.BlockedBy != check.VMIOnlyHotplug {
		t.Fatalf("want blocked by %s, got %+v", check.VMIOnlyHotplug, f.Action)
	}
	r := s.executor(policy(), observe.Options{}).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Refused {
		t.Fatalf("want Refused, got %s", r.Outcome)
	}
	if !hasHotplug(s.vmi("node-g"), "pvc-g") {
		t.Fatal("the volume was touched")
	}
}

// With the operator's opt-in, a persisted volume the tenant no longer wants is
// removed at VM level: it leaves the VM spec and the VMI.
func TestApply_tenantAuthoritative_vmLevelRemoval(t *testing.T) {
	s := newScene(t)
	vm := s.runningVM("node-h")
	s.hotplug(virtapi.VM, "node-h", "pvc-h")
	p := policy()
	p.TenantAuthoritative = true
	f := s.plan(p, s.tenant(), "node-h", "pvc-h")
	if !f.Action.Safe || f.Action.Type != check.VMRemoveVolume {
		t.Fatalf("want a safe VMRemoveVolume, got %+v", f.Action)
	}
	r := s.executor(p, s.tenant()).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Applied {
		t.Fatalf("want Applied, got %s: %s (%v)", r.Outcome, r.Message, r.Err)
	}
	var fresh kubevirtv1.VirtualMachine
	if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(vm), &fresh); err != nil {
		t.Fatal(err)
	}
	for _, v := range fresh.Spec.Template.Spec.Volumes {
		if v.Name == "pvc-h" {
			t.Fatal("volume still in the VM spec")
		}
	}
}

// Without the opt-in, the same persisted volume is wanted by the VM spec: no
// finding at all.
func TestPlan_volumeInVMSpec_noFinding(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-i")
	s.hotplug(virtapi.VM, "node-i", "pvc-i")
	o := s.tenant()
	o.Namespace = s.ns
	snap, err := observe.Observe(s.ctx, s.c, o)
	if err != nil {
		t.Fatal(err)
	}
	if fs := check.Run(snap, policy(), time.Now()); len(fs) != 0 {
		t.Fatalf("want no findings, got %+v", fs)
	}
}
