package emulator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator"
)

// With virt-handler down on the VMI's node nothing unmounts a removed
// volume: its entry stays Ready and virt-controller keeps the attachment
// pod (KubeVirt v1.9.0 volume-hotplug.go:105-117, storage.go:344-352). Once
// the handler is back, the unplug completes.
func TestHandlerDownKeepsUnplugMounted(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	pod := e.vmWithHotplug(t, ns, "data1")
	e.emu.SetHandlerDown("node-1", true)
	e.removeVolume(t, ns, "vm1", "data1")
	eventually(t, 3*time.Second, func() error {
		if hasVolume(e.getVMI(t, ns, "vm1"), "data1") {
			return fmt.Errorf("data1 still in the VMI spec")
		}
		return nil
	})
	consistently(t, 600*time.Millisecond, func() error {
		st := hotplugStatus(e.getVMI(t, ns, "vm1"), "data1")
		if st == nil || st.Phase != virtv1.VolumeReady || st.HotplugVolume.AttachPodName != pod.Name {
			return fmt.Errorf("with virt-handler down the unplug moved on: %+v", st)
		}
		p := &corev1.Pod{}
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil || p.DeletionTimestamp != nil {
			return fmt.Errorf("attachment pod deleted while its volume is mounted (%v)", err)
		}
		return nil
	})
	e.emu.SetHandlerDown("node-1", false)
	e.detached(t, ns, "vm1", "data1")
	eventually(t, 3*time.Second, func() error {
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("attachment pod still there after the handler came back (%v)", err)
		}
		return nil
	})
}

func hasVolume(vmi *virtv1.VirtualMachineInstance, name string) bool {
	for _, v := range vmi.Spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

// The switch also comes from the fault ConfigMap (key handlersDown). A VMI
// on a node without handler stays Scheduled, and a hot-plug stops at
// AttachedToNode: Running and MountedToPod are virt-handler's to set
// (KubeVirt v1.9.0 pkg/virt-handler/vm.go:497-531).
func TestHandlerDownFromConfigMap(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	setDown := func(nodes string) {
		t.Helper()
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.emu.Namespace(), Name: emulator.FaultConfigMap},
			Data:       map[string]string{"handlersDown": nodes},
		}
		if err := e.cl.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Second, func() error {
			if err := e.cl.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ConfigMap not consumed yet (%v)", err)
			}
			return nil
		})
	}
	setDown(`["node-1"]`)
	if got := e.emu.HandlersDown(); len(got) != 1 || got[0] != "node-1" {
		t.Fatalf("handlers down %v, want [node-1]", got)
	}
	e.vm(t, ns, "vm1")
	eventually(t, 3*time.Second, func() error {
		vmi := &virtv1.VirtualMachineInstance{}
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vm1"}, vmi); err != nil {
			return err
		}
		if vmi.Status.Phase != virtv1.Scheduled {
			return fmt.Errorf("phase %q", vmi.Status.Phase)
		}
		return nil
	})
	consistently(t, 400*time.Millisecond, func() error {
		if p := e.getVMI(t, ns, "vm1").Status.Phase; p != virtv1.Scheduled {
			return fmt.Errorf("phase %q without virt-handler, want Scheduled", p)
		}
		return nil
	})
	setDown(`[]`)
	e.runningVMI(t, ns, "vm1")

	e.emu.SetHandlerDown("node-1", true)
	e.pvc(t, ns, "data1")
	e.addVolume(t, ns, "vm1", "data1", "data1")
	eventually(t, 3*time.Second, func() error {
		st := hotplugStatus(e.getVMI(t, ns, "vm1"), "data1")
		if st == nil || st.Phase != virtv1.HotplugVolumeAttachedToNode || st.HotplugVolume.AttachPodUID == "" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	consistently(t, 300*time.Millisecond, func() error {
		if st := hotplugStatus(e.getVMI(t, ns, "vm1"), "data1"); st.Phase != virtv1.HotplugVolumeAttachedToNode {
			return fmt.Errorf("phase %s without virt-handler, want AttachedToNode", st.Phase)
		}
		return nil
	})
	e.emu.SetHandlerDown("node-1", false)
	e.attached(t, ns, "vm1", "data1", "data1")
}
