package controller_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/config/rbac"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/controlplane"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/guest"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// The fence loop end to end on the emulator world and a real tenant API
// server, acting as an identity holding only the tenant roles tether ships:
// the infra VM of a tenant node is stopped (its VMI goes), the node turns
// NotReady, and the controller fences it with the out-of-service taint and
// its annotation; the VM is started again and the node turns Ready, and the
// controller removes both. A node an operator tainted, whose VM runs, keeps
// its taint throughout. The times from VMI gone to taint and from Ready to
// un-fence are logged.
func TestController_fencesATenantNodeWhoseVMIsDownAndUnfencesIt(t *testing.T) {
	w := newWorld(t)
	tenant := w.env.Tenants["guest"]
	tc, err := clients.New(tenant.Config)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := tenantAccount(t, tenant, w.ns, true)

	node := fixture.TenantNodeObject("fence-"+w.ns, w.ns, "vm-f")
	operators := fixture.TenantNodeObject("op-"+w.ns, w.ns, "vm-o")
	operators.Spec.Taints = []corev1.Taint{{Key: snapshot.OutOfServiceTaint, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
	for _, n := range []*corev1.Node{node, operators} {
		n.UID = ""
		if err := tc.Create(w.ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tc.Delete(context.Background(), n) })
		testenv.SetNodeReady(t, tc, n.Name, corev1.ConditionTrue, time.Now())
	}
	for _, name := range []string{"vm-f", "vm-o"} {
		vm := fixture.VM(name, fixture.Running(), fixture.InNamespace(w.ns))
		vm.UID = ""
		if err := w.c.Create(w.ctx, vm); err != nil {
			t.Fatal(err)
		}
		w.waitVMI(name, "running", func(v *kubevirtv1.VirtualMachineInstance) bool { return v.Status.Phase == kubevirtv1.Running })
	}

	cfg := w.cfg(time.Hour)
	cfg.Checks = map[string]config.CheckConfig{check.TenantNodeDown: {Enabled: true, GracePeriod: metav1.Duration{Duration: time.Second}}}
	cfg.Fencing.FenceAfter.Duration = 2 * time.Second
	cfg.Fencing.UnfenceSettle.Duration = 3 * time.Second
	cfg.Tenants = []config.TenantConfig{{Name: "guest", Kubeconfig: kubeconfig, Namespace: w.ns}}
	w.start(cfg)

	// The guest is up: nothing to do.
	time.Sleep(3 * time.Second)
	if n := testenv.Node(t, tc, node.Name); snapshot.HasOutOfServiceTaint(n) {
		t.Fatal("fenced a Ready node whose VMI runs")
	}

	halt(t, w, "vm-f", kubevirtv1.RunStrategyHalted)
	testenv.Eventually(t, 30*time.Second, "VMI vm-f gone", func() (bool, error) { return w.vmi("vm-f") == nil, nil })
	down := time.Now()
	testenv.SetNodeReady(t, tc, node.Name, corev1.ConditionFalse, time.Now()) // the node lifecycle controller's part
	testenv.Eventually(t, 30*time.Second, "tenant node fenced", func() (bool, error) {
		n := testenv.Node(t, tc, node.Name)
		return snapshot.HasOutOfServiceTaint(n) && n.Annotations[snapshot.FencedAnnotation] != "", nil
	})
	t.Logf("VMI gone -> tenant node tainted: %s (fenceAfter 2s, gracePeriod 1s)", time.Since(down).Round(100*time.Millisecond))
	var rec *v1alpha1.Finding
	testenv.Eventually(t, 30*time.Second, "the fence's record resolved by its action", func() (bool, error) {
		rec = fenceRecord(t, w, node.Name)
		return rec != nil && rec.Status.Phase == v1alpha1.PhaseResolved && rec.Status.Reason == string(drift.Applied), nil
	})
	if rec.Labels[v1alpha1.LabelCluster] != "guest" || len(rec.OwnerReferences) != 0 || rec.Namespace != w.ns {
		t.Errorf("record %s/%s: labels %v, owners %v", rec.Namespace, rec.Name, rec.Labels, rec.OwnerReferences)
	}

	halt(t, w, "vm-f", kubevirtv1.RunStrategyAlways)
	w.waitVMI("vm-f", "running again", func(v *kubevirtv1.VirtualMachineInstance) bool { return v.Status.Phase == kubevirtv1.Running })
	time.Sleep(2 * time.Second)
	if n := testenv.Node(t, tc, node.Name); !snapshot.HasOutOfServiceTaint(n) {
		t.Fatal("un-fenced a node that is not Ready yet")
	}
	up := time.Now()
	testenv.SetNodeReady(t, tc, node.Name, corev1.ConditionTrue, time.Now())
	testenv.Eventually(t, 30*time.Second, "tenant node un-fenced", func() (bool, error) {
		n := testenv.Node(t, tc, node.Name)
		return !snapshot.HasOutOfServiceTaint(n) && n.Annotations[snapshot.FencedAnnotation] == "", nil
	})
	t.Logf("tenant node Ready -> taint removed: %s", time.Since(up).Round(100*time.Millisecond))
	// Cordoned first, and kept cordoned for unfenceSettle after the taint
	// went; then uncordoned, and tether's records gone.
	n := testenv.Node(t, tc, node.Name)
	if !n.Spec.Unschedulable || n.Annotations[snapshot.CordonedAnnotation] == "" {
		t.Fatalf("the taint went without tether's cordon: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
	untainted := time.Now()
	testenv.Eventually(t, 30*time.Second, "tenant node uncordoned", func() (bool, error) {
		n := testenv.Node(t, tc, node.Name)
		return !n.Spec.Unschedulable && n.Annotations[snapshot.CordonedAnnotation] == "" && n.Annotations[snapshot.UnfencedAnnotation] == "", nil
	})
	if d := time.Since(untainted); d < 2*time.Second {
		t.Fatalf("uncordoned %s after the taint went, within unfenceSettle 3s", d)
	}
	t.Logf("taint removed -> uncordoned: %s (unfenceSettle 3s)", time.Since(untainted).Round(100*time.Millisecond))
	if n := testenv.Node(t, tc, operators.Name); !snapshot.HasOutOfServiceTaint(n) {
		t.Error("removed the out-of-service taint an operator set")
	}
}

// A tenant node that goes (the cluster scaled down, the VM deleted) takes
// its records with it: they carry no owner reference, so the fence loop
// retires them once the Node is gone from its tenant.
func TestController_fenceRecordsGoWithTheirNode(t *testing.T) {
	w := newWorld(t)
	tenant := w.env.Tenants["guest"]
	tc, err := clients.New(tenant.Config)
	if err != nil {
		t.Fatal(err)
	}
	// No VM at all, tied by providerID: fenced (harvester #9939's deleted
	// VM). Dry run: the finding stays open, with its record.
	node := fixture.TenantNodeObject("gone-"+w.ns, w.ns, "vm-deleted")
	node.UID = ""
	if err := tc.Create(w.ctx, node); err != nil {
		t.Fatal(err)
	}
	testenv.SetNodeReady(t, tc, node.Name, corev1.ConditionFalse, time.Now())
	cfg := w.cfg(time.Hour)
	cfg.DryRun = true
	cfg.Checks = map[string]config.CheckConfig{check.TenantNodeDown: {Enabled: true}}
	cfg.Fencing.FenceAfter.Duration = time.Second
	cfg.Tenants = []config.TenantConfig{{Name: "guest", Kubeconfig: tenant.Kubeconfig, Namespace: w.ns}}
	w.start(cfg)
	testenv.Eventually(t, 30*time.Second, "the fence's record", func() (bool, error) {
		rec := fenceRecord(t, w, node.Name)
		return rec != nil && rec.Status.Severity == string(drift.SeverityCritical), nil
	})
	if err := tc.Delete(w.ctx, node); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the record retired", func() (bool, error) { return fenceRecord(t, w, node.Name) == nil, nil })
}

// TenantNodeDown enabled, with a tenant identity bound to the reader role
// only: the controller refuses to start and names the tenant-fencer role
// and the command that binds it; in dry run (it will not fence) it starts.
func TestController_fencingWithoutTheTenantFencerRole_refusesToStart(t *testing.T) {
	w := newWorld(t)
	kubeconfig := tenantAccount(t, w.env.Tenants["guest"], w.ns, false)
	cfg := w.cfg(time.Hour)
	cfg.Checks = map[string]config.CheckConfig{check.TenantNodeDown: {Enabled: true}}
	cfg.Tenants = []config.TenantConfig{{Name: "guest", Kubeconfig: kubeconfig, Namespace: w.ns}}
	o := controller.Options{RestConfig: saConfig(w.env), Config: cfg, Namespace: w.ns, Log: testr.New(t), SkipNameValidation: true}
	_, err := controller.New(o)
	if err == nil {
		t.Fatal("the controller started to fence with no right to update tenant Nodes")
	}
	for _, want := range []string{`tenant "guest"`, "tether-tenant-fencer", "update nodes cluster-wide", "--fence"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "tether-tenant-reader") {
		t.Errorf("the reader role is bound, yet named:\n%v", err)
	}
	cfg.DryRun = true
	if _, err := controller.New(o); err != nil {
		t.Fatalf("in dry run the fencer role is not needed: %v", err)
	}
}

// tenantAccount binds a new ServiceAccount of the tenant to the tenant
// roles tether ships (the fencer's too with fence), and writes a kubeconfig
// with its token.
func tenantAccount(t *testing.T, cp *controlplane.ControlPlane, name string, fence bool) string {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tether-" + name}}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	roles, err := rbac.TenantRoles(fence)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range roles {
		role.Name += "-" + name
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: "default"}}}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
			_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		})
	}
	hour := int64(3600)
	tok, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc := rest.AnonymousClientConfig(cp.Config)
	rc.BearerToken = tok.Status.Token
	path := filepath.Join(t.TempDir(), "tenant.kubeconfig")
	if err := controlplane.WriteKubeconfig(path, rc); err != nil {
		t.Fatal(err)
	}
	return path
}

