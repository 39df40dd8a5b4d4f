package check

import (
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// stuckPublishMaySafely states, apart from the check's code, when removing
// handle h from the spec of the VM behind vmi takes nothing anyone uses:
//
//   - the VM exists, owns the VMI, and lists h as a hotpluggable volume;
//   - the VMI runs, is neither migrating nor being deleted, and its status
//     shows no Ready hot-plug of h (by name or claim: the guest never had
//     it) and no detach of it under way;
//   - the VM is not being deleted and has no pending request for h;
//   - every tenant was read whole, every one of its nodes names an infra VM,
//     none has a VolumeAttachment of h (being deleted or not) on a node that
//     is this VM, none was published to another node ID there, and one of
//     them has a PV of its driver with the handle h.
func stuckPublishMaySafely(s *snapshot.Snapshot, vmi *snapshot.VMI, h string) (bool, string) {
	var vm *snapshot.VM
	for i := range s.VMs {
		if s.VMs[i].Name == vmi.Name && s.VMs[i].Namespace == vmi.Namespace {
			vm = &s.VMs[i]
		}
	}
	if vm == nil || vm.DeletionTimestamp != nil || !snapshot.Hotpluggable(snapshot.VMVolume(vm, h)) {
		return false, "the VM is gone, being deleted or does not list it as a hot-plug"
	}
	if vmi.Status.Phase != kubevirtv1.Running || vmi.DeletionTimestamp != nil || IsMigrating(vmi) {
		return false, "the VMI is not simply running"
	}
	for _, r := range vm.Status.VolumeRequests {
		if (r.AddVolumeOptions != nil && r.AddVolumeOptions.Name == h) || (r.RemoveVolumeOptions != nil && r.RemoveVolumeOptions.Name == h) {
			return false, "a volume request for it is pending"
		}
	}
	for _, vs := range vmi.Status.VolumeStatus {
		claim := ""
		if vs.PersistentVolumeClaimInfo != nil {
			claim = vs.PersistentVolumeClaimInfo.ClaimName
		}
		if vs.Name != h && claim != h {
			continue
		}
		if vs.HotplugVolume == nil || vs.Phase == kubevirtv1.VolumeReady || vs.Phase == kubevirtv1.HotplugVolumeDetaching || vs.Phase == kubevirtv1.HotplugVolumeUnMounted {
			return false, "the VMI status has it Ready, not as a hot-plug, or detaching"
		}
	}
	tenantHas := false
	for _, t := range s.Tenants {
		if !t.Reachable || t.DriverMissing {
			return false, "a tenant was not read whole"
		}
		for _, n := range t.Nodes {
			if n.ProviderID == "" {
				return false, "a tenant node names no infra VM"
			}
			if n.ProviderID != snapshot.ProviderIDPrefix+vmi.Name {
				continue
			}
			if publishedElsewhere(t, n.Name, vmi) {
				return false, "a tenant attachment on this VM's node was published to another node ID"
			}
			for _, va := range t.VolumeAttachments {
				if va.Spec.NodeName == n.Name && tenantHandle(t, va.Spec.Source.PersistentVolumeName) == h {
					return false, "a tenant attachment on this VM's node wants it"
				}
			}
		}
		for _, pv := range t.PVs {
			tenantHas = tenantHas || (pv.Spec.CSI != nil && pv.Spec.CSI.VolumeHandle == h)
		}
	}
	if !tenantHas {
		return false, "no tenant PV has the handle"
	}
	return true, ""
}

func tenantHandle(t snapshot.Tenant, pv *string) string {
	for _, p := range t.PVs {
		if pv != nil && p.Name == *pv && p.Spec.CSI != nil {
			return p.Spec.CSI.VolumeHandle
		}
	}
	return ""
}

// Over seeded random worlds of the tenant attach generator, every safe
// StuckPublish finding is one the platform's rules allow, and the worlds
// reach safe, critical and held findings.
func TestStuckPublishNeverUnsafe(t *testing.T) {
	reachesEvery(t, 5, func(b []byte) []drift.Finding { return stuckPublishSafe(t, b) },
		func(fd drift.Finding) string {
			if fd.Action.Safe {
				return string(fd.Severity) + " safe"
			}
			return string(fd.Severity)
		}, "warning safe", "critical safe", "info")
}

// FuzzStuckPublish runs the same statement on fuzzed worlds.
func FuzzStuckPublish(fz *testing.F) {
	fz.Add([]byte{})
	fz.Add([]byte("a hot-plug in the VM spec that never became Ready"))
	fz.Fuzz(func(t *testing.T, b []byte) { stuckPublishSafe(t, b) })
}

func stuckPublishSafe(t *testing.T, b []byte) []drift.Finding {
	t.Helper()
	s := f.Snapshot(tenantAttachGen(b)...)
	p := DefaultPolicy()
	p.Checks = []string{StuckPublish}
	fs := Run(s, p, now)
	for _, fd := range fs {
		assertWellFormed(t, fd)
		if fd.Action.Type != VMRemoveVolume || fd.Action.Safe != (fd.Action.BlockedBy == "") || fd.Action.Safe == (fd.Severity == drift.SeverityInfo) {
			t.Fatalf("malformed StuckPublish finding: %+v", fd)
		}
		if !fd.Action.Safe {
			continue
		}
		vmi := s.Index().VMI(fd.Namespace, fd.Object.Name)
		if ok, why := stuckPublishMaySafely(s, vmi, fd.Volume); !ok {
			t.Fatalf("safe StuckPublish of %s/%s %q, but %s: %+v", fd.Namespace, fd.Object.Name, fd.Volume, why, fd)
		}
	}
	return fs
}
