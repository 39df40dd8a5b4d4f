package check

import (
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// longSerial is a serial as a tenant's PV names it: 40 bytes.
const longSerial = "pvc-7286dfe6-7c44-4057-a8f4-362cc1e7468c"

// virtioDisk is a disk on the virtio bus with serial.
func virtioDisk(name, serial string) kubevirtv1.Disk {
	return kubevirtv1.Disk{Name: name, Serial: serial, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}
}

// serialVMI is a VMI with hot-plug pvc-1 on the virtio bus with serial.
func serialVMI(name, serial string, opts ...f.Option) *kubevirtv1.VirtualMachineInstance {
	vmi := f.VMI(name, append([]f.Option{f.WithHotplug("pvc-1")}, opts...)...)
	for i := range vmi.Spec.Domain.Devices.Disks {
		if d := &vmi.Spec.Domain.Devices.Disks[i]; d.Name == "pvc-1" {
			*d = virtioDisk("pvc-1", serial)
		}
	}
	return vmi
}

// The oracle: a virtio-blk device ID is 20 bytes (VIRTIO_BLK_ID_BYTES in the
// virtio specification; QEMU's virtio-blk cuts a longer serial there),
// while the SCSI bus carries longer serials; kubevirt/csi-driver#368: the
// node plugin looks the disk up by its whole serial and fails. Only
// hot-plugs concern the check (a disk whose volume is hotpluggable, or
// whose volume status is a hot-plug's).
func TestTruncatedDiskSerial(t *testing.T) {
	cases := []struct {
		name string
		vmi  *kubevirtv1.VirtualMachineInstance
		want *outcome
	}{
		{"virtio hot-plug, 40-byte serial, Ready -> warning, what the guest sees, attach ruled out", serialVMI("vm-a", longSerial),
			&outcome{severity: drift.SeverityWarning, action: drift.None, blocked: SerialCutByBus,
				evidence: []string{`guest sees serial "pvc-7286dfe6-7c44-40"`, "/dev/disk/by-id/virtio-pvc-7286dfe6-7c44-40", "ruled out: an attach that did not finish", "ruled out: a bus that keeps the serial"}}},
		{"virtio hot-plug, 21-byte serial -> warning", serialVMI("vm-a", "123456789012345678901"),
			&outcome{severity: drift.SeverityWarning, action: drift.None, blocked: SerialCutByBus}},
		{"virtio hot-plug, 20-byte serial -> no finding (the guest sees it whole)", serialVMI("vm-a", "12345678901234567890"), noFinding()},
		{"virtio hot-plug, no serial -> no finding", serialVMI("vm-a", ""), noFinding()},
		{"virtio hot-plug still attaching -> warning, says the attach may not be done", func() *kubevirtv1.VirtualMachineInstance {
			vmi := serialVMI("vm-a", longSerial)
			vmi.Status.VolumeStatus[0].Phase = kubevirtv1.HotplugVolumeAttachedToNode
			return vmi
		}(), &outcome{severity: drift.SeverityWarning, action: drift.None, blocked: SerialCutByBus, evidence: []string{"not Ready yet: the attach may not have finished either"}}},
		{"SCSI hot-plug with a long serial -> no finding", func() *kubevirtv1.VirtualMachineInstance {
			vmi := serialVMI("vm-a", longSerial)
			vmi.Spec.Domain.Devices.Disks[len(vmi.Spec.Domain.Devices.Disks)-1].Disk.Bus = kubevirtv1.DiskBusSCSI
			return vmi
		}(), noFinding()},
		{"a virtio boot disk with a long serial (no hot-plug) -> no finding", f.VMI("vm-a", func() f.Option {
			return f.WithVolume("root", f.PVC("root"))
		}()), noFinding()},
	}
	// The boot disk case: give the root disk a long serial on virtio.
	boot := cases[len(cases)-1].vmi
	for i := range boot.Spec.Domain.Devices.Disks {
		boot.Spec.Domain.Devices.Disks[i] = virtioDisk(boot.Spec.Domain.Devices.Disks[i].Name, longSerial)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.Checks = []string{TruncatedDiskSerial}
			fs := Run(f.Snapshot(c.vmi), p, now)
			for _, fd := range fs {
				assertWellFormed(t, fd)
			}
			assertOutcome(t, only(fs, TruncatedDiskSerial, "vm-a", "pvc-1"), c.want)
			if c.want == nil {
				assertOutcome(t, fs, nil)
			}
		})
	}
	// Lean objects keep what the check reads: the same finding from a lean
	// VMI as from the whole one.
	full := Run(f.Snapshot(serialVMI("vm-a", longSerial)), DefaultPolicy(), now)
	lean := Run(f.Snapshot(snapshot.Lean(serialVMI("vm-a", longSerial))), DefaultPolicy(), now)
	if len(only(full, TruncatedDiskSerial, "vm-a", "pvc-1")) != 1 || len(only(lean, TruncatedDiskSerial, "vm-a", "pvc-1")) != 1 {
		t.Fatalf("whole %d, lean %d findings", len(full), len(lean))
	}
}
