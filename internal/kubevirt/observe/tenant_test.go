package observe_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// A tenant cluster seeded as the KubeVirt CSI driver leaves it, with a
// renamed driver: a node named otherwise than its VM and tied to it by the
// infra-vm annotations, its CSINode with the driver's node ID, a
// VolumeAttachment with the external-attacher's node-id annotation, and a
// kubelet that still lists a volume. Read through config/rbac's
// tenant-reader role (impersonated), tether sees all of it, and the check
// follows: the attached volume and the one the kubelet uses are wanted, the
// released one is an orphan whose evidence names the mapping.
func TestObserve_tenantAsTheDriverLeavesIt(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	tenant := env.Tenants["guest"]
	admin, err := clients.New(tenant.Config)
	if err != nil {
		t.Fatal(err)
	}
	const driver = "csi.example.com"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-" + ns, Annotations: map[string]string{
		snapshot.InfraVMNameAnnotation: "vm-x", snapshot.InfraVMNamespaceAnnotation: ns}}}
	csiNode := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node.Name},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: ns + "/vm-x"}}}}
	drv := fixture.CSIDriver(driver, true)
	var objs []client.Object
	objs = append(objs, node, csiNode, drv)
	for _, h := range []string{"dv-attached", "dv-kubelet", "dv-released"} {
		objs = append(objs, fixture.PV("pv-"+h+"-"+ns, h, fixture.Driver(driver)))
	}
	va := fixture.VolumeAttachment("va-"+ns, node.Name, "pv-dv-attached-"+ns, fixture.Driver(driver), fixture.AttachedToID(ns+"/vm-x"))
	objs = append(objs, va)
	role := readerRole(t)
	user := "tether-reader-" + ns
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}}
	objs = append(objs, role, binding)
	for _, o := range objs {
		o.SetUID("")
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if o != drv && o != role {
			t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
		}
	}
	node.Status.VolumesInUse = []corev1.UniqueVolumeName{corev1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^dv-kubelet")}
	if err := admin.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}

	// The infra side: VM vm-x with the three volumes hot-plugged at VMI level.
	infra := fixture.VM("vm-x", fixture.InNamespace(ns), fixture.Running())
	vmi := fixture.VMI("vm-x", fixture.InNamespace(ns), fixture.OwnedBy(infra),
		fixture.WithHotplug("dv-attached"), fixture.WithHotplug("dv-kubelet"), fixture.WithHotplug("dv-released"))

	reader := rest.CopyConfig(tenant.Config)
	reader.Impersonate = rest.ImpersonationConfig{UserName: user}
	ic, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := observe.Observe(ctx, ic, observe.Options{Namespace: ns,
		Tenants: []observe.TenantSource{{Name: "guest", Namespace: ns, Driver: driver, Config: reader}}})
	if err != nil {
		t.Fatal(err)
	}
	got := snap.Tenants[0]
	if !got.Reachable || got.DriverMissing {
		t.Fatalf("tenant read through the tenant-reader role: reachable %v (%s), driver missing %v", got.Reachable, got.Error, got.DriverMissing)
	}
	i := slices.IndexFunc(got.Nodes, func(n snapshot.TenantNode) bool { return n.Name == node.Name })
	if i < 0 {
		t.Fatal("the node was not read")
	}
	n := got.Nodes[i]
	if n.CSINodeID != ns+"/vm-x" || n.InfraVMName != "vm-x" || !slices.Equal(n.InUse, []string{"dv-kubelet"}) {
		t.Fatalf("node read as %+v", n)
	}
	world := fixture.Snapshot(infra, vmi, fixture.Gates("HotplugVolumes"), got)
	fs := check.Run(world, check.DefaultPolicy(), fixture.Epoch().Add(24*time.Hour))
	var orphans []string
	for _, f := range fs {
		if f.Check == check.OrphanHotplugVolume {
			orphans = append(orphans, f.Volume)
			if f.Volume == "dv-released" && (!f.Action.Safe || !slices.ContainsFunc(f.Evidence, func(e string) bool {
				return e == `tenant "guest" node `+node.Name+` -> infra VM `+ns+`/vm-x by annotations csi.kubevirt.io/infra-vm-namespace=`+ns+`, csi.kubevirt.io/infra-vm-name=vm-x, CSINode node ID `+ns+`/vm-x`
			})) {
				t.Errorf("dv-released: %+v\nevidence %q", f.Action, f.Evidence)
			}
		}
	}
	if !slices.Equal(orphans, []string{"dv-released"}) {
		t.Fatalf("orphans %v, want only dv-released", orphans)
	}
}

func readerRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile("../../../config/rbac/tenant-reader.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &cr); err != nil {
		t.Fatal(err)
	}
	return &cr
}
