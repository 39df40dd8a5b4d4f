package emulator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/emulator"
)

func annotate(t *testing.T, e *testEnv, obj client.Object, key, value string) {
	t.Helper()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	if value == "" {
		delete(a, key)
	} else {
		a[key] = value
	}
	obj.SetAnnotations(a)
	if err := e.cl.Patch(context.Background(), obj, patch); err != nil {
		t.Fatal(err)
	}
}

func TestPausedObjectsAreLeftAlone(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.vm(t, ns, "vm1")
	e.pvc(t, ns, "data1")
	e.runningVMI(t, ns, "vm1")
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", addOpts("data1", "data1")); err != nil {
		t.Fatal(err)
	}
	e.attached(t, ns, "vm1", "data1", "data1")

	// A paused VM keeps its VMI even when told to halt.
	vm := e.getVM(t, ns, "vm1")
	annotate(t, e, vm, emulator.PausedAnnotation, "true")
	halted := virtv1.RunStrategyHalted
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.RunStrategy = &halted
	if err := e.cl.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	consistently(t, 400*time.Millisecond, func() error {
		vmi := &virtv1.VirtualMachineInstance{}
		return e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vm1"}, vmi)
	})
	always := virtv1.RunStrategyAlways
	patch = client.MergeFrom(vm.DeepCopy())
	vm.Spec.RunStrategy = &always
	if err := e.cl.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}

	// Drift by hand: the VM spec loses the volume while the paused VMI keeps
	// its hot-plug status (the state of kubevirt/csi-driver issue 182).
	vmi := e.getVMI(t, ns, "vm1")
	annotate(t, e, vmi, emulator.PausedAnnotation, "true")
	annotate(t, e, vm, emulator.PausedAnnotation, "")
	vm = e.getVM(t, ns, "vm1")
	patch = client.MergeFrom(vm.DeepCopy())
	var vols []virtv1.Volume
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name != "data1" {
			vols = append(vols, v)
		}
	}
	var disks []virtv1.Disk
	for _, d := range vm.Spec.Template.Spec.Domain.Devices.Disks {
		if d.Name != "data1" {
			disks = append(disks, d)
		}
	}
	vm.Spec.Template.Spec.Volumes, vm.Spec.Template.Spec.Domain.Devices.Disks = vols, disks
	if err := e.cl.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	consistently(t, 400*time.Millisecond, func() error {
		vmi := e.getVMI(t, ns, "vm1")
		if st := hotplugStatus(vmi, "data1"); st == nil || st.HotplugVolume == nil {
			return fmt.Errorf("paused VMI lost its hot-plug volume: %+v", vmi.Status.VolumeStatus)
		}
		if len(e.attachmentPods(t, ns)) != 1 {
			return errors.New("attachment pod of a paused VMI went away")
		}
		return nil
	})

	// Unpaused, the declarative sync catches up and detaches it.
	annotate(t, e, e.getVMI(t, ns, "vm1"), emulator.PausedAnnotation, "")
	e.detached(t, ns, "vm1", "data1")
}

func TestInjectedFaults(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "solo"}}
	if err := e.cl.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	e.pvc(t, ns, "data1")
	e.runningVMI(t, ns, "solo")
	add := func(c rest.Interface) error {
		o := addOpts("data1", "data1")
		o.DryRun = virtapi.DryRunAll
		return virtapi.AddVolume(ctx, c, virtapi.VMI, ns, "solo", o)
	}

	e.emu.InjectFaults(emulator.Fault{Count: 2, Status: http.StatusInternalServerError})
	for i := range 2 {
		if err := add(e.sub); !apierrors.IsInternalError(err) {
			t.Errorf("call %d: %v, want 500", i+1, err)
		}
	}
	if err := add(e.sub); err != nil {
		t.Errorf("third call after a 2-call fault: %v", err)
	}

	e.emu.InjectFaults(emulator.Fault{Status: http.StatusConflict, Subresource: "removevolume"})
	if err := add(e.sub); err != nil {
		t.Errorf("addvolume must not take a removevolume fault: %v", err)
	}
	err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VMI, ns, "solo", &virtv1.RemoveVolumeOptions{Name: "x"})
	if !apierrors.IsConflict(err) || e.emu.PendingFaults() != 0 {
		t.Errorf("removevolume: %v, want the injected 409", err)
	}

	e.emu.InjectFaults(emulator.Fault{Hang: true})
	cfg := rest.CopyConfig(e.cp.Config)
	cfg.Timeout = 500 * time.Millisecond
	short, err := virtapi.NewSubresourceClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = add(short)
	if err == nil || time.Since(start) < 400*time.Millisecond {
		t.Errorf("hang: %v after %s, want a timeout", err, time.Since(start))
	}
	if err := add(e.sub); err != nil {
		t.Errorf("after the hang: %v", err)
	}

	// Faults can also come from the ConfigMap (for the command).
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.emu.Namespace(), Name: emulator.FaultConfigMap},
		Data:       map[string]string{"faults": `[{"status": 503, "namespace": "` + ns + `"}]`},
	}
	if err := e.cl.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, func() error {
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("fault ConfigMap not consumed yet (%v)", err)
		}
		// The emulator deletes the ConfigMap, then queues its faults: wait
		// for both, or a loaded machine calls in between.
		if n := e.emu.PendingFaults(); n != 1 {
			return fmt.Errorf("%d faults queued, want the ConfigMap's one", n)
		}
		return nil
	})
	if err := add(e.sub); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("fault from ConfigMap: %v, want 503", err)
	}
}
