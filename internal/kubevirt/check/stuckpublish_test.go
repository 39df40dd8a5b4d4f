package check

import (
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// The oracle of this table is what the KubeVirt CSI driver and KubeVirt do,
// read from their sources (kubevirt/csi-driver at 27b52aa2, kubevirt
// v1.9.0), and the failure cozystack #2634 reports:
//
//   - ControllerPublishVolume adds the DataVolume to the VM spec, hot-plug
//     named after it (persisted: pkg/service/controller.go:428-459), then
//     waits two minutes for the VMI status to show it Ready
//     (controller.go:461-466, pkg/kubevirt/client.go:219-233); on a
//     timeout the RPC fails with the volume left in the VM spec.
//   - A driver whose unpublish decides from the VMI status alone (the
//     wrapper of cozystack #2634; upstream before #184 read the VM spec)
//     answers success for a volume that never turned Ready: the tenant's
//     VolumeAttachment goes, the VM spec keeps the hot-plug.
//   - A volume that never became Ready was never given to the guest: a
//     hot-plug reaches the domain before virt-handler reports Ready
//     (pkg/virt-handler/vm.go, the phases Pending, Bound, AttachedToNode,
//     MountedToPod come first).
//   - The driver refuses to publish a ReadWriteOnce volume that any other
//     VMI lists in its status, whatever the phase, with "volume is attached
//     to another VM" (controller.go:381-393, 956-990).
//   - VM-level removevolume takes the volume out of the VM spec; virt-api
//     refuses it when neither hot-plug gate is on (pkg/virt-api/rest/
//     volumes.go:63-65, 138-141).

// abandoned is the VM spec of a publish that timed out: dv-1 hot-plugged
// as the driver adds it.
func abandoned() []f.Option {
	return []f.Option{f.WithVolume("dv-1", f.DataVolume("dv-1"), f.Hotpluggable())}
}

func TestStuckPublish(t *testing.T) {
	stale := now.Add(-time.Hour)
	tenantVol := f.Volumes("dv-1")
	otherNode := f.WithNode(snapshot.TenantNode{Name: "worker-1", ProviderID: snapshot.ProviderIDPrefix + "vm-b", ClusterNamespace: f.Namespace})
	cases := []tenantAttachCase{
		{name: "in the VM spec, no VMI status entry, no tenant attachment -> safe VMRemoveVolume",
			vm: abandoned(), tenant: []f.TenantOption{tenantVol},
			want: &outcome{severity: drift.SeverityWarning, action: VMRemoveVolume, safe: true, evidence: []string{
				`VM default/vm-a spec lists hotpluggable volume "dv-1" (claim dv-1)`,
				`status.volumeStatus has no entry for "dv-1"`,
				`VMI default/vm-a spec does not list "dv-1" either`,
				`neither a VolumeAttachment nor the kubelet of node worker-0 wants it`}}},
		{name: "status entry Pending with an attachment pod -> safe",
			vm: abandoned(), vmi: []f.Option{f.WithHotplug("dv-1", f.VolumePhase(kubevirtv1.VolumePending))}, tenant: []f.TenantOption{tenantVol},
			want: &outcome{severity: drift.SeverityWarning, action: VMRemoveVolume, safe: true, evidence: []string{`lists hot-plug "dv-1" in phase Pending`}}},
		{name: "status entry AttachedToNode -> safe",
			vm: abandoned(), vmi: []f.Option{f.WithHotplug("dv-1", f.VolumePhase(kubevirtv1.HotplugVolumeAttachedToNode))}, tenant: []f.TenantOption{tenantVol},
			want: safe(VMRemoveVolume)},
		{name: "hot-plug Ready -> no finding (the guest may have it)",
			vm: abandoned(), vmi: []f.Option{f.WithHotplug("dv-1")}, tenant: []f.TenantOption{tenantVol},
			want: noFinding()},
		{name: "Ready under another name with the handle as claim -> no finding",
			vm: abandoned(), vmi: []f.Option{f.WithHotplug("disk-1", f.Claim("dv-1"))}, tenant: []f.TenantOption{tenantVol},
			want: noFinding()},
		{name: "a tenant VolumeAttachment on this VM's node wants it (publish retrying) -> no finding",
			vm: abandoned(), tenant: []f.TenantOption{tenantVA("dv-1", f.AttachError("timed out waiting", stale))},
			want: noFinding()},
		{name: "the tenant's kubelet lists it -> no finding",
			vm: abandoned(), tenant: []f.TenantOption{tenantVol, func(t *snapshot.Tenant) { t.Nodes[0].InUse = []string{"dv-1"} }},
			want: noFinding()},
		{name: "the tenant is detaching it -> info DetachInProgress",
			vm: abandoned(), tenant: []f.TenantOption{tenantVA("dv-1", f.Terminating(now))},
			want: blocked(drift.SeverityInfo, VMRemoveVolume, DetachInProgress, "is being deleted: detach in progress")},
		{name: "no PV of the tenant's driver has the handle -> no finding (not a tenant volume)",
			vm: abandoned(), tenant: []f.TenantOption{f.Volumes("dv-9")},
			want: noFinding()},
		{name: "tenant unreachable -> info TenantUnreachable",
			vm: abandoned(), tenant: []f.TenantOption{tenantVol, f.Unreachable("timeout")},
			want: blocked(drift.SeverityInfo, VMRemoveVolume, TenantUnreachable, `tenant "t1" is unreachable: timeout`)},
		{name: "a tenant node that may be this VM without certainty -> info TenantNodeUnmapped",
			vm: abandoned(), tenant: []f.TenantOption{tenantVol, f.ForNamespace(f.Namespace),
				f.WithNode(snapshot.TenantNode{Name: "worker-9", ProviderID: snapshot.ProviderIDPrefix + "vm-a", ClusterNamespace: "elsewhere"})},
			want: blocked(drift.SeverityInfo, VMRemoveVolume, TenantNodeUnmapped)},
		{name: "the tenant attaches it to another VM's node and waits -> critical, safe",
			vm: abandoned(), tenant: []f.TenantOption{otherNode, f.Attaches("worker-1", "dv-1", f.AttachedToID(f.Namespace+"/vm-b"), f.AttachError("volume is attached to another VM", stale))},
			want: &outcome{severity: drift.SeverityCritical, action: VMRemoveVolume, safe: true, evidence: []string{
				`VolumeAttachment csi-`, `wants "dv-1" on node worker-1 and is not attached (attach error "volume is attached to another VM")`,
				`VMI default/vm-a blocks it`}}},
		{name: "VMI migrating -> info VMIMigrating",
			vm: abandoned(), vmi: []f.Option{f.Migrating()}, tenant: []f.TenantOption{tenantVol},
			want: blocked(drift.SeverityInfo, VMRemoveVolume, VMIMigrating)},
		{name: "VMI not running -> info VMINotRunning",
			vm: abandoned(), vmi: []f.Option{f.Phase(kubevirtv1.Scheduling)}, tenant: []f.TenantOption{tenantVol},
			want: blocked(drift.SeverityInfo, VMRemoveVolume, VMINotRunning)},
		{name: "VMI terminating -> info VMITerminating",
			vm: abandoned(), vmi: []f.Option{f.Terminating(now.Add(-time.Minute))}, tenant: []f.TenantOption{tenantVol},
			want: blocked(drift.SeverityInfo, VMRemoveVolume, VMITerminating)},
		{name: "VM terminating -> info VMTerminating",
			vm: append(abandoned(), f.Terminating(now.Add(-time.Minute))), tenant: []f.TenantOption{tenantVol},
			want: blocked(drift.SeverityInfo, VMRemoveVolume, VMTerminating)},
		{name: "pending addvolume -> info AdditionPending",
			vm: append(abandoned(), f.PendingAdd("dv-1", f.DataVolume("dv-1"))), tenant: []f.TenantOption{tenantVol},
			want: blocked(drift.SeverityInfo, VMRemoveVolume, AdditionPending)},
		{name: "pending removevolume -> info RemovalPending",
			vm: append(abandoned(), f.PendingRemove("dv-1")), tenant: []f.TenantOption{tenantVol},
			want: blocked(drift.SeverityInfo, VMRemoveVolume, RemovalPending)},
		{name: "phase Detaching -> info DetachInProgress",
			vm: abandoned(), vmi: []f.Option{f.WithHotplug("dv-1", f.VolumePhase(kubevirtv1.HotplugVolumeDetaching))}, tenant: []f.TenantOption{tenantVol},
			want: blocked(drift.SeverityInfo, VMRemoveVolume, DetachInProgress)},
		{name: "neither hot-plug gate (v1.9, the Beta default turned off) -> info HotplugGateDisabled",
			vm: abandoned(), tenant: []f.TenantOption{tenantVol},
			extra: []any{snapshot.FeatureGates{Known: true, KubeVirtVersion: "v1.9.0", Phase: "Deployed", Disabled: []string{snapshot.DeclarativeHotplugVolumesGate}}},
			want:  blocked(drift.SeverityInfo, VMRemoveVolume, HotplugGateDisabled)},
		{name: "DeclarativeHotplugVolumes alone (v1.9's default) -> safe (the VM-level route serves it)",
			vm: abandoned(), tenant: []f.TenantOption{tenantVol}, extra: []any{f.Gates()},
			want: safe(VMRemoveVolume)},
		{name: "a VM spec volume not marked hotpluggable -> no finding (not a hot-plug)",
			vm: []f.Option{f.WithVolume("dv-1", f.DataVolume("dv-1"))}, tenant: []f.TenantOption{tenantVol},
			want: noFinding()},
		{name: "outside the volume prefix -> no finding",
			vm: abandoned(), tenant: []f.TenantOption{tenantVol}, policy: func(p *Policy) { p.Scope.VolumePrefix = "pvc-" },
			want: noFinding()},
	}
	for _, c := range cases {
		c.check = StuckPublish
		t.Run(c.name, c.run)
	}
}

// No tenant for the namespace, a standalone VMI, or a VM gone: no finding
// (without a tenant nothing says the publish was abandoned; without the VM
// there is no spec to remove it from).
func TestStuckPublish_needsATenantAndTheVM(t *testing.T) {
	vm := f.VM("vm-a", append([]f.Option{f.Running()}, abandoned()...)...)
	owned := f.VMI("vm-a", f.OwnedBy(vm))
	tn := f.Tenant("t1", f.WithNode(tenantNode()), f.Volumes("dv-1"))
	p := DefaultPolicy()
	p.Checks = []string{StuckPublish}
	for name, items := range map[string][]any{
		"no tenant":      {vm, owned},
		"standalone VMI": {vm, f.VMI("vm-a"), tn},
		"VM gone":        {owned, tn},
	} {
		if fs := Run(f.Snapshot(items...), p, now); len(fs) != 0 {
			t.Errorf("%s: want no finding, got %+v", name, fs)
		}
	}
	if fs := Run(f.Snapshot(vm, owned, tn), p, now); len(fs) != 1 {
		t.Fatalf("the control case must find it, got %d", len(fs))
	}
}

// The fix command must see a StuckPublish finding twice the grace apart;
// every other check's once.
func TestSeenTwice(t *testing.T) {
	p := DefaultPolicy()
	if got := SeenTwice(p, StuckPublish); got != DefaultStuckPublishGrace {
		t.Errorf("StuckPublish: %s, want %s", got, DefaultStuckPublishGrace)
	}
	p.StuckPublishGrace = time.Minute
	if got := SeenTwice(p, StuckPublish); got != time.Minute {
		t.Errorf("StuckPublish with a 1m grace: %s", got)
	}
	for _, name := range Names() {
		if name != StuckPublish && SeenTwice(p, name) != 0 {
			t.Errorf("%s needs two sightings", name)
		}
	}
}

// SeenTwice is asked once per finding (the first-sighting stage): it
// allocates nothing. Building every check's row for each of 200,000
// findings was half a gigabyte of garbage at the end of a 100,000-VMI
// audit, when its heap was largest.
func TestSeenTwiceAllocatesNothing(t *testing.T) {
	p := DefaultPolicy()
	for _, name := range []string{OrphanHotplugVolume, StuckPublish, DanglingVolumeReference} {
		if n := testing.AllocsPerRun(100, func() { SeenTwice(p, name) }); n != 0 {
			t.Errorf("SeenTwice(%s) allocates %.0f times, want 0", name, n)
		}
	}
}

// CheckStuckPublish (act's live re-check) decides as the pass does.
func TestCheckStuckPublish(t *testing.T) {
	vm := f.VM("vm-a", append([]f.Option{f.Running()}, abandoned()...)...)
	s := f.Snapshot(vm, f.VMI("vm-a", f.OwnedBy(vm)), f.Tenant("t1", f.WithNode(tenantNode()), f.Volumes("dv-1")))
	fs := Run(s, DefaultPolicy(), now)
	got, ok := CheckStuckPublish(s, DefaultPolicy(), now, f.Namespace, "vm-a", "dv-1")
	if want := only(fs, StuckPublish, "vm-a", "dv-1"); !ok || len(want) != 1 || got.ID != want[0].ID || got.Action != want[0].Action {
		t.Fatalf("re-check %+v (%v), pass %+v", got, ok, want)
	}
	if _, ok := CheckStuckPublish(s, DefaultPolicy(), now, f.Namespace, "vm-a", "dv-2"); ok {
		t.Error("a volume the VM spec does not list re-checked as stuck")
	}
}
