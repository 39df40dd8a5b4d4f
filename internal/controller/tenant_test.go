package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// With tenant evidence, the volume the tenant attaches is left alone, the one
// it does not is detached; when the tenant lets go of the first one, the
// controller hears it from the tenant's informer and detaches it too.
func TestController_tenantEvidence_detachesWhatTheTenantDropped(t *testing.T) {
	w := newWorld(t)
	tenant := w.env.Tenants["guest"]
	tc, err := clients.New(tenant.Config)
	if err != nil {
		t.Fatal(err)
	}
	pv := fixture.PV("pv-"+w.ns, "pvc-kept")
	dropped := fixture.PV("pv-dropped-"+w.ns, "pvc-dropped") // released by the tenant
	// The tenant's Node, named otherwise than the VM, tied to it by
	// providerID and annotation: its evidence concerns that VM.
	node := fixture.TenantNodeObject("worker-"+w.ns, w.ns, "vm-t")
	va := fixture.VolumeAttachment("va-"+w.ns, node.Name, pv.Name)
	drv := fixture.CSIDriver("csi.kubevirt.io", true)
	for _, o := range []client.Object{node, drv} {
		o.SetUID("")
		if err := tc.Create(w.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, o := range []client.Object{pv, dropped, va} {
		o.SetUID("")
		if err := tc.Create(w.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	w.orphan("vm-t", "pvc-kept")
	w.orphan("vm-t", "pvc-dropped")
	w.startWithTenant(tenant.Kubeconfig)

	w.waitFinding("vm-t", "pvc-dropped", v1alpha1.PhaseResolved, string(drift.Applied))
	if !lists(w.vmi("vm-t"), "pvc-kept") || w.finding("vm-t", "pvc-kept") != nil {
		t.Fatal("the volume the tenant attaches was touched or reported")
	}
	if err := tc.Delete(w.ctx, va); err != nil {
		t.Fatal(err)
	}
	w.waitFinding("vm-t", "pvc-kept", v1alpha1.PhaseResolved, string(drift.Applied))
	w.waitVMI("vm-t", "pvc-kept detached", func(v *kubevirtv1.VirtualMachineInstance) bool { return !lists(v, "pvc-kept") })
}

// A tenant that cannot be reached is unknown evidence: the finding is held,
// never acted on.
func TestController_tenantUnreachable_holds(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-u", "pvc-u")
	data, err := os.ReadFile(w.env.Tenants["guest"].Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(t.TempDir(), "dead.kubeconfig")
	if err := os.WriteFile(dead, []byte(strings.ReplaceAll(string(data), w.env.Tenants["guest"].URL, "https://127.0.0.1:1")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := w.cfg(0)
	cfg.AllowVMIOnlyDetach = false
	cfg.Tenants = []config.TenantConfig{{Name: "guest", Kubeconfig: dead, Namespace: w.ns}}
	w.start(cfg)
	w.waitFinding("vm-u", "pvc-u", v1alpha1.PhaseBlocked, "TenantUnreachable")
	time.Sleep(time.Second)
	if !lists(w.vmi("vm-u"), "pvc-u") {
		t.Fatal("acted without tenant evidence")
	}
}

// A tenant node that cannot be tied to an infra VM may be this VM: the
// finding is held (TenantNodeUnmapped). Once the node is given its
// providerID and annotation, the Node update wakes the VMI and the orphan
// is detached; the volume the tenant attaches stays.
func TestController_tenantNodeMappedLater_actsOnlyThen(t *testing.T) {
	w := newWorld(t)
	tenant := w.env.Tenants["guest"]
	tc, err := clients.New(tenant.Config)
	if err != nil {
		t.Fatal(err)
	}
	bare := fixture.TenantNodeObject("late-"+w.ns, w.ns, "vm-l")
	bare.Spec.ProviderID, bare.Annotations = "", nil
	pv := fixture.PV("pv-l-"+w.ns, "pvc-l")
	for _, o := range []client.Object{bare, fixture.CSIDriver("csi.kubevirt.io", true), pv} {
		o.SetUID("")
		if err := tc.Create(w.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = tc.Delete(context.Background(), bare); _ = tc.Delete(context.Background(), pv) })
	w.orphan("vm-l", "pvc-l")
	w.startWithTenant(tenant.Kubeconfig)

	w.waitFinding("vm-l", "pvc-l", v1alpha1.PhaseBlocked, string(check.TenantNodeUnmapped))
	time.Sleep(2 * time.Second) // past the grace period: still held
	if !lists(w.vmi("vm-l"), "pvc-l") {
		t.Fatal("acted while a tenant node was unmapped")
	}
	if err := tc.Get(w.ctx, client.ObjectKeyFromObject(bare), bare); err != nil {
		t.Fatal(err)
	}
	bare.Spec.ProviderID = "kubevirt://vm-l"
	bare.Annotations = map[string]string{"cluster.x-k8s.io/cluster-namespace": w.ns}
	if err := tc.Update(w.ctx, bare); err != nil {
		t.Fatal(err)
	}
	w.waitFinding("vm-l", "pvc-l", v1alpha1.PhaseResolved, string(drift.Applied))
}

// startWithTenant starts the controller with a 1s grace, no VMI-only opt-in
// and the tenant of this kubeconfig for the world's namespace.
func (w *world) startWithTenant(kubeconfig string) {
	cfg := w.cfg(time.Second)
	cfg.AllowVMIOnlyDetach = false
	cfg.Tenants = []config.TenantConfig{{Name: "guest", Kubeconfig: kubeconfig, Namespace: w.ns}}
	w.start(cfg)
}

// A phantom attach held as too recent turns critical once the grace has
// passed, with no event to say so: the hot-plug loop looks again by itself.
func TestController_phantomAttach_heldThenCriticalWithoutAnEvent(t *testing.T) {
	w := newWorld(t)
	tenant := w.env.Tenants["guest"]
	tc, err := clients.New(tenant.Config)
	if err != nil {
		t.Fatal(err)
	}
	w.orphan("vm-p", "pvc-other") // a running VMI; pvc-ghost is not on it
	node := fixture.TenantNodeObject("worker-p-"+w.ns, w.ns, "vm-p")
	pv := fixture.PV("pv-ghost-"+w.ns, "pvc-ghost")
	va := fixture.VolumeAttachment("va-ghost-"+w.ns, node.Name, pv.Name, fixture.AttachedToID(w.ns+"/vm-p"))
	drv := fixture.CSIDriver("csi.kubevirt.io", true)
	for _, o := range []client.Object{node, drv, pv, va} {
		o.SetUID("")
		if err := tc.Create(w.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	va.Status.Attached = true
	if err := tc.Status().Update(w.ctx, va); err != nil {
		t.Fatal(err)
	}
	cfg := w.cfg(0)
	cfg.Checks = map[string]config.CheckConfig{check.PhantomAttach: {Enabled: true}}
	cfg.Hotplug.TenantAttachGrace.Duration = 4 * time.Second
	cfg.Tenants = []config.TenantConfig{{Name: "guest", Kubeconfig: tenant.Kubeconfig, Namespace: w.ns}}
	w.start(cfg)
	w.waitFinding("vm-p", "pvc-ghost", v1alpha1.PhaseBlocked, string(check.TenantAttachTooRecent))
	w.waitFinding("vm-p", "pvc-ghost", v1alpha1.PhaseBlocked, string(check.HotplugMissing))
}
