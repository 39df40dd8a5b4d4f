package check

import (
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// TruncatedDiskSerial: a hot-plug on the virtio bus whose serial is longer
// than the 20 bytes a virtio-blk guest sees, so that whoever looks the disk
// up by its serial in the guest (the KubeVirt CSI driver's node plugin,
// /dev/disk/by-id) does not find it, while both records say attached.
const TruncatedDiskSerial = "TruncatedDiskSerial"

// SerialCutByBus: the finding only reports; the disk's bus or serial must
// change where it is made.
const SerialCutByBus drift.BlockReason = "SerialCutByBus"

// FindTruncatedDiskSerials reports, for every VMI in scope, each hot-plug
// disk on the virtio bus whose serial is longer than
// snapshot.VirtioSerialBytes (kubevirt/csi-driver#368: with a StorageClass
// of `bus: virtio` the driver's hot-plugs carry serials longer than that,
// and its node plugin fails "couldn't find device by serial id").
// A disk is a hot-plug when the VMI's volume of its name is hotpluggable or
// its volume status has a hot-plug entry. Report only.
//
// The evidence also says which other causes of "attached but not found"
// are ruled out by what tether reads: the hot-plug's phase (Ready: KubeVirt
// finished the attach), and the bus (SCSI hot-plugs keep long serials).
func FindTruncatedDiskSerials(in Input) []drift.Finding {
	in = in.ready()
	var out []drift.Finding
	for i := range in.Snapshot.VMIs {
		vmi := &in.Snapshot.VMIs[i]
		if !named(vmi) || !in.scope.namespace(vmi.Namespace) || !in.scope.labels(vmi.Labels) {
			continue
		}
		for j := range vmi.Spec.Domain.Devices.Disks {
			d := &vmi.Spec.Domain.Devices.Disks[j]
			if !snapshot.LongVirtioSerial(d) || !in.scope.volume(d.Name) {
				continue
			}
			vs := hotplugStatus(vmi, d.Name)
			if !snapshot.Hotpluggable(snapshot.VMIVolume(vmi, d.Name)) && (vs == nil || vs.HotplugVolume == nil) {
				continue
			}
			out = append(out, serialFinding(vmi, d, vs))
		}
	}
	return out
}

func serialFinding(vmi *snapshot.VMI, d *kubevirtv1.Disk, vs *snapshot.VolumeStatus) drift.Finding {
	seen := d.Serial[:snapshot.VirtioSerialBytes]
	f := drift.Finding{
		Check:     TruncatedDiskSerial,
		Namespace: vmi.Namespace,
		Object:    drift.ObjectRef{Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID},
		Volume:    d.Name,
		Severity:  drift.SeverityWarning,
		Message: fmt.Sprintf("hot-plug %q of VMI %s/%s is on the virtio bus with serial %q (%d bytes): the guest sees only %q, so a lookup by serial (/dev/disk/by-id, the KubeVirt CSI driver's node plugin) does not find the disk",
			d.Name, vmi.Namespace, vmi.Name, d.Serial, len(d.Serial), seen),
		Evidence: []string{
			fmt.Sprintf("VMI %s/%s disk %q: bus virtio, serial %q (%d bytes)", vmi.Namespace, vmi.Name, d.Name, d.Serial, len(d.Serial)),
			fmt.Sprintf("a virtio-blk device ID holds %d bytes: the guest sees serial %q (/dev/disk/by-id/virtio-%s)", snapshot.VirtioSerialBytes, seen, seen),
		},
	}
	f.ID = f.DerivedID()
	switch {
	case vs != nil && vs.Phase == kubevirtv1.VolumeReady:
		f.Evidence = append(f.Evidence, fmt.Sprintf("ruled out: an attach that did not finish (the hot-plug's volume status is Ready)"))
	case vs != nil:
		f.Evidence = append(f.Evidence, fmt.Sprintf("the hot-plug is in phase %s, not Ready yet: the attach may not have finished either", orNone(string(vs.Phase))))
	default:
		f.Evidence = append(f.Evidence, "the VMI has no volume status for it yet: the attach may not have finished either")
	}
	f.Evidence = append(f.Evidence, "ruled out: a bus that keeps the serial (the SCSI bus, KubeVirt's default for hot-plugs, keeps long serials)")
	f.Action = drift.Action{Type: drift.None,
		Remedy: fmt.Sprintf("hot-plug on the SCSI bus (a KubeVirt CSI StorageClass without `bus: virtio`, or `bus: scsi`; `virtctl addvolume --bus=scsi`), or give the disk a serial of at most %d bytes; a disk already plugged keeps its serial: unplug it and plug it again once the StorageClass or the call is fixed (kubevirt/csi-driver#368)",
			snapshot.VirtioSerialBytes)}
	f.Block(SerialCutByBus, "")
	return f
}
