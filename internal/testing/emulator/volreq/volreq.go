// Package volreq holds the pure rules of KubeVirt's volume requests that
// the emulated virt-api and virt-controller share.
package volreq

import (
	"encoding/json"
	"fmt"

	virtv1 "kubevirt.io/api/core/v1"
)

// This file holds the pure rules of KubeVirt's volume requests
// (pkg/virt-api/rest/volumes.go and ApplyVolumeRequestOnVMISpec in
// pkg/controller/controller.go). The messages are KubeVirt's.

// normalizeAdd does what virt-api does to an accepted AddVolumeOptions: the
// disk takes the volume's name and the source becomes hotpluggable.
func NormalizeAdd(opts *virtv1.AddVolumeOptions) {
	opts.Disk.Name = opts.Name
	switch {
	case opts.VolumeSource.DataVolume != nil:
		opts.VolumeSource.DataVolume.Hotpluggable = true
	case opts.VolumeSource.PersistentVolumeClaim != nil:
		opts.VolumeSource.PersistentVolumeClaim.Hotpluggable = true
	}
}

// verifyVolumeRequest checks a request against the volumes it would change.
func Verify(volumes []virtv1.Volume, req *virtv1.VirtualMachineVolumeRequest) error {
	if add := req.AddVolumeOptions; add != nil {
		source := hotplugSourceName(add.VolumeSource)
		for i := range volumes {
			if volumes[i].Name == add.Name {
				return fmt.Errorf("Unable to add volume [%s] because volume with that name already exists", add.Name)
			}
			if source != "" && ClaimName(&volumes[i]) == source && volumes[i].MemoryDump == nil {
				return fmt.Errorf("Unable to add volume source [%s] because it already exists", source)
			}
		}
		return nil
	}
	if rm := req.RemoveVolumeOptions; rm != nil {
		for i := range volumes {
			v := &volumes[i]
			if v.Name != rm.Name && (ClaimName(v) != rm.Name || v.MemoryDump != nil) {
				continue
			}
			if !Hotpluggable(v) {
				return fmt.Errorf("Unable to remove volume [%s] because it is not hotpluggable", v.Name)
			}
			return nil
		}
		return fmt.Errorf("Unable to remove volume [%s] because it does not exist", rm.Name)
	}
	return nil
}

// applyVolumeRequest changes spec as KubeVirt's ApplyVolumeRequestOnVMISpec
// does: an add appends the volume and its disk unless the name is taken; a
// remove drops the volume and the disk of that name.
func Apply(spec *virtv1.VirtualMachineInstanceSpec, req *virtv1.VirtualMachineVolumeRequest) {
	if add := req.AddVolumeOptions; add != nil {
		for _, v := range spec.Volumes {
			if v.Name == add.Name {
				return
			}
		}
		vol := virtv1.Volume{Name: add.Name}
		if src := add.VolumeSource; src != nil {
			switch {
			case src.PersistentVolumeClaim != nil:
				vol.PersistentVolumeClaim = src.PersistentVolumeClaim.DeepCopy()
				vol.PersistentVolumeClaim.Hotpluggable = true
			case src.DataVolume != nil:
				vol.DataVolume = src.DataVolume.DeepCopy()
				vol.DataVolume.Hotpluggable = true
			}
		}
		spec.Volumes = append(spec.Volumes, vol)
		if add.Disk != nil {
			disk := add.Disk.DeepCopy()
			disk.Name = add.Name
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, *disk)
		}
		return
	}
	if rm := req.RemoveVolumeOptions; rm != nil {
		volumes := spec.Volumes[:0:0]
		for _, v := range spec.Volumes {
			if v.Name != rm.Name {
				volumes = append(volumes, v)
			}
		}
		disks := spec.Domain.Devices.Disks[:0:0]
		for _, d := range spec.Domain.Devices.Disks {
			if d.Name != rm.Name {
				disks = append(disks, d)
			}
		}
		spec.Volumes, spec.Domain.Devices.Disks = volumes, disks
	}
}

