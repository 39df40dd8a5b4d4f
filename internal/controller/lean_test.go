package controller_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// The controller's caches hold lean objects (snapshot.Lean), and it still
// decides and acts from them: a VMI-only hot-plug is detached once its grace
// period ends, and the disk of a stopped VM whose spec carries much more than
// its volumes gets the protection finalizer. The cached VM and VMI have lost
// their domain, annotations and managedFields, and kept their volumes.
func TestController_leanCaches_stillDecideAndAct(t *testing.T) {
	w := newWorld(t)
	w.env.InstallController(t, "rbac/protection")
	w.orphan("vm-lean", "pvc-lean")
	disk := fixture.PVC("disk-lean", fixture.InNamespace(w.ns))
	stopped := fixture.VM("stopped-lean", fixture.InNamespace(w.ns), fixture.WithVolume("disk-lean", fixture.PVC("disk-lean")))
	stopped.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine"}`}
	stopped.Spec.Template.ObjectMeta.Labels = map[string]string{"kubevirt.io/domain": "stopped-lean"}
	for _, o := range []client.Object{disk, stopped} {
		o.SetUID("")
		if err := w.c.Create(w.ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	cfg := w.cfg(2 * time.Second)
	cfg.Protection.Enabled = true
	mgr, err := controller.New(controller.Options{RestConfig: saConfig(w.env), Config: cfg, Namespace: w.ns, Log: testr.New(t), SkipNameValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("controller stopped: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })

	w.waitVMI("vm-lean", "pvc-lean detached", func(v *kubevirtv1.VirtualMachineInstance) bool { return !lists(v, "pvc-lean") })
	w.waitFinding("vm-lean", "pvc-lean", v1alpha1.PhaseResolved, string(drift.Applied))
	testenv.Eventually(t, 30*time.Second, "finalizer on the stopped VM's disk", func() (bool, error) {
		var got corev1.PersistentVolumeClaim
		err := w.c.Get(w.ctx, client.ObjectKeyFromObject(disk), &got)
		return err == nil && slices.Contains(got.Finalizers, inuse.Finalizer), err
	})

	// What the caches hold.
	cached := mgr.GetCache()
	var vmi kubevirtv1.VirtualMachineInstance
	if err := cached.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "vm-lean"}, &vmi); err != nil {
		t.Fatal(err)
	}
	live := w.vmi("vm-lean")
	if len(live.Spec.Domain.Resources.Requests) == 0 || len(live.ManagedFields) == 0 {
		t.Fatalf("the live VMI has no domain resources or managedFields: the comparison below proves nothing: %+v", live.Spec.Domain.Resources)
	}
	if !reflect.DeepEqual(vmi.Spec.Domain, kubevirtv1.DomainSpec{}) || vmi.ManagedFields != nil || vmi.Annotations != nil {
		t.Errorf("the cached VMI is not lean: domain %+v, %d managedFields, annotations %v", vmi.Spec.Domain, len(vmi.ManagedFields), vmi.Annotations)
	}
	if len(vmi.Spec.Volumes) != len(live.Spec.Volumes) || vmi.Status.Phase != kubevirtv1.Running || len(vmi.OwnerReferences) != 1 {
		t.Errorf("the cached VMI lost what the checks read: volumes %v, phase %s, owners %v", vmi.Spec.Volumes, vmi.Status.Phase, vmi.OwnerReferences)
	}
	var vm kubevirtv1.VirtualMachine
	if err := cached.Get(w.ctx, client.ObjectKeyFromObject(stopped), &vm); err != nil {
		t.Fatal(err)
	}
	if vm.Annotations != nil || vm.ManagedFields != nil || !reflect.DeepEqual(vm.Spec.Template.Spec.Domain, kubevirtv1.DomainSpec{}) {
		t.Errorf("the cached VM is not lean: annotations %v, %d managedFields, template domain %+v", vm.Annotations, len(vm.ManagedFields), vm.Spec.Template.Spec.Domain)
	}
	if vols := vm.Spec.Template.Spec.Volumes; len(vols) != 1 || vols[0].PersistentVolumeClaim == nil || vols[0].PersistentVolumeClaim.ClaimName != "disk-lean" ||
		vm.Spec.Template.ObjectMeta.Labels["kubevirt.io/domain"] != "stopped-lean" {
		t.Errorf("the cached VM lost what the checks read: template %+v", vm.Spec.Template)
	}
}
