package check

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

type volumeCase struct {
	name   string
	items  []any
	policy func(*Policy)
	want   *outcome
}

func allowVMIOnly(p *Policy)        { p.AllowVMIOnlyDetach = true }
func tenantAuthoritative(p *Policy) { p.TenantAuthoritative = true }

func runVolumeCases(t *testing.T, cases []volumeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			if tc.policy != nil {
				tc.policy(&p)
			}
			fs := Run(f.Snapshot(tc.items...), p, now)
			assertOutcome(t, only(fs, OrphanHotplugVolume, "a", "v1"), tc.want)
		})
	}
}

// TestOrphanHotplugVolumeWanted: every way a volume can be wanted gives no finding.
func TestOrphanHotplugVolumeWanted(t *testing.T) {
	vm := f.VM("a", f.Running())
	vmSpec := f.VM("a", f.Running(), f.WithVolume("v1", f.PVC("v1"), f.Hotpluggable()))
	vmAdd := f.VM("a", f.Running(), f.PendingAdd("v1", f.PVC("v1")))
	foreign := f.VMI("a", f.Owner("virtualization.example.com/v1", "VirtualMachine", "a", "x", true), f.WithHotplug("v1"))
	gates := hotplugGate()
	runVolumeCases(t, []volumeCase{
		{"volume in vm spec -> no finding", []any{vmSpec, f.VMI("a", f.OwnedBy(vmSpec), f.WithHotplug("v1")), gates}, nil, noFinding()},
		{"volume in vm spec, tenant does not attach it, tenant not authoritative -> no finding",
			[]any{vmSpec, f.VMI("a", f.OwnedBy(vmSpec), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1")), gates}, nil, noFinding()},
		{"volume in vm spec, tenant authoritative, tenant attaches it -> no finding",
			[]any{vmSpec, f.VMI("a", f.OwnedBy(vmSpec), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "v1")), gates}, tenantAuthoritative, noFinding()},
		{"volume in vm spec, tenant authoritative, tenant unreachable -> no finding",
			[]any{vmSpec, f.VMI("a", f.OwnedBy(vmSpec), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Unreachable("timeout")), gates}, tenantAuthoritative, noFinding()},
		{"volume in vm spec, tenant authoritative, tenant detaching -> no finding",
			[]any{vmSpec, f.VMI("a", f.OwnedBy(vmSpec), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "v1", f.Terminating(now))), gates}, tenantAuthoritative, noFinding()},
		{"pending addvolume request -> no finding", []any{vmAdd, f.VMI("a", f.OwnedBy(vmAdd), f.WithHotplug("v1")), gates}, allowVMIOnly, noFinding()},
		{"vmi-only hotplug, tenant attaches it -> no finding",
			[]any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "v1")), gates}, allowVMIOnly, noFinding()},
		{"vmi-only hotplug, tenant attaches its claim -> no finding",
			[]any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", f.Claim("claim-1"))), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "claim-1")), gates}, allowVMIOnly, noFinding()},
		{"vmi-only hotplug, tenant attaches its datavolume -> no finding",
			[]any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", f.FromDataVolume("dv-1"))), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "dv-1")), gates}, allowVMIOnly, noFinding()},
		{"vmi-only hotplug, tenant attaches it through an inline spec -> no finding",
			[]any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.WithAttachment(f.VolumeAttachment("va-1", "a", "", f.InlineHandle("v1")))), gates}, allowVMIOnly, noFinding()},
		{"vmi-only hotplug, one tenant attaches it, another unreachable -> no finding",
			[]any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), f.Tenant("t0", f.Nodes("a", "b", "vm-a"), f.Unreachable("x")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "v1")), gates}, allowVMIOnly, noFinding()},
		{"vm gone, tenant attaches it -> no finding",
			[]any{f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "v1")), gates}, nil, noFinding()},
		{"standalone vmi, no tenant -> no finding", []any{f.VMI("a", f.WithHotplug("v1")), gates}, allowVMIOnly, noFinding()},
		{"standalone vmi, tenant unreachable -> no finding",
			[]any{f.VMI("a", f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Unreachable("x")), gates}, allowVMIOnly, noFinding()},
		{"standalone vmi, tenant attaches it -> no finding",
			[]any{f.VMI("a", f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "v1")), gates}, nil, noFinding()},
		{"standalone vmi, tenant has no node of its name -> no finding",
			[]any{f.VMI("a", f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("b")), gates}, nil, noFinding()},
		{"vm spec volume, tenant authoritative, tenant has no node of the VMI's name -> no finding",
			[]any{vmSpec, f.VMI("a", f.OwnedBy(vmSpec), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("b")), gates}, tenantAuthoritative, noFinding()},
		{"standalone vmi, tenant for another namespace -> no finding",
			[]any{f.VMI("a", f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.ForNamespace("other")), gates}, nil, noFinding()},
		{"vmi controlled by a non-kubevirt VirtualMachine, no tenant -> no finding (standalone)", []any{foreign, gates}, allowVMIOnly, noFinding()},
		{"volume status without hotplugVolume -> no finding",
			[]any{f.VMI("a", f.OwnedBy(vm), f.WithVolume("v1", f.PVC("v1"))), gates}, allowVMIOnly, noFinding()},
	})
}

