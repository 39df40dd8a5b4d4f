package check_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

func TestStartingUp(t *testing.T) {
	vm := func(mod func(*kubevirtv1.VirtualMachine)) *kubevirtv1.VirtualMachine {
		v := fixture.VM("vm")
		if mod != nil {
			mod(v)
		}
		return v
	}
	runStrategy := func(s kubevirtv1.VirtualMachineRunStrategy) func(*kubevirtv1.VirtualMachine) {
		return func(v *kubevirtv1.VirtualMachine) { v.Spec.RunStrategy = &s }
	}
	running := func(b bool) func(*kubevirtv1.VirtualMachine) {
		return func(v *kubevirtv1.VirtualMachine) { v.Spec.RunStrategy, v.Spec.Running = nil, &b }
	}
	startRequest := func(v *kubevirtv1.VirtualMachine) {
		m := kubevirtv1.RunStrategyManual
		v.Spec.RunStrategy = &m
		v.Status.StateChangeRequests = []kubevirtv1.VirtualMachineStateChangeRequest{{Action: kubevirtv1.StartRequest}}
	}
	vmi := func(p kubevirtv1.VirtualMachineInstancePhase) *kubevirtv1.VirtualMachineInstance {
		return fixture.VMI("vm", fixture.Phase(p))
	}
	deleting := func(v *kubevirtv1.VirtualMachineInstance) *kubevirtv1.VirtualMachineInstance {
		v.DeletionTimestamp = &metav1.Time{Time: time.Unix(0, 0)}
		return v
	}
	always, halted := runStrategy(kubevirtv1.RunStrategyAlways), runStrategy(kubevirtv1.RunStrategyHalted)
	for _, tc := range []struct {
		name string
		vm   *kubevirtv1.VirtualMachine
		vmi  *kubevirtv1.VirtualMachineInstance
		want bool
	}{
		{"Always, no VMI -> starting", vm(always), nil, true},
		{"RerunOnFailure, no VMI -> starting", vm(runStrategy(kubevirtv1.RunStrategyRerunOnFailure)), nil, true},
		{"Once, no VMI -> starting", vm(runStrategy(kubevirtv1.RunStrategyOnce)), nil, true},
		{"running: true, no VMI -> starting", vm(running(true)), nil, true},
		{"Manual with a Start request, no VMI -> starting", vm(startRequest), nil, true},
		{"Halted, no VMI -> not starting", vm(halted), nil, false},
		{"running: false, no VMI -> not starting", vm(running(false)), nil, false},
		{"Manual, no request -> not starting", vm(runStrategy(kubevirtv1.RunStrategyManual)), nil, false},
		{"no run strategy -> not starting", vm(func(v *kubevirtv1.VirtualMachine) { v.Spec.RunStrategy = nil }), nil, false},
		{"Always, VMI phase unset -> starting", vm(always), vmi(kubevirtv1.VmPhaseUnset), true},
		{"Always, VMI Pending -> starting", vm(always), vmi(kubevirtv1.Pending), true},
		{"Always, VMI Scheduling -> starting", vm(always), vmi(kubevirtv1.Scheduling), true},
		{"Always, VMI Failed -> starting again", vm(always), vmi(kubevirtv1.Failed), true},
		{"RerunOnFailure, VMI Failed -> starting again", vm(runStrategy(kubevirtv1.RunStrategyRerunOnFailure)), vmi(kubevirtv1.Failed), true},
		{"Once, VMI Failed -> not started again", vm(runStrategy(kubevirtv1.RunStrategyOnce)), vmi(kubevirtv1.Failed), false},
		{"Always, VMI Succeeded -> starting again", vm(always), vmi(kubevirtv1.Succeeded), true},
		{"RerunOnFailure, VMI Succeeded -> not started again", vm(runStrategy(kubevirtv1.RunStrategyRerunOnFailure)), vmi(kubevirtv1.Succeeded), false},
		{"Always, VMI Scheduled -> not starting (launching)", vm(always), vmi(kubevirtv1.Scheduled), false},
		{"Always, VMI Running -> not starting", vm(always), vmi(kubevirtv1.Running), false},
		{"Always, VMI Unknown -> not starting", vm(always), vmi(kubevirtv1.Unknown), false},
		{"Always, VMI Pending but deleted -> not starting", vm(always), deleting(vmi(kubevirtv1.Pending)), false},
		{"Halted, VMI Pending -> not starting", vm(halted), vmi(kubevirtv1.Pending), false},
		{"VM being deleted -> not starting", vm(func(v *kubevirtv1.VirtualMachine) {
			always(v)
			v.DeletionTimestamp = &metav1.Time{Time: time.Unix(0, 0)}
		}), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := snapshot.VMOf(tc.vm)
			var vmi *snapshot.VMI
			if tc.vmi != nil {
				v := snapshot.VMIOf(tc.vmi)
				vmi = &v
			}
			if got := check.StartingUp(&vm, vmi); got != tc.want {
				t.Errorf("StartingUp = %v, want %v", got, tc.want)
			}
		})
	}
}
