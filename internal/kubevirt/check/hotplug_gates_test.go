package check

import (
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// kv is a deployed KubeVirt of version with the given gates listed.
func kv(version string, enabled, disabled []string) snapshot.FeatureGates {
	return snapshot.FeatureGates{Known: true, KubeVirtVersion: version, Phase: "Deployed", Enabled: enabled, Disabled: disabled}
}

// The decision per KubeVirt version × gate set × ownership, for a hot-plug
// volume no tenant attaches (so it would be actionable where the API
// allows it). The oracle is KubeVirt's:
//   - gates per release: v1.7.0 featuregate/active.go:166,184 (both
//     Alpha); v1.9.0 active.go:139,316 (Declarative Beta), inactive.go:
//     165,230 (HotplugVolumes deprecated, on only if listed);
//   - the VMI route: standalone under either gate, VM-owned only with
//     HotplugVolumes (pkg/virt-api/rest/volumes.go:63-65,220-222);
//   - declarative sync with Declarative on and HotplugVolumes off removes
//     VMI-only hot-plugs of VM-owned VMIs (pkg/virt-controller/watch/vm/
//     vm.go:3568-3575; pkg/storage/hotplug/hotplug.go:95-120);
//   - a VMI whose controller owner is gone is deleted by the garbage
//     collector.
func TestOrphanHotplugVolume_versionGatesOwnership(t *testing.T) {
	const hp, decl = snapshot.HotplugVolumesGate, snapshot.DeclarativeHotplugVolumesGate
	vm := f.VM("a", f.Running())
	tenant := f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"))
	owned := f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"))
	standalone := f.VMI("a", f.WithHotplug("v1"))
	declSync := blocked(drift.SeverityInfo, drift.None, DeclarativeSync)
	gateOff := blocked(drift.SeverityWarning, VMIRemoveVolume, HotplugGateDisabled)
	gone := blocked(drift.SeverityInfo, drift.None, OwnerGone)
	for _, c := range []struct {
		name  string
		gates snapshot.FeatureGates
		items []any
		want  *outcome
	}{
		{"v1.9 defaults, VM-owned", kv("v1.9.0", nil, nil), []any{vm, owned}, declSync},
		{"v1.9 HotplugVolumes listed, VM-owned", kv("v1.9.0", []string{hp}, nil), []any{vm, owned}, safe(VMIRemoveVolume)},
		{"v1.9 Declarative disabled, VM-owned", kv("v1.9.0", nil, []string{decl}), []any{vm, owned}, gateOff},
		{"v1.9 HotplugVolumes listed but no status.phase, VM-owned", snapshot.FeatureGates{Known: true, KubeVirtVersion: "v1.9.0", Enabled: []string{hp}}, []any{vm, owned}, declSync},
		{"v1.7 nothing listed, VM-owned", kv("v1.7.0", nil, nil), []any{vm, owned}, gateOff},
		{"v1.7 HotplugVolumes listed, VM-owned", kv("v1.7.0", []string{hp}, nil), []any{vm, owned}, safe(VMIRemoveVolume)},
		{"v1.7 Declarative listed, VM-owned", kv("v1.7.0", []string{decl}, nil), []any{vm, owned}, declSync},
		{"v1.7 both listed, VM-owned", kv("v1.7.0", []string{hp, decl}, nil), []any{vm, owned}, safe(VMIRemoveVolume)},
		{"v1.9 defaults, standalone", kv("v1.9.0", nil, nil), []any{standalone}, safe(VMIRemoveVolume)},
		{"v1.9 Declarative disabled, standalone", kv("v1.9.0", nil, []string{decl}), []any{standalone}, gateOff},
		{"v1.7 nothing listed, standalone", kv("v1.7.0", nil, nil), []any{standalone}, gateOff},
		{"v1.7 Declarative listed, standalone", kv("v1.7.0", []string{decl}, nil), []any{standalone}, safe(VMIRemoveVolume)},
		{"v1.9 defaults, VM gone", kv("v1.9.0", nil, nil), []any{owned}, gone},
		{"v1.9 HotplugVolumes listed, VM gone", kv("v1.9.0", []string{hp}, nil), []any{owned}, gone},
		{"v1.7 HotplugVolumes listed, VM gone", kv("v1.7.0", []string{hp}, nil), []any{owned}, gone},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := Run(f.Snapshot(append(c.items, tenant, c.gates)...), DefaultPolicy(), now)
			assertOutcome(t, only(fs, OrphanHotplugVolume, "a", "v1"), c.want)
		})
	}
}

