package manifests_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/config/crd"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// as is a client that impersonates user, so that every request it makes is
// decided by the control plane's real authorizer (RBAC) for that user (the
// API server adds a ServiceAccount's groups).
type as struct {
	t    *testing.T
	user string
	dyn  dynamic.Interface
}

func impersonate(t *testing.T, env *testenv.Env, user string) *as {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return &as{t: t, user: user, dyn: dynamic.NewForConfigOrDie(cfg)}
}

// gvr parses "resource.group/version" ("pods/v1" for the core group).
func gvr(s string) schema.GroupVersionResource {
	rg, v, _ := strings.Cut(s, "/")
	r, g, _ := strings.Cut(rg, ".")
	return schema.GroupVersionResource{Group: g, Version: v, Resource: r}
}

// do sends one real request as the user: verb on resource (e.g.
// "persistentvolumeclaims/v1") in ns ("" for all namespaces or a
// cluster-scoped kind), on a named object that need not exist. Writes are
// server-side dry runs. It returns whether RBAC let it through: the
// authorizer runs before the object is looked up, so 404 means allowed.
func (a *as) do(verb, resource, ns string) bool {
	a.t.Helper()
	ctx := context.Background()
	r := a.dyn.Resource(gvr(resource))
	var c dynamic.ResourceInterface = r
	if ns != "" {
		c = r.Namespace(ns)
	}
	obj := "no-such-object"
	if r := gvr(resource); r.Resource == "namespaces" && ns != "" {
		// A namespace is named by itself: RBAC sees the request in it.
		c, obj = a.dyn.Resource(r), ns
	}
	dry := []string{metav1.DryRunAll}
	var err error
	switch verb {
	case "list":
		_, err = c.List(ctx, metav1.ListOptions{Limit: 1})
	case "get":
		_, err = c.Get(ctx, obj, metav1.GetOptions{})
	case "patch":
		_, err = c.Patch(ctx, obj, types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/name","value":"x"}]`), metav1.PatchOptions{DryRun: dry})
	case "delete":
		err = c.Delete(ctx, obj, metav1.DeleteOptions{DryRun: dry})
	default:
		a.t.Fatalf("verb %s not supported", verb)
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		a.t.Fatalf("%s %s in %q as %s: unexpected %v", verb, resource, ns, a.user, err)
	}
	return !apierrors.IsForbidden(err)
}

// want asserts that RBAC allows (or refuses) verb on resource in ns.
func (a *as) want(allowed bool, verb, resource, ns string) {
	a.t.Helper()
	if got := a.do(verb, resource, ns); got != allowed {
		where := ns
		if where == "" {
			where = "all namespaces / cluster"
		}
		a.t.Errorf("%s %s in %s as %s: allowed=%v, want %v", verb, resource, where, a.user, got, allowed)
	}
}

// waitAllowed waits until RBAC allows verb on resource: the authorizer
// learns new bindings from its informers.
func (a *as) waitAllowed(verb, resource, ns string) {
	a.t.Helper()
	testenv.Eventually(a.t, 10*time.Second, verb+" "+resource+" allowed", func() (bool, error) { return a.do(verb, resource, ns), nil })
}

// applyDir applies a kustomize directory under config/ (or a file).
func applyDir(t *testing.T, env *testenv.Env, args ...string) {
	t.Helper()
	if out, err := env.Kubectl(t, append([]string{"apply"}, args...)...); err != nil {
		t.Fatalf("kubectl apply %v: %v\n%s", args, err, out)
	}
}

// yamlFile writes objs as one YAML stream into a temporary file.
func yamlFile(t *testing.T, objs []any) string {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	file := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// applyDefault applies config/default: first a server dry run of its
// cluster-scoped part (the namespaced objects need their namespace first),
// then all of it, then a dry run of all of it.
func applyDefault(t *testing.T, env *testenv.Env) {
	file := filepath.Join(t.TempDir(), "default.yaml")
	all := build(t, "default")
	if err := os.WriteFile(file, all, 0o600); err != nil {
		t.Fatal(err)
	}
	var clusterScoped []any
	for _, o := range objects(t, all) {
		if o.GetNamespace() == "" && o.GetKind() != "Namespace" {
			clusterScoped = append(clusterScoped, o.Object)
		}
	}
	csFile := yamlFile(t, clusterScoped)
	applyDir(t, env, "--dry-run=server", "-f", csFile)
	applyDir(t, env, "-f", file)
	applyDir(t, env, "--dry-run=server", "-f", file)
	if out, err := env.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+crd.Name); err != nil {
		t.Fatalf("CRD not established: %v\n%s", err, out)
	}
}

const (
	pods        = "pods/v1"
	pvcs        = "persistentvolumeclaims/v1"
	dvs         = "datavolumes.cdi.kubevirt.io/v1beta1"
	revisions   = "controllerrevisions.apps/v1"
	namespaces  = "namespaces/v1"
	vmis        = "virtualmachineinstances.kubevirt.io/v1"
	vms         = "virtualmachines.kubevirt.io/v1"
	kubevirts   = "kubevirts.kubevirt.io/v1"
	findings    = "findings.tether.dev/v1alpha1"
	nodes       = "nodes/v1"
	pvs         = "persistentvolumes/v1"
	attachments = "volumeattachments.storage.k8s.io/v1"
	secrets     = "secrets/v1"
	leases      = "leases.coordination.k8s.io/v1"
)

// TestApplyOnControlPlane: the real apiserver accepts config/default, and
// the real authorizer then lets the controller's account (impersonated) do
// what it needs and refuses the rest; each opt-in overlay adds exactly its
// writes.
func TestApplyOnControlPlane(t *testing.T) {
	env := testenv.Get(t)
	applyDefault(t, env)
	sa := impersonate(t, env, saUser)
	ns := env.Namespace(t)

	// Base: reads, its own records, no patch on what protection protects.
	for _, r := range []string{vmis, vms, kubevirts, pods, pvcs, dvs, nodes, pvs, attachments} {
		sa.want(true, "list", r, "")
	}
	sa.want(true, "get", pods, ns)
	sa.want(true, "patch", findings, ns)
	sa.want(true, "delete", findings, ns)
	sa.want(true, "patch", leases, namespace)
	sa.want(false, "patch", leases, "default")
	sa.want(false, "patch", pvcs, ns)
	sa.want(false, "patch", dvs, ns)
	sa.want(false, "list", revisions, "")
	sa.want(false, "patch", revisions, ns)
	sa.want(false, "get", namespaces, "")
	sa.want(false, "delete", pods, ns)
	sa.want(false, "delete", pvcs, ns)
	sa.want(false, "patch", vmis, ns)
	sa.want(false, "delete", vms, ns)
	sa.want(false, "patch", nodes, "")
	sa.want(false, "delete", attachments, "")
	sa.want(false, "get", secrets, namespace)
	sa.want(false, "list", secrets, "")

	// +protection: the finalizer patches, and still no delete or storage write.
	applyDir(t, env, "-k", filepath.Join("rbac", "protection"))
	sa.waitAllowed("patch", pvcs, ns)
	sa.want(true, "patch", dvs, ns)
	sa.want(true, "patch", revisions, ns)
	sa.want(true, "list", revisions, "")
	sa.want(true, "get", namespaces, "")
	sa.want(false, "delete", pvcs, ns)
	sa.want(false, "delete", revisions, ns)
	sa.want(false, "delete", namespaces, "")
	sa.want(false, "delete", pods, ns)
	sa.want(false, "patch", attachments, "")

	// +storage-remediation: pod deletes and VolumeAttachment writes only.
	applyDir(t, env, "-k", filepath.Join("rbac", "storage-remediation"))
	sa.waitAllowed("delete", attachments, "")
	sa.want(true, "delete", pods, ns)
	sa.want(true, "patch", attachments, "")
	sa.want(false, "delete", nodes, "")
	sa.want(false, "delete", pvcs, ns)
	sa.want(false, "patch", pods, ns)
	sa.want(false, "delete", vms, ns)

	// Taking an overlay away takes its writes away.
	if out, err := env.Kubectl(t, "delete", "-k", filepath.Join("rbac", "protection")); err != nil {
		t.Fatalf("kubectl delete -k rbac/protection: %v\n%s", err, out)
	}
	testenv.Eventually(t, 10*time.Second, "patch on PVCs refused again", func() (bool, error) { return !sa.do("patch", pvcs, ns), nil })

	out, err := env.Kubectl(t, "get", "deployment", name, "-n", namespace, "-o", "jsonpath={.spec.replicas}")
	if err != nil || strings.TrimSpace(out) != "2" {
		t.Errorf("deployment replicas: %q, %v", out, err)
	}
}
