package check

import (
	"strings"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// The oracle of this table is KubeVirt v1.9.0's declarative hot-plug sync:
// with DeclarativeHotplugVolumes on and HotplugVolumes off
// (pkg/virt-controller/watch/vm/vm.go:3568-3575), virt-controller patches
// a running VM-owned VMI's spec on every VM sync, unless the VM's
// updateVolumesStrategy is Migration (pkg/storage/hotplug/hotplug.go:37-49):
// each VMI volume whose claim or DataVolume source is hotpluggable
// (pkg/storage/types/volume.go:33-46) goes when the VM template lacks its
// name, or lists the name with another volume (hotplug.go:95-117); a VM
// template volume the VMI lacks is added. Volumes that are not hotpluggable
// are left alone, and so are standalone VMIs (no VM to sync from).
func TestUnpersistedHotplug(t *testing.T) {
	hotplugOn := f.Gates("HotplugVolumes") // HotplugVolumes listed: no declarative sync
	declarative := f.Gates()               // v1.9 defaults: the declarative sync is in effect
	vmi := func(opts ...f.Option) func(vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstance {
		return func(vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstance {
			return f.VMI("vm-a", append([]f.Option{f.OwnedBy(vm)}, opts...)...)
		}
	}
	migration := kubevirtv1.UpdateVolumesStrategyMigration
	cases := []struct {
		name   string
		vm     []f.Option
		vmEdit func(*kubevirtv1.VirtualMachine)
		vmi    func(*kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstance
		gates  snapshot.FeatureGates
		extra  []any
		// persist: the operator asked for the hot-plugs to be persisted.
		persist bool
		want    *outcome
	}{
		{name: "VMI-only hot-plug, HotplugVolumes on -> warning, kept by the gate, made by hand",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1")), gates: hotplugOn,
			want: &outcome{severity: drift.SeverityWarning, action: PersistHotplug, blocked: KeptByHotplugVolumesGate,
				evidence: []string{`has hot-plug "pvc-1" of claim pvc-1`, `spec does not list volume "pvc-1"`, "made by hand through the VMI route", "HotplugVolumes on"}}},
		{name: "VMI-only hot-plug of a DataVolume -> warning",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("dv-1", f.FromDataVolume("dv-1"))), gates: hotplugOn,
			want: &outcome{severity: drift.SeverityWarning, action: PersistHotplug, blocked: KeptByHotplugVolumesGate, evidence: []string{"DataVolume dv-1"}}},
		{name: "VMI-only hot-plug under the declarative sync -> warning DeclarativeSync (being taken now)",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1")), gates: declarative,
			want: &outcome{severity: drift.SeverityWarning, action: PersistHotplug, blocked: DeclarativeSync}},
		{name: "the declarative sync skips a VM with updateVolumesStrategy Migration -> warning KeptByUpdateVolumesStrategy",
			vm: []f.Option{f.Running()}, vmEdit: func(vm *kubevirtv1.VirtualMachine) { vm.Spec.UpdateVolumesStrategy = &migration },
			vmi: vmi(f.WithHotplug("pvc-1")), gates: declarative,
			want: &outcome{severity: drift.SeverityWarning, action: PersistHotplug, blocked: KeptByUpdateVolumesStrategy, evidence: []string{}}},
		{name: "the VM spec lists it as the VMI has it -> no finding",
			vm: []f.Option{f.Running(), f.WithVolume("pvc-1", f.PVC("pvc-1"), f.Hotpluggable())}, vmi: vmi(f.WithHotplug("pvc-1")), gates: hotplugOn,
			want: noFinding()},
		{name: "the VM spec lists the name with another claim -> warning (unplugged and replaced)",
			vm: []f.Option{f.Running(), f.WithVolume("pvc-1", f.PVC("pvc-other"), f.Hotpluggable())}, vmi: vmi(f.WithHotplug("pvc-1")), gates: declarative,
			want: &outcome{severity: drift.SeverityWarning, action: PersistHotplug, blocked: DeclarativeSync, evidence: []string{"with another source than the VMI's"}}},
		{name: "a pending addvolume request of the VM adds it to the spec -> no finding",
			vm: []f.Option{f.Running(), f.PendingAdd("pvc-1", f.PVC("pvc-1"))}, vmi: vmi(f.WithHotplug("pvc-1")), gates: hotplugOn,
			want: noFinding()},
		{name: "a standalone VMI (nothing to sync from) -> no finding",
			vmi: func(*kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstance {
				return f.VMI("vm-a", f.WithHotplug("pvc-1"))
			}, gates: declarative,
			want: noFinding()},
		{name: "a VMI that is not Running (the sync patches running VMIs only) -> no finding",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1"), f.Phase(kubevirtv1.Scheduling)), gates: declarative,
			want: noFinding()},
		{name: "a volume the VMI has that is not hotpluggable -> no finding (the sync leaves it)",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1", f.NotHotpluggable())), gates: declarative,
			want: noFinding()},
		{name: "gates unknown -> info HotplugGateUnknown",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1")), gates: f.GatesUnknown(),
			want: &outcome{severity: drift.SeverityInfo, action: PersistHotplug, blocked: HotplugGateUnknown}},
		{name: "a tenant's CSI driver attaches it to this VM's node -> says the driver made it; held TenantDriverHotplug",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1")), gates: hotplugOn,
			extra: []any{f.Tenant("t1", f.ForNamespace(f.Namespace), f.Nodes("vm-a"), f.Attaches("vm-a", "pvc-1"))},
			want:  &outcome{severity: drift.SeverityWarning, action: PersistHotplug, blocked: TenantDriverHotplug, evidence: []string{`made by tenant "t1"'s CSI driver`, "would outlive that detach"}}},
		{name: "persisting requested, a tenant's driver made it -> still held TenantDriverHotplug (never persisted)",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1")), gates: hotplugOn, persist: true,
			extra: []any{f.Tenant("t1", f.ForNamespace(f.Namespace), f.Nodes("vm-a"), f.Attaches("vm-a", "pvc-1"))},
			want:  &outcome{severity: drift.SeverityWarning, action: PersistHotplug, blocked: TenantDriverHotplug}},
		{name: "the tenants prove nobody wants it (an orphan) -> no finding: its loss loses nothing",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1")), gates: hotplugOn,
			extra: []any{f.Tenant("t1", f.ForNamespace(f.Namespace), f.Nodes("vm-a"), f.Volumes("pvc-1"))},
			want:  noFinding()},
		{name: "tenant evidence incomplete (unreachable) -> reported: never \"not wanted\" on doubt",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1")), gates: hotplugOn,
			extra: []any{f.Tenant("t1", f.ForNamespace(f.Namespace), f.Unreachable("timeout"))},
			want:  &outcome{severity: drift.SeverityWarning, action: PersistHotplug, blocked: KeptByHotplugVolumesGate, evidence: []string{"cannot be told"}}},
		{name: "persisting requested -> safe PersistHotplug (what kept it stays a fact)",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1")), gates: hotplugOn, persist: true,
			want: &outcome{severity: drift.SeverityWarning, action: PersistHotplug, safe: true, evidence: []string{"HotplugVolumes is on"}}},
		{name: "persisting requested under the declarative sync -> safe (the sync then keeps it)",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1")), gates: declarative, persist: true,
			want: &outcome{severity: drift.SeverityWarning, action: PersistHotplug, safe: true}},
		{name: "persisting requested, VMI migrating -> held VMIMigrating",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1"), f.Migrating()), gates: hotplugOn, persist: true,
			want: &outcome{severity: drift.SeverityWarning, action: PersistHotplug, blocked: VMIMigrating}},
		{name: "persisting requested, gates unknown -> held HotplugGateUnknown",
			vm: []f.Option{f.Running()}, vmi: vmi(f.WithHotplug("pvc-1")), gates: f.GatesUnknown(), persist: true,
			want: &outcome{severity: drift.SeverityInfo, action: PersistHotplug, blocked: HotplugGateUnknown}},
		{name: "persisting requested, in the VM spec already -> no finding",
			vm: []f.Option{f.Running(), f.WithVolume("pvc-1", f.PVC("pvc-1"), f.Hotpluggable())}, vmi: vmi(f.WithHotplug("pvc-1")), gates: hotplugOn, persist: true,
			want: noFinding()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var vm *kubevirtv1.VirtualMachine
			items := []any{c.gates}
			if c.vm != nil {
				vm = f.VM("vm-a", c.vm...)
				if c.vmEdit != nil {
					c.vmEdit(vm)
				}
				items = append(items, vm)
			}
			items = append(items, c.vmi(vm))
			items = append(items, c.extra...)
			p := DefaultPolicy()
			p.Checks = []string{UnpersistedHotplug}
			p.PersistHotplugs = c.persist
			fs := Run(f.Snapshot(items...), p, now)
			for _, fd := range fs {
				assertWellFormed(t, fd)
			}
			assertOutcome(t, only(fs, UnpersistedHotplug, "vm-a", ""), c.want)
		})
	}
}

// The remedy's patch, applied to the VM as a JSON patch would, makes the
// VM spec list the volume exactly as the VMI has it: the check then finds
// nothing (what the declarative sync compares, it compares equal).
func TestUnpersistedHotplug_remedyPatchPersistsIt(t *testing.T) {
	vm := f.VM("vm-a", f.Running())
	vmi := f.VMI("vm-a", f.OwnedBy(vm), f.WithHotplug("pvc-1"))
	p := DefaultPolicy()
	p.Checks = []string{UnpersistedHotplug}
	fs := Run(f.Snapshot(f.Gates("HotplugVolumes"), vm, vmi), p, now)
	if len(fs) != 1 {
		t.Fatalf("want one finding, got %+v", fs)
	}
	r := fs[0].Action.Remedy
	if !strings.Contains(r, `"op":"add","path":"/spec/template/spec/volumes/-"`) || !strings.Contains(r, `"hotpluggable":true`) {
		t.Fatalf("remedy does not add the volume as the VMI has it: %s", r)
	}
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, vmi.Spec.Volumes[len(vmi.Spec.Volumes)-1])
	if fs := Run(f.Snapshot(f.Gates("HotplugVolumes"), vm, vmi), p, now); len(fs) != 0 {
		t.Fatalf("persisted as the VMI has it, still reported: %+v", fs)
	}
}