// halt sets a VM's run strategy.
func halt(t *testing.T, w *world, name string, rs kubevirtv1.VirtualMachineRunStrategy) {
	t.Helper()
	var vm kubevirtv1.VirtualMachine
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: name}, &vm); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.RunStrategy = &rs
	if err := w.c.Patch(w.ctx, &vm, patch); err != nil {
		t.Fatal(err)
	}
}

// fenceRecord is the TenantNodeDown record of tenant node node, or nil.
func fenceRecord(t *testing.T, w *world, node string) *v1alpha1.Finding {
	t.Helper()
	var list v1alpha1.FindingList
	if err := w.c.List(w.ctx, &list, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelCheck: check.TenantNodeDown}); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].Spec.Subject.Name == node {
			return &list.Items[i]
		}
	}
	return nil
}

// End to end on the emulator world, the controller doing the fencing: a
// guest cluster whose kube-controller-manager runs the real attach/detach
// and pod garbage-collection controllers (the CSI attacher played in it)
// has a pod using a claim on a node that is infra VM "infra", whose VM
// spec hot-plugs that claim's volume. The VM stops, the node goes
// NotReady with the volume in use, the workload deletes its pod: the
// controller fences the node, and the real controllers then delete the pod
// and detach the volume at once (unfenced, they wait six minutes). The VM
// starts again, its VMI comes back with the hot-plug from the VM spec that
// no tenant attachment wants any more: with tenantAuthoritative it is the
// orphan the controller removes (VM-level removevolume); the node turns
// Ready and the controller lifts the fence. The times are logged.
func TestController_fenceEndToEnd_realControllersReleaseAndTheOrphanGoes(t *testing.T) {
	w := newWorld(t)
	ctx := w.ctx
	vm := fixture.VM("infra", fixture.Running(), fixture.InNamespace(w.ns))
	vm.UID = ""
	if err := w.c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	w.waitVMI("infra", "running", func(v *kubevirtv1.VirtualMachineInstance) bool { return v.Status.Phase == kubevirtv1.Running })
	pvc := fixture.PVC(guest.Handle, fixture.InNamespace(w.ns))
	pvc.UID = ""
	if err := w.c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := virtapi.AddVolume(ctx, w.sub, virtapi.VM, w.ns, "infra", fixture.AddVolumeOptions(guest.Handle)); err != nil {
		t.Fatal(err)
	}
	w.waitVMI("infra", "the hot-plug", func(v *kubevirtv1.VirtualMachineInstance) bool { return lists(v, guest.Handle) })
	g := guest.Start(t, w.ns, "infra")

	cfg := w.cfg(time.Hour)
	cfg.AllowVMIOnlyDetach = false
	cfg.TenantAuthoritative = true
	cfg.Checks = map[string]config.CheckConfig{
		check.TenantNodeDown:      {Enabled: true, GracePeriod: metav1.Duration{}},
		check.OrphanHotplugVolume: {Enabled: true, GracePeriod: metav1.Duration{Duration: time.Second}},
	}
	cfg.Fencing.FenceAfter.Duration = 5 * time.Second
	cfg.Tenants = []config.TenantConfig{{Name: "guest", Kubeconfig: g.CP.Kubeconfig, Namespace: w.ns, Driver: g.Attacher.Driver()}}
	w.start(cfg)
	time.Sleep(3 * time.Second)
	if w.finding("infra", guest.Handle) != nil || snapshot.HasOutOfServiceTaint(testenv.Node(t, g.Client, guest.Node)) {
		t.Fatal("acted while the guest attaches the volume on a Ready node")
	}

	halt(t, w, "infra", kubevirtv1.RunStrategyHalted)
	testenv.Eventually(t, 60*time.Second, "VMI infra gone", func() (bool, error) { return w.vmi("infra") == nil, nil })
	vmiGone := time.Now()
	g.SetNode(t, corev1.ConditionUnknown, vmiGone, true)
	g.DeletePod(t)
	// The detach the fence starts does not complete until the storage
	// side of the node answers again.
	g.Attacher.Hang(guest.Node)
	testenv.Eventually(t, 60*time.Second, "the node fenced", func() (bool, error) {
		return snapshot.HasOutOfServiceTaint(testenv.Node(t, g.Client, guest.Node)), nil
	})
	tainted := time.Now()
	testenv.Eventually(t, 90*time.Second, "the guest's attachment being detached", func() (bool, error) {
		va := g.Attachment(ctx)
		return va != nil && va.DeletionTimestamp != nil, nil
	})
	testenv.Eventually(t, 60*time.Second, "the pod deleted", func() (bool, error) { return g.PodGone(ctx), nil })

	// Back, with the detach still in flight: the fence stays, and its
	// record says what it waits for.
	halt(t, w, "infra", kubevirtv1.RunStrategyAlways)
	w.waitVMI("infra", "running again", func(v *kubevirtv1.VirtualMachineInstance) bool { return v.Status.Phase == kubevirtv1.Running })
	g.SetNode(t, corev1.ConditionTrue, time.Now(), false)
	testenv.Eventually(t, 30*time.Second, "the un-fence held on the detach in flight", func() (bool, error) {
		var list v1alpha1.FindingList
		if err := w.c.List(ctx, &list, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelCheck: check.TenantNodeDown}); err != nil {
			return false, err
		}
		for _, rec := range list.Items {
			if rec.Status.Action.Type == string(check.RemoveOutOfServiceTaint) && rec.Status.Reason == string(check.TenantNodeReleasing) {
				return true, nil
			}
		}
		return false, nil
	})
	if n := testenv.Node(t, g.Client, guest.Node); !snapshot.HasOutOfServiceTaint(n) || n.Spec.Unschedulable {
		t.Fatalf("the fence was touched with the detach in flight: taints %v, unschedulable %v", n.Spec.Taints, n.Spec.Unschedulable)
	}
	g.Attacher.Release(guest.Node)
	testenv.Eventually(t, 60*time.Second, "the guest's attachment detached and gone", func() (bool, error) { return g.Attachment(ctx) == nil, nil })
	vaGone := time.Now()
	t.Logf("VMI gone -> taint %s (fenceAfter 5s); taint -> detach done %s (held by the attacher meanwhile)", tainted.Sub(vmiGone).Round(100*time.Millisecond), vaGone.Sub(tainted).Round(100*time.Millisecond))
	testenv.Eventually(t, 60*time.Second, "the fence lifted", func() (bool, error) {
		n := testenv.Node(t, g.Client, guest.Node)
		return !snapshot.HasOutOfServiceTaint(n) && n.Annotations[snapshot.FencedAnnotation] == "", nil
	})
	w.waitFinding("infra", guest.Handle, v1alpha1.PhaseResolved, string(drift.Applied))
	testenv.Eventually(t, 30*time.Second, "the orphan gone from the VM spec", func() (bool, error) {
		var v kubevirtv1.VirtualMachine
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "infra"}, &v); err != nil {
			return false, err
		}
		for _, vol := range v.Spec.Template.Spec.Volumes {
			if vol.Name == guest.Handle {
				return false, nil
			}
		}
		return true, nil
	})
}
