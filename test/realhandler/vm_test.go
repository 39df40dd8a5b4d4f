package realhandler

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/kvtest"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// guestVM creates a running VM of the tiny guest and waits until the guest
// says it is up.
func (w *world) guestVM(name string) {
	w.T.Helper()
	always := kubevirtv1.RunStrategyAlways
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &always, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: w.guestSpec(),
		}},
	}
	if err := w.C.Create(context.Background(), vm); err != nil {
		w.T.Fatal(err)
	}
	w.waitConsole(name, 90*time.Second, "TETHER-GUEST-UP")
}

// A VM-level addvolume reaches the guest and is persisted in the VM spec:
// tether finds nothing to remove and fix --apply leaves it in the guest;
// removevolume through the VM takes it out of the guest. Hot-plugged again
// and the VM stopped: tether reports nothing it may act on.
func TestReal_VMRoute_hotplugInUse_neverRemoved(t *testing.T) {
	w := newWorld(t)
	w.claims("data")
	w.guestVM("vm1")
	w.addVolume(virtapi.VM, "vm1", "data")
	w.WaitPhase("vm1", "data", kubevirtv1.VolumeReady)
	w.waitConsole("vm1", time.Minute, `TETHER-DISK-ADDED name=sd\w+ serial=data `)

	scope := kvtest.Tenant(t, w.Env, w.NS, "vm1")
	kvtest.TenantWants(t, w.Env, w.NS, "vm1", "data")
	for _, f := range kvtest.Audit(t, binDir, w.Env, scope) {
		if f.Volume == "data" && f.Action.Safe {
			t.Fatalf("a hot-plug in the VM spec that the guest uses got a safe action: %+v", f)
		}
	}
	w.fixAppliesNothing(scope, "on a world with nothing to fix")
	time.Sleep(3 * time.Second)
	if removed(w.console("vm1"), "data") || w.Phase("vm1", "data") != kubevirtv1.VolumeReady {
		t.Fatalf("the guest lost the disk it uses:\n%s", w.console("vm1"))
	}
	w.RemoveVolume(virtapi.VM, "vm1", "data")
	w.waitConsole("vm1", 2*time.Minute, `TETHER-DISK-REMOVED name=sd\w+ serial=data`)
	t.Logf("the guest's console:\n%s", w.console("vm1"))

	w.addVolume(virtapi.VM, "vm1", "data")
	w.WaitPhase("vm1", "data", kubevirtv1.VolumeReady)
	w.SetRunStrategy("vm1", kubevirtv1.RunStrategyHalted)
	testenv.Eventually(t, 2*time.Minute, "the VMI of the stopped VM gone", func() (bool, error) {
		var v kubevirtv1.VirtualMachineInstance
		err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: "vm1"}, &v)
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
	noSafeAction(t, kvtest.Audit(t, binDir, w.Env, []string{"-n", w.NS}), "for a VM stopped with its hot-plug")
}