// TestOrphanHotplugVolumeScope: nothing outside the scope is reported.
func TestOrphanHotplugVolumeScope(t *testing.T) {
	vmi := f.VMI("a", f.Labels("cluster", "c1"), f.WithHotplug("v1")) // VM gone below
	gone := f.VMI("a", f.Owner("kubevirt.io/v1", "VirtualMachine", "a", "uid-gone", true), f.Labels("cluster", "c1"), f.WithHotplug("v1"))
	gates := hotplugGate()
	ownerGone := blocked(drift.SeverityInfo, drift.None, OwnerGone)
	sel := func(s string) func(*Policy) {
		return func(p *Policy) { p.Scope.Selector = labels.SelectorFromSet(labels.Set{"cluster": s}) }
	}
	runVolumeCases(t, []volumeCase{
		{"vm gone, in scope -> info, OwnerGone", []any{gone, gates}, nil, ownerGone},
		{"vm gone, other namespace in scope -> no finding", []any{gone, gates}, func(p *Policy) { p.Scope.Namespaces = []string{"other"} }, noFinding()},
		{"vm gone, namespace in scope -> info, OwnerGone", []any{gone, gates}, func(p *Policy) { p.Scope.Namespaces = []string{"other", "default"} }, ownerGone},
		{"vm gone, selector does not match -> no finding", []any{gone, gates}, sel("c2"), noFinding()},
		{"vm gone, selector matches -> info, OwnerGone", []any{gone, gates}, sel("c1"), ownerGone},
		{"vm gone, volume prefix does not match -> no finding", []any{gone, gates}, func(p *Policy) { p.Scope.VolumePrefix = "pvc-" }, noFinding()},
		{"vm gone, volume prefix matches -> info, OwnerGone", []any{gone, gates}, func(p *Policy) { p.Scope.VolumePrefix = "v" }, ownerGone},
		{"standalone vmi, tenant does not attach it, selector does not match -> no finding",
			[]any{vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1")), gates}, sel("c2"), noFinding()},
	})
}

// TestOrphanHotplugVolumeVMIOnly: a VMI-only hot-plug needs evidence or an opt-in.
func TestOrphanHotplugVolumeVMIOnly(t *testing.T) {
	vm := f.VM("a", f.Running())
	vmi := f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"))
	on, off, unknown := hotplugGate(), bothGatesOff(), f.GatesUnknown()
	vmRemove := f.VM("a", f.Running(), f.PendingRemove("v1"))
	runVolumeCases(t, []volumeCase{
		{"vmi-only hotplug, vm present, no tenant -> info, blocked VMIOnlyHotplug",
			[]any{vm, vmi, on}, nil, blocked(drift.SeverityInfo, VMIRemoveVolume, VMIOnlyHotplug, `VM default/a spec does not list volume "v1"`)},
		{"vmi-only hotplug, no tenant, vmi-only detach allowed, gate on -> warning, safe VMIRemoveVolume", []any{vm, vmi, on}, allowVMIOnly, safe(VMIRemoveVolume)},
		{"vmi-only hotplug, no tenant, vmi-only detach allowed, gate off -> warning, blocked HotplugGateDisabled",
			[]any{vm, vmi, off}, allowVMIOnly, blocked(drift.SeverityWarning, VMIRemoveVolume, HotplugGateDisabled, "without the HotplugVolumes gate")},
		// KubeVirt: listed beats disabled (featuregate/feature-gates.go:91-112).
		{"vmi-only hotplug, no tenant, vmi-only detach allowed, gate listed as enabled and disabled -> warning, safe VMIRemoveVolume",
			[]any{vm, vmi, gatesWith([]string{"HotplugVolumes"}, []string{"HotplugVolumes"})}, allowVMIOnly, safe(VMIRemoveVolume)},
		{"vmi-only hotplug, no tenant, vmi-only detach allowed, gate unknown -> warning, blocked HotplugGateUnknown",
			[]any{vm, vmi, unknown}, allowVMIOnly, blocked(drift.SeverityWarning, VMIRemoveVolume, HotplugGateUnknown)},
		{"vmi-only hotplug, tenant does not attach it, gate on -> warning, safe VMIRemoveVolume", []any{vm, vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1")), on}, nil, safe(VMIRemoveVolume)},
		{"vmi-only hotplug, tenant attaches it to another node -> warning, safe VMIRemoveVolume",
			[]any{vm, vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("b", "v1")), on}, nil, safe(VMIRemoveVolume)},
		{"vmi-only hotplug, tenant attachment from another attacher -> warning, safe VMIRemoveVolume",
			[]any{vm, vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "v1", f.Attacher("ebs.csi.aws.com"))), on}, nil, safe(VMIRemoveVolume)},
		{"vmi-only hotplug, tenant for this namespace does not attach it -> warning, safe",
			[]any{vm, vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.ForNamespace("default")), on}, nil, safe(VMIRemoveVolume)},
		{"vmi-only hotplug, tenant has no node of the VMI's name -> no tenant evidence: info, blocked VMIOnlyHotplug",
			[]any{vm, vmi, f.Tenant("t1", f.Nodes("b")), on}, nil, blocked(drift.SeverityInfo, VMIRemoveVolume, VMIOnlyHotplug)},
		{"vmi-only hotplug, tenant has no nodes at all -> no tenant evidence: info, blocked VMIOnlyHotplug",
			[]any{vm, vmi, f.Tenant("t1"), on}, nil, blocked(drift.SeverityInfo, VMIRemoveVolume, VMIOnlyHotplug)},
		{"vmi-only hotplug, tenant only for another namespace -> info, blocked VMIOnlyHotplug",
			[]any{vm, vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.ForNamespace("other")), on}, nil, blocked(drift.SeverityInfo, VMIRemoveVolume, VMIOnlyHotplug)},
		{"vmi-only hotplug, tenant does not attach it, gate off -> warning, blocked HotplugGateDisabled",
			[]any{vm, vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1")), off}, nil, blocked(drift.SeverityWarning, VMIRemoveVolume, HotplugGateDisabled)},
		{"vmi-only hotplug, tenant unreachable -> info, blocked TenantUnreachable",
			[]any{vm, vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Unreachable("dial tcp: timeout")), on}, nil, blocked(drift.SeverityInfo, VMIRemoveVolume, TenantUnreachable, "dial tcp: timeout")},
		{"vmi-only hotplug, tenant unreachable, vmi-only detach allowed -> info, blocked TenantUnreachable",
			[]any{vm, vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Unreachable("x")), on}, allowVMIOnly, blocked(drift.SeverityInfo, VMIRemoveVolume, TenantUnreachable)},
		{"vmi-only hotplug, one tenant does not attach it, another unreachable -> info, blocked TenantUnreachable",
			[]any{vm, vmi, f.Tenant("t0", f.Nodes("a", "b", "vm-a")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Unreachable("x")), on}, nil, blocked(drift.SeverityInfo, VMIRemoveVolume, TenantUnreachable)},
		{"vmi-only hotplug, tenant attachment with unknown PV on the node -> info, blocked TenantIncomplete",
			[]any{vm, vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.WithAttachment(f.VolumeAttachment("va-x", "a", "pv-missing"))), on}, nil,
			blocked(drift.SeverityInfo, VMIRemoveVolume, TenantIncomplete, `PV "pv-missing"`)},
		{"vmi-only hotplug, tenant attachment being deleted -> info, blocked DetachInProgress",
			[]any{vm, vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "v1", f.Terminating(now))), on}, nil,
			blocked(drift.SeverityInfo, VMIRemoveVolume, DetachInProgress, "is being deleted")},
		{"vmi-only hotplug, pending removevolume request -> warning, blocked RemovalPending",
			[]any{vmRemove, f.VMI("a", f.OwnedBy(vmRemove), f.WithHotplug("v1")), on}, nil, blocked(drift.SeverityWarning, VMIRemoveVolume, RemovalPending)},
		{"vmi-only hotplug, owner ref without uid -> info, blocked VMIOnlyHotplug",
			[]any{vm, f.VMI("a", f.Owner("kubevirt.io/v1", "VirtualMachine", "a", "", true), f.WithHotplug("v1")), on}, nil,
			blocked(drift.SeverityInfo, VMIRemoveVolume, VMIOnlyHotplug)},
		{"vmi-only hotplug, no tenant, migrating -> info, blocked VMIMigrating",
			[]any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"), f.Migrating()), on}, nil, blocked(drift.SeverityInfo, VMIRemoveVolume, VMIMigrating)},
		{"vmi-only hotplug, tenant does not attach it, vm terminating -> warning, blocked VMTerminating",
			[]any{f.VM("a", f.Terminating(now)), vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1")), on}, nil, blocked(drift.SeverityWarning, VMIRemoveVolume, VMTerminating)},
	})
}

