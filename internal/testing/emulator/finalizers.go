package emulator

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/virthandler"
)

// Adoption, finalizers and deletion as in KubeVirt v1.9.0: virt-api's
// mutating webhook gives every VMI kubevirt.io/foregroundDeleteVirtualMachine
// (vmi-mutator.go:128; here the first pass over the VMI adds it);
// virt-controller gives VMs and the VMIs it creates
// kubevirt.io/virtualMachineControllerFinalize (vm.go:1300, 2363-2371) and
// adopts a same-named orphan VMI (vm.go:410-425).

func hasFinalizer(obj client.Object, f string) bool { return slices.Contains(obj.GetFinalizers(), f) }

func withoutFinalizer(obj client.Object, f string) bool {
	fins := obj.GetFinalizers()
	kept := slices.DeleteFunc(slices.Clone(fins), func(s string) bool { return s == f })
	obj.SetFinalizers(kept)
	return len(kept) != len(fins)
}

// adoptOrphan makes vm the controller of a same-named VMI that has none
// (ClaimVirtualMachineInstanceByName: neither of them being deleted). It
// reports whether it wrote.
func (e *Emulator) adoptOrphan(ctx context.Context, vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) (bool, error) {
	if vmi == nil || paused(vmi) || vm.DeletionTimestamp != nil || vmi.DeletionTimestamp != nil || metav1.GetControllerOf(vmi) != nil {
		return false, nil
	}
	e.log.Info("adopting orphan VMI", "namespace", vm.Namespace, "name", vm.Name)
	vmi.OwnerReferences = append(vmi.OwnerReferences, *metav1.NewControllerRef(vm, virtv1.VirtualMachineGroupVersionKind))
	return true, e.writeVMI(ctx, vmi)
}

// syncDeletingVM is vm.go:3236-3249: stop the VM's VMI, then (or at once
// when there is none, or the VM is deleted with orphan propagation) drop
// the VM's finalizer.
func (e *Emulator) syncDeletingVM(ctx context.Context, vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) (bool, error) {
	if vmi != nil && !metav1.IsControlledBy(vmi, vm) {
		vmi = nil
	}
	if vmi != nil {
		if wrote, err := e.releaseFinalVMI(ctx, vmi); wrote || err != nil {
			return wrote, err
		}
	}
	if vmi == nil || hasFinalizer(vm, metav1.FinalizerOrphanDependents) {
		if !withoutFinalizer(vm, virtv1.VirtualMachineControllerFinalizer) {
			return false, nil
		}
		return true, e.client.Update(ctx, vm)
	}
	if vmi.DeletionTimestamp != nil {
		return false, nil
	}
	e.log.Info("stopping VMI of a deleted VM", "namespace", vm.Namespace, "name", vm.Name)
	return true, client.IgnoreNotFound(e.client.Delete(ctx, vmi, client.PropagationPolicy(metav1.DeletePropagationBackground)))
}

// releaseFinalVMI drops the VM controller's finalizer from its final VMI
// (vm.go:2504-2510).
func (e *Emulator) releaseFinalVMI(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (bool, error) {
	if paused(vmi) || !vmi.IsFinal() || !withoutFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer) {
		return false, nil
	}
	return true, e.writeVMI(ctx, vmi)
}

// syncDeletingVMI takes a deleted VMI to its end (lifecycle.go:70-76,
// 459-477): its pods are deleted, the VMI turns Succeeded once they are
// gone, then the foreground finalizer goes (and the VM controller's, if no
// VM owns the VMI any more).
func (e *Emulator) syncDeletingVMI(ctx context.Context, id types.NamespacedName, vmi *virtv1.VirtualMachineInstance, launchers, attach []corev1.Pod) (bool, time.Duration, error) {
	wrote, _, err := e.deleteAttachmentPods(ctx, id, vmi, launchers, attach)
	if err != nil {
		return false, 0, err
	}
	for i := range launchers {
		if metav1.IsControlledBy(&launchers[i], vmi) && launchers[i].DeletionTimestamp == nil {
			if err := e.deletePod(ctx, id, &launchers[i]); err != nil {
				return false, 0, err
			}
			wrote = true
		}
	}
	if wrote {
		return true, 0, nil
	}
	// The launcher pods are gone, and the domain with them.
	if virthandler.Shutdown(vmi) {
		return true, 0, e.writeVMI(ctx, vmi)
	}
	changed := withoutFinalizer(vmi, virtv1.VirtualMachineInstanceFinalizer)
	if owner := metav1.GetControllerOf(vmi); owner == nil || owner.Kind != "VirtualMachine" {
		changed = withoutFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer) || changed
	} else if vm, err := getOrNil(ctx, e.client, vmi.Namespace, owner.Name, &virtv1.VirtualMachine{}); err != nil {
		return false, 0, err
	} else if vm == nil || vm.UID != owner.UID {
		changed = withoutFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer) || changed
	}
	if !changed {
		return false, 0, nil
	}
	return true, 0, e.writeVMI(ctx, vmi)
}
