package snapshot

import (
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// VMIVolume returns the VMI spec volume called name, or nil.
func VMIVolume(vmi *VMI, name string) *kubevirtv1.Volume {
	return VolumeNamed(vmi.Spec.Volumes, name)
}

// VolumeNamed returns the volume among vols called name, or nil.
func VolumeNamed(vols []kubevirtv1.Volume, name string) *kubevirtv1.Volume {
	for i := range vols {
		if vols[i].Name == name {
			return &vols[i]
		}
	}
	return nil
}

// TemplateVolume returns the volume called name in a typed VM's
// spec.template.spec.volumes (a VM read live), or nil.
func TemplateVolume(vm *kubevirtv1.VirtualMachine, name string) *kubevirtv1.Volume {
	if vm.Spec.Template == nil {
		return nil
	}
	return VolumeNamed(vm.Spec.Template.Spec.Volumes, name)
}

// VMVolume returns the volume called name in the VM's
// spec.template.spec.volumes, or nil.
func VMVolume(vm *VM, name string) *kubevirtv1.Volume {
	if vm == nil || vm.Spec.Template == nil {
		return nil
	}
	return VolumeNamed(vm.Spec.Template.Spec.Volumes, name)
}

// ClaimName returns the PVC a volume uses: the claim of a
// persistentVolumeClaim source or the name of a dataVolume source (CDI names
// the PVC after the DataVolume). It returns "" for other sources.
func ClaimName(v *kubevirtv1.Volume) string {
	switch {
	case v == nil:
		return ""
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.DataVolume != nil:
		return v.DataVolume.Name
	}
	return ""
}

// HotplugSourceClaim returns the claim (or DataVolume) an addvolume
// request's source names, or "".
func HotplugSourceClaim(src *kubevirtv1.HotplugVolumeSource) string {
	switch {
	case src == nil:
		return ""
	case src.PersistentVolumeClaim != nil:
		return src.PersistentVolumeClaim.ClaimName
	case src.DataVolume != nil:
		return src.DataVolume.Name
	}
	return ""
}

// Hotpluggable reports whether a volume is marked hotpluggable, which the
// removevolume API requires.
func Hotpluggable(v *kubevirtv1.Volume) bool {
	switch {
	case v == nil:
		return false
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.Hotpluggable
	case v.DataVolume != nil:
		return v.DataVolume.Hotpluggable
	}
	return false
}

// VolumeStatusClaims returns every claim name a VMI volume status entry may
// stand for: the claim of the VMI spec volume of that name, the claim in
// status.persistentVolumeClaimInfo and, when neither is known, the volume
// name itself (the KubeVirt CSI driver names volumes after their claims).
// Over-matching is deliberate: callers use it to refuse actions.
func VolumeStatusClaims(vmi *VMI, vs *VolumeStatus) []string {
	var out []string
	EachVolumeStatusClaim(vmi, vs, func(c string) { out = append(out, c) })
	return out
}

// EachVolumeStatusClaim calls fn for each claim VolumeStatusClaims returns,
// without allocating.
func EachVolumeStatusClaim(vmi *VMI, vs *VolumeStatus, fn func(claim string)) {
	spec := ClaimName(VMIVolume(vmi, vs.Name))
	status := ""
	if vs.PersistentVolumeClaimInfo != nil {
		status = vs.PersistentVolumeClaimInfo.ClaimName
	}
	if spec != "" {
		fn(spec)
	}
	if status != "" && status != spec {
		fn(status)
	}
	if spec == "" && status == "" && vs.Name != "" {
		fn(vs.Name)
	}
}
