package check

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// IsMigrating reports whether a VMI has a migration that has neither
// completed nor failed. It is deliberately conservative: a migration state
// without a start time still counts.
func IsMigrating(vmi *kubevirtv1.VirtualMachineInstance) bool {
	ms := vmi.Status.MigrationState
	return ms != nil && !ms.Completed && !ms.Failed
}

// IsTerminating reports whether an object has a deletionTimestamp.
func IsTerminating(obj metav1.Object) bool {
	return obj.GetDeletionTimestamp() != nil
}

// VMOwner returns the VMI's controller owner reference if it is a KubeVirt
// VirtualMachine (kind VirtualMachine, API group kubevirt.io or unset), or
// nil: then the VMI is standalone as far as the checks are concerned.
func VMOwner(vmi *kubevirtv1.VirtualMachineInstance) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(vmi)
	if ref == nil || ref.Kind != "VirtualMachine" {
		return nil
	}
	if ref.APIVersion != "" && !strings.HasPrefix(ref.APIVersion, kubevirtv1.SchemeGroupVersion.Group+"/") {
		return nil
	}
	return ref
}

// HasPendingAdd reports whether the VM has an addvolume request for volume.
func HasPendingAdd(vm *kubevirtv1.VirtualMachine, volume string) bool {
	for _, r := range vm.Status.VolumeRequests {
		if r.AddVolumeOptions != nil && r.AddVolumeOptions.Name == volume {
			return true
		}
	}
	return false
}

// HasPendingRemove reports whether the VM has a removevolume request for volume.
func HasPendingRemove(vm *kubevirtv1.VirtualMachine, volume string) bool {
	for _, r := range vm.Status.VolumeRequests {
		if r.RemoveVolumeOptions != nil && r.RemoveVolumeOptions.Name == volume {
			return true
		}
	}
	return false
}

// isDetaching reports whether a volume status phase is part of a detach.
func isDetaching(p kubevirtv1.VolumePhase) bool {
	return p == kubevirtv1.HotplugVolumeDetaching || p == kubevirtv1.HotplugVolumeUnMounted
}

// named reports whether an object has the name and namespace every object
// read from a server has; the checks skip objects without them.
func named(obj metav1.Object) bool {
	return obj.GetName() != "" && obj.GetNamespace() != ""
}