// TestOrphanHotplugVolumeVMGone: a VMI whose VM is gone holds orphans.
func TestOrphanHotplugVolumeVMGone(t *testing.T) {
	vm := f.VM("a", f.Running())
	on := hotplugGate()
	recreated := f.VM("a", f.WithUID("new-uid"), f.WithVolume("v1", f.PVC("v1"), f.Hotpluggable()))
	gone := blocked(drift.SeverityInfo, drift.None, OwnerGone)
	runVolumeCases(t, []volumeCase{
		{"vm gone, no tenant, gate on -> info, OwnerGone", []any{f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), on}, nil, gone},
		{"vm gone, gates default -> info, OwnerGone", []any{f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), f.Gates()}, nil, gone},
		{"vm re-created with a new uid listing the volume -> info, OwnerGone",
			[]any{recreated, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), on}, nil, &outcome{severity: drift.SeverityInfo, action: drift.None, blocked: OwnerGone, evidence: []string{"re-created"}}},
		{"vm gone, tenant does not attach it -> info, OwnerGone",
			[]any{f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1")), on}, nil, gone},
		{"vm gone, tenant unreachable -> info, OwnerGone",
			[]any{f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Unreachable("x")), on}, nil, gone},
		{"vm gone, tenant detaching -> info, blocked DetachInProgress",
			[]any{f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "v1", f.Terminating(now))), on}, nil,
			blocked(drift.SeverityInfo, VMIRemoveVolume, DetachInProgress)},
	})
}

