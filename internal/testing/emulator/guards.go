package emulator

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReasonHotPlugVolumeError is the reason of the VM's Failure condition when
// the VM controller could not bring the VMI's volumes in step (KubeVirt
// v1.9.0 pkg/virt-controller/watch/vm/vm.go:120, 3336-3338).
const ReasonHotPlugVolumeError = "HotPlugVolumeError"

// dataVolumesReady reports whether every DataVolume of the VM's
// dataVolumeTemplates exists and is Succeeded, WaitForFirstConsumer or
// PendingPopulation (vm.go:512-572). The emulator creates no DataVolumes: a
// missing one is not ready.
func (e *Emulator) dataVolumesReady(ctx context.Context, vm *virtv1.VirtualMachine) (bool, error) {
	for _, t := range vm.Spec.DataVolumeTemplates {
		dv := &cdiv1.DataVolume{}
		err := e.ctrl.cache.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: t.Name}, dv)
		if client.IgnoreNotFound(err) != nil {
			return false, err
		}
		if err != nil {
			return false, nil
		}
		switch dv.Status.Phase {
		case cdiv1.Succeeded, cdiv1.WaitForFirstConsumer, cdiv1.PendingPopulation:
		default:
			return false, nil
		}
	}
	return true, nil
}

// setSyncFailure sets (err != nil) or clears the VM's Failure condition as
// processFailureCondition does (vm.go:2790-2809); an unchanged failure keeps
// its transition time.
func setSyncFailure(st *virtv1.VirtualMachineStatus, err error) {
	var kept []virtv1.VirtualMachineCondition
	var old *virtv1.VirtualMachineCondition
	for i := range st.Conditions {
		if st.Conditions[i].Type == virtv1.VirtualMachineFailure {
			old = &st.Conditions[i]
			continue
		}
		kept = append(kept, st.Conditions[i])
	}
	if err != nil {
		c := virtv1.VirtualMachineCondition{
			Type: virtv1.VirtualMachineFailure, Status: corev1.ConditionTrue, Reason: ReasonHotPlugVolumeError,
			Message: err.Error(), LastTransitionTime: metav1.Now(),
		}
		if old != nil && old.Reason == c.Reason && old.Message == c.Message && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		kept = append(kept, c)
	}
	st.Conditions = kept
}