// Under declarative sync, what tether can read of why virt-controller has
// not removed a VMI-only hot-plug is the evidence, and it makes the
// finding a warning; never an action.
func TestOrphanHotplugVolume_declarativeDiagnosis(t *testing.T) {
	migration := kubevirtv1.UpdateVolumesStrategyMigration
	vmWith := func(change func(*kubevirtv1.VirtualMachine)) *kubevirtv1.VirtualMachine {
		vm := f.VM("a", f.Running())
		change(vm)
		return vm
	}
	migrating := vmWith(func(vm *kubevirtv1.VirtualMachine) { vm.Spec.UpdateVolumesStrategy = &migration })
	withDV := vmWith(func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: f.DataVolume("root").ObjectMeta}}
	})
	failing := vmWith(func(vm *kubevirtv1.VirtualMachine) {
		vm.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineFailure, Status: corev1.ConditionTrue,
			Reason: "HotPlugVolumeError", Message: "admission webhook denied"}}
	})
	plain := f.VM("a", f.Running())
	for _, c := range []struct {
		name  string
		items []any
		want  *outcome
	}{
		// hotplug.go:38-41.
		{"updateVolumesStrategy Migration", []any{migrating, f.VMI("a", f.OwnedBy(migrating), f.WithHotplug("v1"))},
			blocked(drift.SeverityWarning, drift.None, DeclarativeSync, "updateVolumesStrategy Migration")},
		// vm.go:3284-3295.
		{"dataVolumeTemplate not ready", []any{withDV, f.DataVolume("root", f.DVPhase(cdiv1.ImportInProgress)), f.VMI("a", f.OwnedBy(withDV), f.WithHotplug("v1"))},
			blocked(drift.SeverityWarning, drift.None, DeclarativeSync, "DataVolume default/root", "ImportInProgress")},
		// vm.go:120: a VM sync error.
		{"VM sync failure condition", []any{failing, f.VMI("a", f.OwnedBy(failing), f.WithHotplug("v1"))},
			blocked(drift.SeverityWarning, drift.None, DeclarativeSync, "HotPlugVolumeError")},
		// hotplug.go:52-54.
		{"VMI not running", []any{plain, f.VMI("a", f.OwnedBy(plain), f.WithHotplug("v1"), f.Phase(kubevirtv1.Scheduled))},
			blocked(drift.SeverityWarning, drift.None, VMINotRunning, "phase is Scheduled")},
		// watch/vmi/storage.go:316-352: the spec lost it, the status keeps it.
		{"VMI spec no longer lists it", []any{plain, f.VMI("a", f.OwnedBy(plain), f.WithHotplug("v1", f.StatusOnly()))},
			blocked(drift.SeverityWarning, drift.None, DetachInProgress, "virt-handler on node")},
		{"nothing to see", []any{plain, f.VMI("a", f.OwnedBy(plain), f.WithHotplug("v1"))}, blocked(drift.SeverityInfo, drift.None, DeclarativeSync)},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := Run(f.Snapshot(append(c.items, f.Gates())...), DefaultPolicy(), now)
			got := only(fs, OrphanHotplugVolume, "a", "v1")
			assertOutcome(t, got, c.want)
			if len(got) == 1 && !strings.Contains(got[0].Action.Remedy, "no API call can remove it") && got[0].Action.BlockedBy == DeclarativeSync {
				t.Errorf("remedy = %q", got[0].Action.Remedy)
			}
		})
	}
}