// TestOrphanHotplugVolumeStandalone: only reachable tenant evidence orphans a standalone VMI's volume.
func TestOrphanHotplugVolumeStandalone(t *testing.T) {
	vmi := f.VMI("a", f.WithHotplug("v1"))
	runVolumeCases(t, []volumeCase{
		{"standalone vmi, tenant does not attach it, gates unknown -> warning, safe VMIRemoveVolume",
			[]any{vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1")), f.GatesUnknown()}, nil, safe(VMIRemoveVolume)},
		{"standalone vmi, tenant does not attach it, migrating -> warning, blocked VMIMigrating",
			[]any{f.VMI("a", f.WithHotplug("v1"), f.Migrating()), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"))}, nil, blocked(drift.SeverityWarning, VMIRemoveVolume, VMIMigrating)},
		{"standalone vmi, tenant detaching -> info, blocked DetachInProgress",
			[]any{vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "v1", f.Terminating(now)))}, nil, blocked(drift.SeverityInfo, VMIRemoveVolume, DetachInProgress)},
		{"standalone vmi, one tenant does not attach it, another unreachable -> no finding",
			[]any{vmi, f.Tenant("t0", f.Nodes("a", "b", "vm-a")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Unreachable("x"))}, nil, noFinding()},
	})
}

// TestOrphanHotplugVolumeTenantAuthoritative: the VM spec yields only to reachable tenant evidence, by opt-in.
func TestOrphanHotplugVolumeTenantAuthoritative(t *testing.T) {
	vmSpec := f.VM("a", f.Running(), f.WithVolume("v1", f.PVC("v1"), f.Hotpluggable()))
	vmPlain := f.VM("a", f.Running(), f.WithVolume("v1", f.PVC("v1")))
	vmRemove := f.VM("a", f.Running(), f.WithVolume("v1", f.PVC("v1"), f.Hotpluggable()), f.PendingRemove("v1"))
	vmAdd := f.VM("a", f.Running(), f.WithVolume("v1", f.PVC("v1"), f.Hotpluggable()), f.PendingAdd("v1", f.PVC("v1")))
	runVolumeCases(t, []volumeCase{
		{"volume in vm spec, tenant authoritative, tenant does not attach it -> warning, safe VMRemoveVolume",
			[]any{vmSpec, f.VMI("a", f.OwnedBy(vmSpec), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1")), f.GatesUnknown()}, tenantAuthoritative, safe(VMRemoveVolume)},
		{"volume in vm spec not hotpluggable, tenant authoritative, tenant does not attach it -> warning, blocked VolumeNotHotpluggable",
			[]any{vmPlain, f.VMI("a", f.OwnedBy(vmPlain), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"))}, tenantAuthoritative, blocked(drift.SeverityWarning, VMRemoveVolume, VolumeNotHotpluggable)},
		{"volume in vm spec with pending removal, tenant authoritative -> warning, blocked RemovalPending",
			[]any{vmRemove, f.VMI("a", f.OwnedBy(vmRemove), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"))}, tenantAuthoritative, blocked(drift.SeverityWarning, VMRemoveVolume, RemovalPending)},
		{"volume in vm spec with pending addition, tenant authoritative -> warning, blocked AdditionPending",
			[]any{vmAdd, f.VMI("a", f.OwnedBy(vmAdd), f.WithHotplug("v1")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"))}, tenantAuthoritative, blocked(drift.SeverityWarning, VMRemoveVolume, AdditionPending, "pending addvolume")},
	})
}

// TestOrphanHotplugVolumeHolds: every hold blocks an otherwise safe action.
func TestOrphanHotplugVolumeHolds(t *testing.T) {
	// A standalone VMI whose tenant no longer attaches the volume: safe
	// unless held.
	tenant := f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"))
	gone := func(opts ...f.Option) []any {
		return []any{f.VMI("a", append([]f.Option{f.WithHotplug("v1")}, opts...)...), tenant, hotplugGate()}
	}
	hp := func(o ...f.HotplugOption) []any {
		return []any{f.VMI("a", f.WithHotplug("v1", o...)), tenant, hotplugGate()}
	}
	runVolumeCases(t, []volumeCase{
		{"standalone, vmi terminating -> warning, blocked VMITerminating", gone(f.Terminating(now)), nil, blocked(drift.SeverityWarning, VMIRemoveVolume, VMITerminating, "is terminating")},
		{"standalone, vmi migrating -> warning, blocked VMIMigrating", gone(f.Migrating()), nil, blocked(drift.SeverityWarning, VMIRemoveVolume, VMIMigrating, "node-1 to node-2")},
		{"standalone, migration completed -> warning, safe", gone(f.MigrationEnded(false)), nil, safe(VMIRemoveVolume)},
		{"standalone, migration failed -> warning, safe", gone(f.MigrationEnded(true)), nil, safe(VMIRemoveVolume)},
		{"standalone, vmi terminating and migrating -> warning, blocked VMITerminating", gone(f.Migrating(), f.Terminating(now)), nil,
			blocked(drift.SeverityWarning, VMIRemoveVolume, VMITerminating, "is terminating", "is migrating")},
		{"standalone, vmi scheduled -> warning, blocked VMINotRunning", gone(f.Phase(kubevirtv1.Scheduled)), nil, blocked(drift.SeverityWarning, VMIRemoveVolume, VMINotRunning)},
		{"standalone, vmi phase empty -> warning, blocked VMINotRunning", gone(f.Phase("")), nil, blocked(drift.SeverityWarning, VMIRemoveVolume, VMINotRunning)},
		{"standalone, volume detaching -> warning, blocked DetachInProgress", hp(f.VolumePhase(kubevirtv1.HotplugVolumeDetaching)), nil, blocked(drift.SeverityWarning, VMIRemoveVolume, DetachInProgress)},
		{"standalone, volume unmounted from pod -> warning, blocked DetachInProgress", hp(f.VolumePhase(kubevirtv1.HotplugVolumeUnMounted)), nil, blocked(drift.SeverityWarning, VMIRemoveVolume, DetachInProgress)},
		{"standalone, volume gone from vmi spec -> warning, blocked DetachInProgress", hp(f.StatusOnly()), nil, blocked(drift.SeverityWarning, VMIRemoveVolume, DetachInProgress, "no longer lists")},
		{"standalone, volume attached to node only -> warning, blocked VolumeNotReady", hp(f.VolumePhase(kubevirtv1.HotplugVolumeAttachedToNode)), nil, blocked(drift.SeverityWarning, VMIRemoveVolume, VolumeNotReady)},
		{"standalone, volume phase empty -> warning, blocked VolumeNotReady", hp(f.VolumePhase("")), nil, blocked(drift.SeverityWarning, VMIRemoveVolume, VolumeNotReady)},
		{"standalone, vmi spec volume not hotpluggable -> warning, blocked VolumeNotHotpluggable", hp(f.NotHotpluggable()), nil, blocked(drift.SeverityWarning, VMIRemoveVolume, VolumeNotHotpluggable)},
	})
}

func TestMigrationStateWithoutStartCountsAsMigrating(t *testing.T) {
	vmi := f.VMI("a", f.WithHotplug("v1"))
	vmi.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{}
	fs := Run(f.Snapshot(vmi, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"))), DefaultPolicy(), now)
	assertOutcome(t, only(fs, OrphanHotplugVolume, "a", "v1"), blocked(drift.SeverityWarning, VMIRemoveVolume, VMIMigrating))
}

func TestCheckVolumeMatchesRun(t *testing.T) {
	vm := f.VM("a", f.Running())
	s := f.Snapshot(vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"), f.WithHotplug("v2")), f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Volumes("v1"), f.Attaches("a", "v2")), hotplugGate())
	p := DefaultPolicy()
	fs := only(Run(s, p, now), OrphanHotplugVolume, "a", "")
	got, ok := CheckVolume(s, p, now, "default", "a", "v1")
	if !ok || len(fs) != 1 || got.ID != fs[0].ID || got.Action != fs[0].Action {
		t.Fatalf("CheckVolume = %+v, %v; Run = %+v", got, ok, fs)
	}
	if _, ok := CheckVolume(s, p, now, "default", "a", "v2"); ok {
		t.Errorf("wanted volume v2 must give no finding")
	}
	for _, tc := range [][3]string{{"default", "b", "v1"}, {"other", "a", "v1"}, {"default", "a", "nope"}} {
		if _, ok := CheckVolume(s, p, now, tc[0], tc[1], tc[2]); ok {
			t.Errorf("CheckVolume(%v) found something that does not exist", tc)
		}
	}
	p.Scope.VolumePrefix = "x"
	if _, ok := CheckVolume(s, p, now, "default", "a", "v1"); ok {
		t.Errorf("CheckVolume must respect the scope")
	}
}

// TestOrphanHotplugVolumeTenantNodeMatching: tenant nodes are tied to infra
// VMs as the KubeVirt CSI driver ties them, and every doubt is a refusal.
func TestOrphanHotplugVolumeTenantNodeMatching(t *testing.T) {
	vm := f.VM("a", f.Running())
	vmi := f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"))
	on := hotplugGate()
	node := func(name string, mod func(*snapshot.TenantNode)) f.TenantOption {
		n := snapshot.TenantNode{Name: name, ProviderID: "kubevirt://a", ClusterNamespace: "default"}
		if mod != nil {
			mod(&n)
		}
		return f.WithNode(n)
	}
	bare := func(n *snapshot.TenantNode) { n.ProviderID, n.ClusterNamespace = "", "" }
	tenant := func(opts ...f.TenantOption) snapshot.Tenant {
		return f.Tenant("t1", append([]f.TenantOption{f.ForNamespace("default"), f.Volumes("v1")}, opts...)...)
	}
	unmapped := blocked(drift.SeverityInfo, VMIRemoveVolume, TenantNodeUnmapped)
	runVolumeCases(t, []volumeCase{
		{"node named otherwise, tied by providerID -> warning, safe, evidence says how",
			[]any{vm, vmi, tenant(node("worker-0", nil)), on}, nil,
			&outcome{severity: drift.SeverityWarning, action: VMIRemoveVolume, safe: true, evidence: []string{"node worker-0 -> infra VM default/a by providerID kubevirt://a"}}},
		{"node named like the VM but its providerID names another VM -> not this VM's node, blocked VMIOnlyHotplug",
			[]any{vm, vmi, tenant(node("a", func(n *snapshot.TenantNode) { n.ProviderID = "kubevirt://b" })), on}, nil, blocked(drift.SeverityInfo, VMIRemoveVolume, VMIOnlyHotplug)},
		{"node named like the VM, nothing else -> blocked TenantNodeUnmapped",
			[]any{vm, vmi, tenant(node("a", bare)), on}, nil, unmapped},
		{"node named like the VM, name matching opted in -> warning, safe",
			[]any{vm, vmi, tenant(node("a", bare), func(t *snapshot.Tenant) { t.MatchNodesByName = true }), on}, nil, safe(VMIRemoveVolume)},
		{"providerID and CSINode node ID disagree -> blocked TenantNodeUnmapped",
			[]any{vm, vmi, tenant(node("worker-0", func(n *snapshot.TenantNode) { n.CSINodeID = "default/b" })), on}, nil, unmapped},
		{"node of another namespace's VM of that name -> blocked TenantNodeUnmapped",
			[]any{vm, vmi, tenant(node("worker-0", func(n *snapshot.TenantNode) { n.ClusterNamespace = "other" })), on}, nil, unmapped},
		{"another node cannot be mapped -> blocked TenantNodeUnmapped (it may be this VM)",
			[]any{vm, vmi, tenant(node("worker-0", nil), node("worker-9", bare)), on}, nil, unmapped},
		{"the kubelet of the VM's node still uses it -> wanted, no finding",
			[]any{vm, vmi, tenant(node("worker-0", func(n *snapshot.TenantNode) { n.InUse = []string{"v1"} })), on}, nil, noFinding()},
		{"attached on the VM's node -> wanted, no finding",
			[]any{vm, vmi, tenant(node("worker-0", nil), f.Attaches("worker-0", "v1")), on}, nil, noFinding()},
		{"the attachment's node ID names another VM -> blocked TenantNodeUnmapped",
			[]any{vm, vmi, tenant(node("worker-0", nil), f.Attaches("worker-0", "v2", f.AttachedToID("default/b"))), on}, nil, unmapped},
		{"an attachment on a node the tenant does not list -> blocked TenantNodeUnmapped",
			[]any{vm, vmi, tenant(node("worker-0", nil), f.Attaches("worker-gone", "v2")), on}, nil, unmapped},
		{"two tenants in one infra namespace, the other attaches the volume elsewhere -> warning, safe",
			[]any{vm, vmi, tenant(node("worker-0", nil)),
				f.Tenant("t2", f.ForNamespace("default"), f.WithNode(snapshot.TenantNode{Name: "worker-0", ProviderID: "kubevirt://b", ClusterNamespace: "default"}), f.Attaches("worker-0", "v1")), on},
			nil, safe(VMIRemoveVolume)},
		{"one tenant across two namespaces (one entry each): its node of another namespace's VM b -> warning, safe",
			[]any{vm, vmi, tenant(node("worker-0", nil), node("worker-1", func(n *snapshot.TenantNode) { n.ProviderID, n.ClusterNamespace = "kubevirt://b", "other" })),
				f.Tenant("t1-other", f.ForNamespace("other"), f.Volumes("v1"), node("worker-0", nil), node("worker-1", func(n *snapshot.TenantNode) { n.ProviderID, n.ClusterNamespace = "kubevirt://b", "other" })), on},
			nil, safe(VMIRemoveVolume)},
		{"one tenant across two namespaces, a VM of the same name in both -> blocked TenantNodeUnmapped (the driver attaches in one namespace only)",
			[]any{vm, vmi, tenant(node("worker-0", nil), node("worker-1", func(n *snapshot.TenantNode) { n.ClusterNamespace = "other" })), on}, nil, unmapped},
		{"renamed driver: its attachment wants the volume -> no finding",
			[]any{vm, vmi, tenant(node("worker-0", nil), func(t *snapshot.Tenant) { t.Driver = "csi.example.com" },
				f.WithPV(f.PV("pv-x", "v1", f.Driver("csi.example.com"))), f.WithAttachment(f.VolumeAttachment("va-x", "worker-0", "pv-x", f.Attacher("csi.example.com")))), on},
			nil, noFinding()},
		{"renamed driver: an attachment of the default driver is not its word -> warning, safe",
			[]any{vm, vmi, tenant(node("worker-0", nil), func(t *snapshot.Tenant) { t.Driver = "csi.example.com" },
				f.WithPV(f.PV("pv-x", "v1", f.Driver("csi.example.com"))), f.Attaches("worker-0", "v1")), on},
			nil, safe(VMIRemoveVolume)},
		{"the tenant has no CSIDriver object -> blocked TenantIncomplete",
			[]any{vm, vmi, tenant(node("worker-0", nil), func(t *snapshot.Tenant) { t.DriverMissing = true }), on}, nil,
			blocked(drift.SeverityInfo, VMIRemoveVolume, TenantIncomplete, "has no CSIDriver")},
		{"no tenant PV names the volume -> outside tenant evidence, blocked VMIOnlyHotplug",
			[]any{vm, vmi, f.Tenant("t1", f.ForNamespace("default"), node("worker-0", nil)), on}, nil, blocked(drift.SeverityInfo, VMIRemoveVolume, VMIOnlyHotplug)},
	})
}
