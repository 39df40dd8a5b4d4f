package manifests_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/config/crd"
	"github.com/tether-dev/tether/config/rbac"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/authz"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// TestNamespacedExample: config/namespaced builds, its rbac.yaml is what
// `tether manifests rbac` prints for the namespaces its configuration
// scopes, and that configuration is valid.
func TestNamespacedExample(t *testing.T) {
	objs := objects(t, build(t, "namespaced"))
	cm := find(t, objs, "ConfigMap")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	cfg, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatalf("config/namespaced's configuration: %v", err)
	}
	if !cfg.DryRun || len(cfg.Scope.Namespaces) == 0 {
		t.Errorf("want a dry-run configuration with scope.namespaces, got dryRun=%v namespaces=%v", cfg.DryRun, cfg.Scope.Namespaces)
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == name {
			t.Error("config/namespaced carries the cluster-wide ClusterRole tether-controller")
		}
	}
	gen, err := rbac.Namespaced(rbac.Options{Namespaces: cfg.Scope.Namespaces})
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join("namespaced", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	checked := objects(t, file)
	if len(checked) != len(gen) {
		t.Fatalf("rbac.yaml has %d objects, `tether manifests rbac` prints %d: regenerate it", len(checked), len(gen))
	}
	for i, o := range gen {
		want, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		delete(want["metadata"].(map[string]any), "creationTimestamp")
		a, _ := yaml.Marshal(want)
		b, _ := yaml.Marshal(checked[i].Object)
		if !bytes.Equal(a, b) {
			t.Errorf("rbac.yaml object %d differs from `tether manifests rbac` (regenerate it):\n%s\nwant\n%s", i, b, a)
		}
	}
}

// applyObjects applies typed objects with kubectl.
func applyObjects(t *testing.T, env *testenv.Env, objs []runtime.Object) {
	t.Helper()
	var docs []any
	for _, o := range objs {
		docs = append(docs, o)
	}
	applyDir(t, env, "-f", yamlFile(t, docs))
}

// TestNamespacedRBAC: with the Roles of `tether manifests rbac`, the
// controller's account (impersonated) reads and writes in the scoped
// namespaces and its own, and is refused everywhere else; --protection
// adds the finalizer patches there only. The controller then starts as
// that account and protects a claim in scope; it refuses to start, naming
// the fix, when the configuration needs what the Roles do not grant.
func TestNamespacedRBAC(t *testing.T) {
	env := testenv.Get(t)
	if err := crd.Install(context.Background(), env.Config); err != nil {
		t.Fatal(err)
	}
	own, a, b, other := env.Namespace(t), env.Namespace(t), env.Namespace(t), env.Namespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: rbac.ServiceAccount}}
	if _, err := env.Client.CoreV1().ServiceAccounts(own).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	opts := rbac.Options{Namespaces: []string{a, b}, ControllerNamespace: own}
	objs, err := rbac.Namespaced(opts)
	if err != nil {
		t.Fatal(err)
	}
	applyObjects(t, env, objs)
	user := "system:serviceaccount:" + own + ":" + rbac.ServiceAccount
	as := authz.As(t, env.Config, user)
	as.WaitAllowed("list", pods, a)

	for _, ns := range []string{a, b} {
		for _, r := range []string{pods, vmis, vms, pvcs, dvs} {
			as.Want(true, "list", r, ns)
		}
		as.Want(true, "patch", findings, ns)
		as.Want(false, "patch", pvcs, ns) // no --protection
		as.Want(false, "get", namespaces, ns)
		as.Want(false, "delete", pods, ns)
	}
	as.Want(true, "list", kubevirts, "")
	as.Want(true, "list", findings, own)
	as.Want(true, "patch", findings, own)
	as.Want(false, "list", pods, own)
	for _, r := range []string{pods, vmis, vms, pvcs, findings} {
		as.Want(false, "list", r, other)
		as.Want(false, "list", r, "")
	}
	for _, r := range []string{nodes, pvs, attachments} {
		as.Want(false, "list", r, "")
	}
	as.Want(false, "list", revisions, a)

	cfg := config.Default()
	cfg.Scope.Namespaces = []string{a, b}
	cfg.Protection.Enabled = true
	cfg.Checks = map[string]config.CheckConfig{check.OrphanHotplugVolume: {Enabled: true}}
	cfg.DanglingOnRestart.Enabled = true
	asCfg := rest.CopyConfig(env.Config)
	asCfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	start := func(c config.Config) error {
		_, err := controller.New(controller.Options{RestConfig: asCfg, Config: &c, Namespace: own, Log: testr.New(t), SkipNameValidation: true})
		return err
	}
	if err := start(cfg); err == nil || !strings.Contains(err.Error(), "--protection") || !strings.Contains(err.Error(), "patch persistentvolumeclaims in namespace "+a) {
		t.Fatalf("protection on without its grants: want an error naming the patch and --protection, got %v", err)
	}

	opts.Protection = true
	objs, err = rbac.Namespaced(opts)
	if err != nil {
		t.Fatal(err)
	}
	applyObjects(t, env, objs)
	as.WaitAllowed("patch", pvcs, a)
	as.Want(true, "patch", revisions, b)
	as.Want(true, "get", namespaces, a)
	as.Want(false, "get", namespaces, other)
	as.Want(false, "patch", pvcs, other)
	as.Want(false, "delete", pvcs, a)

	storage := cfg
	storage.Checks = map[string]config.CheckConfig{check.StaleVolumeAttachment: {Enabled: true}}
	if err := start(storage); err == nil || !strings.Contains(err.Error(), "storage checks") || !strings.Contains(err.Error(), "list nodes cluster-wide") {
		t.Fatalf("storage checks on namespaced RBAC: want an error saying they read cluster-wide, got %v", err)
	}

	testenv.RunController(t, controller.Options{RestConfig: asCfg, Config: &cfg, Namespace: own, Log: testr.New(t), SkipNameValidation: true})
	protectsIn(t, env, a)
}

// protectsIn creates a stopped VM and its PVC in ns and waits for the
// controller to put its finalizer on the PVC.
func protectsIn(t *testing.T, env *testenv.Env, ns string) {
	t.Helper()
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pvc := fixture.PVC("disk", fixture.InNamespace(ns))
	vm := fixture.VM("stopped", fixture.InNamespace(ns), fixture.WithVolume("disk", fixture.PVC("disk")))
	for _, o := range []client.Object{pvc, vm} {
		o.SetUID("")
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the finalizer on the PVC in scope", func() (bool, error) {
		var got corev1.PersistentVolumeClaim
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "disk"}, &got)
		return err == nil && slices.Contains(got.Finalizers, inuse.Finalizer), err
	})
}