// The remedy prints the command that works on the version: virtctl 1.9
// ignores --persist and always tries the VM route first
// (pkg/virtctl/vm/remove_volume.go:49,73-101), so a VMI-level detach is a
// raw PUT there; before 1.9 virtctl without --persist is the VMI route and
// with --persist the VM route.
func TestRemoveCmd_perVersion(t *testing.T) {
	vm := f.VM("a", f.Running())
	sub := &subject{vmi: ownVMI(f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"))), vmiFacts: vmiFacts{own: Ownership{VM: ownVM(vm)}}}
	sub.status = &sub.vmi.Status.VolumeStatus[0]
	raw := `echo '{"name":"v1","dryRun":["All"]}' | kubectl replace --raw /apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/a/removevolume -f -`
	for _, c := range []struct {
		gates  snapshot.FeatureGates
		action drift.ActionType
		prefix string
	}{
		{kv("v1.9.0", nil, nil), VMIRemoveVolume, raw},
		{snapshot.FeatureGates{}, VMIRemoveVolume, raw},
		{kv("v1.7.0", nil, nil), VMIRemoveVolume, "virtctl removevolume a -n default --volume-name=v1 --dry-run && virtctl removevolume a -n default --volume-name=v1;"},
		{kv("v1.9.0", nil, nil), VMRemoveVolume, "virtctl removevolume a -n default --volume-name=v1 --dry-run && virtctl removevolume a -n default --volume-name=v1;"},
		{kv("v1.7.0", nil, nil), VMRemoveVolume, "virtctl removevolume a -n default --volume-name=v1 --persist --dry-run && "},
	} {
		if got := removeCmd(sub, c.action, c.gates); !strings.HasPrefix(got, c.prefix) {
			t.Errorf("%s %s: got %q, want it to start with %q", c.gates.KubeVirtVersion, c.action, got, c.prefix)
		}
	}
}

// The evidence that states the gates is the same text for every finding of
// a pass, and is held once: at 100,000 VMIs an audit holds 200,000 such
// findings.
func TestGateEvidenceIsOneStringPerPass(t *testing.T) {
	vm := f.VM("a", f.Running())
	vmi := f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"), f.WithHotplug("v2"))
	fs := Run(f.Snapshot(vm, vmi, kv("v1.9.0", nil, nil)), DefaultPolicy(), now)
	var texts []string
	for _, fd := range fs {
		for _, e := range fd.Evidence {
			if strings.HasPrefix(e, "virt-controller syncs hot-plugs") {
				texts = append(texts, e)
			}
		}
	}
	if len(texts) != 2 {
		t.Fatalf("want the gates stated in the 2 findings, got %d: %v", len(texts), fs)
	}
	if unsafe.StringData(texts[0]) != unsafe.StringData(texts[1]) {
		t.Errorf("the gates' evidence is two copies of %q, want one string", texts[0])
	}
}

// A remedy that names only the VMI and its VM is held once for the VMI's
// volumes held for the same reason; one that names the volume is not
// shared.
func TestVMIRemedyIsOneStringPerVMI(t *testing.T) {
	vm := f.VM("a", f.Running())
	vmi := f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"), f.WithHotplug("v2"))
	p := DefaultPolicy()
	p.Checks = []string{OrphanHotplugVolume}
	fs := Run(f.Snapshot(vm, vmi, kv("v1.9.0", nil, nil)), p, now)
	if len(fs) != 2 || fs[0].Action.BlockedBy != DeclarativeSync || fs[1].Action.BlockedBy != DeclarativeSync {
		t.Fatalf("want 2 findings held by %s, got %d", DeclarativeSync, len(fs))
	}
	if fs[0].Action.Remedy != fs[1].Action.Remedy {
		t.Fatalf("the remedies differ: %q, %q", fs[0].Action.Remedy, fs[1].Action.Remedy)
	}
	if unsafe.StringData(fs[0].Action.Remedy) != unsafe.StringData(fs[1].Action.Remedy) {
		t.Errorf("the VMI's remedy is two copies of %q, want one string", fs[0].Action.Remedy)
	}
	standalone := f.VMI("a", f.WithHotplug("v1"), f.WithHotplug("v2"))
	tenant := f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1", "v2"))
	fs = Run(f.Snapshot(standalone, tenant, kv("v1.9.0", nil, nil)), p, now)
	if len(fs) != 2 || fs[0].Action.Remedy == fs[1].Action.Remedy {
		t.Errorf("want 2 findings whose remedies name their volumes, got %d", len(fs))
	}
}