// queueVolumeRequest adds req to a VM's pending requests with virt-api's
// rules: a remove drops pending adds of the same volume; duplicates refuse.
func Queue(pending []virtv1.VirtualMachineVolumeRequest, req virtv1.VirtualMachineVolumeRequest) ([]virtv1.VirtualMachineVolumeRequest, error) {
	var out []virtv1.VirtualMachineVolumeRequest
	if add := req.AddVolumeOptions; add != nil {
		for _, p := range pending {
			if p.AddVolumeOptions != nil && p.AddVolumeOptions.Name == add.Name {
				return nil, fmt.Errorf("add volume request for volume [%s] already exists", add.Name)
			}
			if p.RemoveVolumeOptions != nil && p.RemoveVolumeOptions.Name == add.Name {
				return nil, fmt.Errorf("unable to add volume since a remove volume request for volume [%s] already exists and is still being processed", add.Name)
			}
		}
		out = append(out, pending...)
	} else if rm := req.RemoveVolumeOptions; rm != nil {
		for _, p := range pending {
			if p.AddVolumeOptions != nil && p.AddVolumeOptions.Name == rm.Name {
				continue
			}
			if p.RemoveVolumeOptions != nil && p.RemoveVolumeOptions.Name == rm.Name {
				return nil, fmt.Errorf("a remove volume request for volume [%s] already exists and is still being processed", rm.Name)
			}
			out = append(out, p)
		}
	}
	return append(out, req), nil
}

// trimDoneVolumeRequests drops the requests that the VM template already
// reflects (volume and disk present for an add, both absent for a remove).
func TrimDone(tmpl *virtv1.VirtualMachineInstanceSpec, pending []virtv1.VirtualMachineVolumeRequest) []virtv1.VirtualMachineVolumeRequest {
	vols, disks := map[string]bool{}, map[string]bool{}
	for _, v := range tmpl.Volumes {
		vols[v.Name] = true
	}
	for _, d := range tmpl.Domain.Devices.Disks {
		disks[d.Name] = true
	}
	var out []virtv1.VirtualMachineVolumeRequest
	for _, r := range pending {
		switch {
		case r.AddVolumeOptions != nil && vols[r.AddVolumeOptions.Name] && disks[r.AddVolumeOptions.Name]:
		case r.RemoveVolumeOptions != nil && !vols[r.RemoveVolumeOptions.Name] && !disks[r.RemoveVolumeOptions.Name]:
		default:
			out = append(out, r)
		}
	}
	return out
}

// hotpluggable reports whether a volume carries KubeVirt's hotpluggable flag.
func Hotpluggable(v *virtv1.Volume) bool {
	return (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.Hotpluggable) ||
		(v.DataVolume != nil && v.DataVolume.Hotpluggable)
}

// claimName is the PVC behind a volume ("" for non-PVC sources). For a
// DataVolume it is the DataVolume's name, as in KubeVirt.
func ClaimName(v *virtv1.Volume) string {
	switch {
	case v.DataVolume != nil:
		return v.DataVolume.Name
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.MemoryDump != nil:
		return v.MemoryDump.ClaimName
	}
	return ""
}

func hotplugSourceName(src *virtv1.HotplugVolumeSource) string {
	switch {
	case src == nil:
		return ""
	case src.DataVolume != nil:
		return src.DataVolume.Name
	case src.PersistentVolumeClaim != nil:
		return src.PersistentVolumeClaim.ClaimName
	}
	return ""
}

// jsonOp is one operation of a JSON patch (RFC 6902).
type jsonOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// testThenSet tests path for old, then sets it to next: replaced, or added
// when old was empty (volumes.go:384-395 in KubeVirt v1.9.0). A concurrent
// change fails the test, and the API server answers 422.
func testThenSet[T any](path string, old, next []T) []jsonOp {
	set := "replace"
	if len(old) == 0 {
		set = "add"
	}
	if next == nil {
		next = []T{}
	}
	return []jsonOp{{Op: "test", Path: path, Value: old}, {Op: set, Path: path, Value: next}}
}

// volumesPatch is the JSON patch virt-api writes for a volume request on
// the spec at prefix ("" for a VMI, "/spec/template" for a VM): test the
// old volumes and disks, then replace them with the request applied
// (generateVolumeRequestPatch, volumes.go:375-404).
func VolumesPatch(prefix string, old *virtv1.VirtualMachineInstanceSpec, req *virtv1.VirtualMachineVolumeRequest) ([]byte, error) {
	next := old.DeepCopy()
	Apply(next, req)
	ops := append(testThenSet(prefix+"/spec/volumes", old.Volumes, next.Volumes),
		testThenSet(prefix+"/spec/domain/devices/disks", old.Domain.Devices.Disks, next.Domain.Devices.Disks)...)
	return json.Marshal(ops)
}

// volumeRequestsPatch is the JSON patch virt-api writes to queue a request
// in a VM's status (generateVMVolumeRequestPatch, volumes.go:387-405).
func RequestsPatch(old, next []virtv1.VirtualMachineVolumeRequest) ([]byte, error) {
	return json.Marshal(testThenSet("/status/volumeRequests", old, next))
}

// Migrating reports whether a migration of the VMI is under way: hot-plug
// work waits for it to end.
func Migrating(vmi *virtv1.VirtualMachineInstance) bool {
	m := vmi.Status.MigrationState
	return m != nil && !m.Completed && !m.Failed
}
