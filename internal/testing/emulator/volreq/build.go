package volreq

import (
	corev1 "k8s.io/api/core/v1"
	virtv1 "kubevirt.io/api/core/v1"
)

// Builders of volumes and disks for the emulator's tests.

// PVCVolume is a volume of the claim, hotpluggable with hot.
func PVCVolume(name, claim string, hot bool) virtv1.Volume {
	return virtv1.Volume{Name: name, VolumeSource: virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}, Hotpluggable: hot,
	}}}
}

// DataVolumeVolume is a volume of the DataVolume of its name.
func DataVolumeVolume(name string, hot bool) virtv1.Volume {
	return virtv1.Volume{Name: name, VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: name, Hotpluggable: hot}}}
}

// Disk is a disk on bus.
func Disk(name string, bus virtv1.DiskBus) virtv1.Disk {
	return virtv1.Disk{Name: name, DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: bus}}}
}
