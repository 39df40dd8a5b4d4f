package manifests_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/config/crd"
	"github.com/tether-dev/tether/internal/testing/authz"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

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

// The resources the tests ask about, by short name.
const (
	pods        = authz.Pods
	pvcs        = authz.PVCs
	dvs         = authz.DataVolumes
	revisions   = authz.Revisions
	namespaces  = authz.Namespaces
	vmis        = authz.VMIs
	vms         = authz.VMs
	kubevirts   = authz.KubeVirts
	findings    = authz.Findings
	nodes       = authz.Nodes
	pvs         = authz.PVs
	attachments = authz.Attachments
	secrets     = authz.Secrets
	leases      = authz.Leases
)

// TestApplyOnControlPlane: the real apiserver accepts config/default, and
// the real authorizer then lets the controller's account (impersonated) do
// what it needs and refuses the rest; each opt-in overlay adds exactly its
// writes.
func TestApplyOnControlPlane(t *testing.T) {
	env := testenv.Get(t)
	applyDefault(t, env)
	sa := authz.As(t, env.Config, saUser)
	ns := env.Namespace(t)

	// Base: reads, its own records, no patch on what protection protects.
	for _, r := range []string{vmis, vms, kubevirts, pods, pvcs, dvs, nodes, pvs, attachments} {
		sa.Want(true, "list", r, "")
	}
	sa.Want(true, "get", pods, ns)
	sa.Want(true, "patch", findings, ns)
	sa.Want(true, "delete", findings, ns)
	sa.Want(true, "patch", leases, namespace)
	sa.Want(false, "patch", leases, "default")
	sa.Want(false, "patch", pvcs, ns)
	sa.Want(false, "patch", dvs, ns)
	sa.Want(false, "list", revisions, "")
	sa.Want(false, "patch", revisions, ns)
	sa.Want(false, "get", namespaces, "")
	sa.Want(false, "delete", pods, ns)
	sa.Want(false, "delete", pvcs, ns)
	sa.Want(false, "patch", vmis, ns)
	sa.Want(false, "delete", vms, ns)
	sa.Want(false, "patch", nodes, "")
	sa.Want(false, "delete", attachments, "")
	sa.Want(false, "get", secrets, namespace)
	sa.Want(false, "list", secrets, "")

	// +protection: the finalizer patches, and still no delete or storage write.
	applyDir(t, env, "-k", filepath.Join("rbac", "protection"))
	sa.WaitAllowed("patch", pvcs, ns)
	sa.Want(true, "patch", dvs, ns)
	sa.Want(true, "patch", revisions, ns)
	sa.Want(true, "list", revisions, "")
	sa.Want(true, "get", namespaces, "")
	sa.Want(false, "delete", pvcs, ns)
	sa.Want(false, "delete", revisions, ns)
	sa.Want(false, "delete", namespaces, "")
	sa.Want(false, "delete", pods, ns)
	sa.Want(false, "patch", attachments, "")

	// +storage-remediation: pod deletes and VolumeAttachment writes only.
	applyDir(t, env, "-k", filepath.Join("rbac", "storage-remediation"))
	sa.WaitAllowed("delete", attachments, "")
	sa.Want(true, "delete", pods, ns)
	sa.Want(true, "patch", attachments, "")
	sa.Want(false, "delete", nodes, "")
	sa.Want(false, "delete", pvcs, ns)
	sa.Want(false, "patch", pods, ns)
	sa.Want(false, "delete", vms, ns)

	// +policyreports: the report objects of both APIs, nothing else.
	reports := []string{"policyreports.wgpolicyk8s.io/v1alpha2", "clusterpolicyreports.wgpolicyk8s.io/v1alpha2", "reports.openreports.io/v1alpha1", "clusterreports.openreports.io/v1alpha1"}
	sa.Want(false, "patch", reports[0], ns)
	applyDir(t, env, "-k", filepath.Join("rbac", "policyreports"))
	sa.WaitAllowed("patch", reports[0], ns)
	for _, r := range reports {
		for _, verb := range []string{"list", "patch", "delete"} {
			sa.Want(true, verb, r, "")
		}
	}
	sa.Want(false, "delete", pvcs, ns)
	sa.Want(false, "patch", nodes, "")
	sa.Want(false, "delete", "policies.kyverno.io/v1", "")

	// Taking an overlay away takes its writes away.
	if out, err := env.Kubectl(t, "delete", "-k", filepath.Join("rbac", "protection")); err != nil {
		t.Fatalf("kubectl delete -k rbac/protection: %v\n%s", err, out)
	}
	sa.WaitRefused("patch", pvcs, ns)

	out, err := env.Kubectl(t, "get", "deployment", name, "-n", namespace, "-o", "jsonpath={.spec.replicas}")
	if err != nil || strings.TrimSpace(out) != "2" {
		t.Errorf("deployment replicas: %q, %v", out, err)
	}
}
