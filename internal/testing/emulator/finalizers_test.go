package emulator_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/emulator"
)

// KubeVirt v1.9.0 pkg/virt-controller/watch/vm/vm.go:410-425: a VM adopts
// the orphan VMI of its name; then the declarative sync
// (pkg/storage/hotplug/hotplug.go:95-120) drops the VMI-only hot-plug.
func TestVMAdoptsOrphanVMIAndSyncsIt(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.pvc(t, ns, "extra")
	orphan := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm1"}}
	if err := e.cl.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	e.runningVMI(t, ns, "vm1")
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", addOpts("extra", "extra")); err != nil {
		t.Fatal(err)
	}
	e.attached(t, ns, "vm1", "extra", "extra")
	consistently(t, 300*time.Millisecond, func() error {
		if ref := metav1.GetControllerOf(e.getVMI(t, ns, "vm1")); ref != nil {
			return fmt.Errorf("VMI without VM got owner %+v", ref)
		}
		return nil
	})

	vm := e.vm(t, ns, "vm1")
	eventually(t, 3*time.Second, func() error {
		if ref := metav1.GetControllerOf(e.getVMI(t, ns, "vm1")); ref == nil || ref.UID != vm.UID {
			return fmt.Errorf("VMI controller %+v, want the VM", ref)
		}
		return nil
	})
	e.detached(t, ns, "vm1", "extra")
	if got := e.getVMI(t, ns, "vm1").UID; got != orphan.UID {
		t.Errorf("VMI replaced (uid %s, was %s), want the orphan adopted", got, orphan.UID)
	}
}

// Finalizers of KubeVirt v1.9.0 (api core/v1 types.go:1240-1243): the VM
// carries kubevirt.io/virtualMachineControllerFinalize (vm.go:2363-2371), its
// VMI that one (vm.go:1300) and kubevirt.io/foregroundDeleteVirtualMachine
// (vmi-mutator.go:128). Deleting the VM stops the VMI first (vm.go:3236-3249);
// the VMI goes once its pods are gone and it is final (lifecycle.go:459-477).
func TestVMDeletionGoesThroughFinalizers(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.vm(t, ns, "vm1")
	vmi := e.runningVMI(t, ns, "vm1")
	vm := e.getVM(t, ns, "vm1")
	if !slices.Contains(vm.Finalizers, virtv1.VirtualMachineControllerFinalizer) {
		t.Errorf("VM finalizers %v", vm.Finalizers)
	}
	for _, f := range []string{virtv1.VirtualMachineControllerFinalizer, virtv1.VirtualMachineInstanceFinalizer} {
		if !slices.Contains(vmi.Finalizers, f) {
			t.Errorf("VMI finalizers %v, want %s", vmi.Finalizers, f)
		}
	}
	rec := e.record(t, ns, "vm1")
	if err := e.cl.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(vm), &virtv1.VirtualMachine{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VM still there (%v)", err)
		}
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(vmi), &virtv1.VirtualMachineInstance{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VMI still there (%v)", err)
		}
		return nil
	})
	terminating := false
	rec.mu.Lock()
	for _, v := range rec.seen {
		terminating = terminating || (v.DeletionTimestamp != nil && v.Status.Phase == virtv1.Succeeded)
	}
	rec.mu.Unlock()
	if !terminating {
		t.Error("the VMI was never seen terminating and Succeeded before it went")
	}
	pods := &corev1.PodList{}
	if err := e.cl.List(ctx, pods, client.InNamespace(ns)); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods left: %d (%v)", len(pods.Items), err)
	}
}

// Deleting the VM with orphan propagation leaves the VMI running, without
// owner (vm.go:3237: the VM only drops its finalizer); the standalone VMI
// then goes on its own deletion.
func TestVMOrphanDeletionKeepsVMI(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.waitGCWatchesKubeVirt(t, ns)
	e.vm(t, ns, "vm1")
	vmi := e.runningVMI(t, ns, "vm1")
	// The collector must know the VMI as the VM's dependent before the VM
	// goes, or it lets the VM go without orphaning it and then deletes it
	// as the dependent of a VM that is gone (seen on a loaded machine).
	e.waitGCWatchesKubeVirt(t, ns)
	if err := e.cl.Delete(ctx, e.getVM(t, ns, "vm1"), client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	// The kube garbage collector strips the owner and the orphan finalizer.
	eventually(t, 10*time.Second, func() error {
		left := &virtv1.VirtualMachine{}
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vm1"}, left); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VM still there (%v), finalizers %v", err, left.Finalizers)
		}
		if got := e.getVMI(t, ns, "vm1"); len(got.OwnerReferences) != 0 || got.DeletionTimestamp != nil || got.UID != vmi.UID {
			return fmt.Errorf("VMI owners %v deleting %v", got.OwnerReferences, got.DeletionTimestamp)
		}
		return nil
	})
	if err := e.cl.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(vmi), &virtv1.VirtualMachineInstance{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("standalone VMI still there (%v)", err)
		}
		return nil
	})
}

// waitGCWatchesKubeVirt waits until the kube garbage collector watches VMs
// and VMIs: it discovers new resources only every 30s, and until then it
// cannot orphan a VMI (it deletes it as the dependent of a VM it saw go).
// The probe: a paused VM and VMI, each owning a ConfigMap, deleted with
// orphan propagation; only a collector that watches them removes the
// orphan finalizer. Called again after objects are created, it is also a
// barrier: the collector's graph takes events in one queue and each
// watch in order, so once the probes are gone it has seen every VM and
// VMI created before them.
func (e *testEnv) waitGCWatchesKubeVirt(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	paused := map[string]string{emulator.PausedAnnotation: "true"}
	owners := []client.Object{
		&virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gc-probe", Annotations: paused}},
		&virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gc-probe", Annotations: paused}},
	}
	for _, o := range owners {
		if err := e.cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		gvk, err := e.cl.GroupVersionKindFor(o)
		if err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "gc-probe-",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(o, gvk)}}}
		if err := e.cl.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if err := e.cl.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 90*time.Second, func() error {
		for _, o := range owners {
			if err := e.cl.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the garbage collector has not orphaned the dependents of %T yet (%v)", o, err)
			}
		}
		return nil
	})
}
