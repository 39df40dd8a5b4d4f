package controller_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// `tether controller` with only protection enabled, as the ServiceAccount
// of config/rbac plus config/rbac/protection: a stopped VM's PVC gets the finalizer, its deletion is
// postponed, and deleting the VM releases it.
func TestController_protectionOnly_holdsStoppedVMDisk(t *testing.T) {
	w := newWorld(t)
	w.env.InstallController(t, "rbac/protection")
	cfg := config.Default()
	cfg.Scope.Namespaces = []string{w.ns}
	cfg.Protection.Enabled = true
	cfg.Protection.ReleaseDelay.Duration = 2 * time.Second
	w.start(&cfg)

	pvc := fixture.PVC("disk", fixture.InNamespace(w.ns))
	vm := fixture.VM("stopped", fixture.InNamespace(w.ns), fixture.WithVolume("disk", fixture.PVC("disk")))
	for _, o := range []client.Object{pvc, vm} {
		o.SetUID("")
		if err := w.c.Create(w.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	key := client.ObjectKey{Namespace: w.ns, Name: "disk"}
	get := func() (*corev1.PersistentVolumeClaim, error) {
		var got corev1.PersistentVolumeClaim
		err := w.c.Get(w.ctx, key, &got)
		return &got, err
	}
	testenv.Eventually(t, 30*time.Second, "finalizer on the stopped VM's PVC", func() (bool, error) {
		got, err := get()
		return err == nil && slices.Contains(got.Finalizers, inuse.Finalizer), err
	})
	if err := w.c.Delete(w.ctx, pvc); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if got, err := get(); err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("want the PVC to survive, marked for deletion: %v", err)
	}
	if err := w.c.Delete(w.ctx, vm); err != nil {
		t.Fatal(err)
	}
	// This environment runs no kube-controller-manager, so the apiserver's
	// own kubernetes.io/pvc-protection finalizer stays: what matters here is
	// that tether lets go.
	testenv.Eventually(t, 30*time.Second, "tether's finalizer to go once the VM is gone", func() (bool, error) {
		got, err := get()
		return apierrors.IsNotFound(err) || (err == nil && !slices.Contains(got.Finalizers, inuse.Finalizer)), nil
	})
}
