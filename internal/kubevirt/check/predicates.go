package check

import (
	"strings"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// IsMigrating reports whether a VMI has a migration that has neither
// completed nor failed. It is deliberately conservative: a migration state
// without a start time still counts.
func IsMigrating(vmi *snapshot.VMI) bool {
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
func VMOwner(vmi *snapshot.VMI) *metav1.OwnerReference {
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
func HasPendingAdd(vm *snapshot.VM, volume string) bool {
	for _, r := range vm.Status.VolumeRequests {
		if r.AddVolumeOptions != nil && r.AddVolumeOptions.Name == volume {
			return true
		}
	}
	return false
}

// HasPendingRemove reports whether the VM has a removevolume request for volume.
func HasPendingRemove(vm *snapshot.VM, volume string) bool {
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

// mayStick reports whether a hot-plug in phase p may be stuck however its
// spec stands: a detach in progress, or a plug virt-handler has still to
// mount (FindStuckHotplugPhases).
func mayStick(p kubevirtv1.VolumePhase) bool {
	return isDetaching(p) || p == kubevirtv1.HotplugVolumeAttachedToNode
}

// named reports whether an object has the name and namespace every object
// read from a server has; the checks skip objects without them.
func named(obj metav1.Object) bool {
	return obj.GetName() != "" && obj.GetNamespace() != ""
}

// StartingUp reports whether vm is about to start or failing to start: it
// wants to run, and vmi (its VMI, nil when there is none) does not run and
// is not going away. A finished VMI counts as "about to start" only when the
// run strategy starts it again.
func StartingUp(vm *snapshot.VM, vmi *snapshot.VMI) bool {
	if vm.DeletionTimestamp != nil || !wantsToRun(vm) {
		return false
	}
	if vmi == nil {
		return true
	}
	if vmi.DeletionTimestamp != nil {
		return false // stopping or restarting: decide once it is gone
	}
	switch vmi.Status.Phase {
	case kubevirtv1.VmPhaseUnset, kubevirtv1.Pending, kubevirtv1.Scheduling:
		return true
	case kubevirtv1.Failed:
		return restartsFinished(vm, true)
	case kubevirtv1.Succeeded:
		return restartsFinished(vm, false)
	}
	return false // Scheduled, Running, Unknown
}

// wantsToRun: a pending Start request, spec.running true, or a run
// strategy that runs the VM (Always, RerunOnFailure, Once).
func wantsToRun(vm *snapshot.VM) bool {
	for _, r := range vm.Status.StateChangeRequests {
		if r.Action == kubevirtv1.StartRequest {
			return true
		}
	}
	if vm.Spec.Running != nil {
		return *vm.Spec.Running
	}
	if vm.Spec.RunStrategy == nil {
		return false
	}
	switch *vm.Spec.RunStrategy {
	case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyOnce:
		return true
	}
	return false
}

// restartsFinished: KubeVirt starts a new VMI after a finished one for
// Always (and spec.running: true), and after a failed one for RerunOnFailure.
func restartsFinished(vm *snapshot.VM, failed bool) bool {
	if vm.Spec.Running != nil {
		return *vm.Spec.Running
	}
	if vm.Spec.RunStrategy == nil {
		return false
	}
	switch *vm.Spec.RunStrategy {
	case kubevirtv1.RunStrategyAlways:
		return true
	case kubevirtv1.RunStrategyRerunOnFailure:
		return failed
	}
	return false
}
