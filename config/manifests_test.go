// Tests of the deployment manifests: what `kubectl kustomize config/default`
// builds, and that the real control plane accepts it and grants the
// controller exactly what it needs.
package manifests_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/config/crd"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

const (
	namespace = "tether-system"
	name      = "tether-controller"
	saUser    = "system:serviceaccount:" + namespace + ":" + name
)

// build runs kubectl kustomize on a directory under config/.
func build(t *testing.T, dir string) []byte {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return out
}

// objects splits a multi-document YAML stream into objects.
func objects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("a document does not parse: %v\n%s", err, doc)
		}
		out = append(out, u)
	}
	return out
}

func into(t *testing.T, u *unstructured.Unstructured, v any) {
	t.Helper()
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// find returns the only object of a kind.
func find(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			if found != nil {
				t.Fatalf("two objects of kind %s", kind)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("no %s in the build", kind)
	}
	return found
}

// grants flattens RBAC rules into sorted "group/resource:verb" strings.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, fmt.Sprintf("%s/%s:%s", g, res, v))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func expand(group string, resources, verbs []string) []string {
	var out []string
	for _, r := range resources {
		for _, v := range verbs {
			out = append(out, fmt.Sprintf("%s/%s:%s", group, r, v))
		}
	}
	return out
}

func sorted(parts ...[]string) []string {
	out := slices.Concat(parts...)
	sort.Strings(out)
	return out
}

var (
	read      = []string{"get", "list", "watch"}
	allVerbs  = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	wantRules = sorted(
		expand("kubevirt.io", []string{"virtualmachines", "virtualmachineinstances", "kubevirts"}, read),
		expand("", []string{"pods"}, read),
		expand("", []string{"persistentvolumeclaims"}, []string{"get", "list", "watch", "patch"}),
		expand("cdi.kubevirt.io", []string{"datavolumes"}, []string{"get", "list", "watch", "patch"}),
		expand("apps", []string{"controllerrevisions"}, []string{"get", "list", "watch", "patch"}),
		expand("", []string{"namespaces"}, []string{"get"}),
		expand("", []string{"nodes", "persistentvolumes"}, read),
		expand("storage.k8s.io", []string{"volumeattachments"}, read),
		expand("storage.k8s.io", []string{"csidrivers"}, []string{"list", "watch"}),
		expand("subresources.kubevirt.io", []string{"virtualmachines/removevolume", "virtualmachineinstances/removevolume"}, []string{"update"}),
		expand("tether.dev", []string{"findings"}, allVerbs),
		expand("tether.dev", []string{"findings/status"}, []string{"get", "update", "patch"}),
		expand("", []string{"events"}, []string{"create", "patch"}),
		expand("events.k8s.io", []string{"events"}, []string{"create", "patch"}),
	)
	wantLeaseRules = sorted(expand("coordination.k8s.io", []string{"leases"}, allVerbs))
)

func TestDefaultBuild(t *testing.T) {
	objs := objects(t, build(t, "default"))

	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind())
		if ns := o.GetNamespace(); ns != "" && ns != namespace {
			t.Errorf("%s %s is in namespace %q, want %s", o.GetKind(), o.GetName(), ns, namespace)
		}
		if o.GetLabels()["app.kubernetes.io/part-of"] != "tether" {
			t.Errorf("%s %s lacks the part-of label", o.GetKind(), o.GetName())
		}
	}
	sort.Strings(got)
	want := []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "CustomResourceDefinition", "Deployment",
		"Namespace", "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount"}
	if !slices.Equal(got, want) {
		t.Fatalf("kinds %v\nwant %v", got, want)
	}

	// The CRD is the embedded one, unchanged by kustomize.
	var built apiextensionsv1.CustomResourceDefinition
	into(t, find(t, objs, "CustomResourceDefinition"), &built)
	embedded, err := crd.Object()
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(built.Spec, embedded.Spec) {
		t.Error("the built CRD differs from config/crd's embedded one")
	}

	// RBAC: exactly the rules the controller uses, bound to its account.
	var cr rbacv1.ClusterRole
	into(t, find(t, objs, "ClusterRole"), &cr)
	if g := grants(cr.Rules); !slices.Equal(g, wantRules) {
		t.Errorf("ClusterRole grants\n %v\nwant\n %v", g, wantRules)
	}
	var role rbacv1.Role
	into(t, find(t, objs, "Role"), &role)
	if g := grants(role.Rules); !slices.Equal(g, wantLeaseRules) || role.Namespace != namespace {
		t.Errorf("Role in %s grants %v, want %v", role.Namespace, g, wantLeaseRules)
	}
	var crb rbacv1.ClusterRoleBinding
	into(t, find(t, objs, "ClusterRoleBinding"), &crb)
	var rb rbacv1.RoleBinding
	into(t, find(t, objs, "RoleBinding"), &rb)
	wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}}
	if crb.RoleRef.Name != cr.Name || crb.RoleRef.Kind != "ClusterRole" || !slices.Equal(crb.Subjects, wantSubject) {
		t.Errorf("ClusterRoleBinding %+v %+v", crb.RoleRef, crb.Subjects)
	}
	if rb.RoleRef.Name != role.Name || rb.RoleRef.Kind != "Role" || !slices.Equal(rb.Subjects, wantSubject) {
		t.Errorf("RoleBinding %+v %+v", rb.RoleRef, rb.Subjects)
	}
	if sa := find(t, objs, "ServiceAccount"); sa.GetName() != name {
		t.Errorf("ServiceAccount %s, want %s", sa.GetName(), name)
	}

	checkDeployment(t, objs)
}

func checkDeployment(t *testing.T, objs []*unstructured.Unstructured) {
	var d appsv1.Deployment
	into(t, find(t, objs, "Deployment"), &d)
	if d.Name != name || d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("Deployment %s replicas %v, want %s with 2", d.Name, d.Spec.Replicas, name)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != name {
		t.Errorf("service account %q", pod.ServiceAccountName)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	wantArgs := []string{"controller", "--leader-elect", "--config=/etc/tether/config.yaml",
		"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %v, want %v", c.Args, wantArgs)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "POD_NAMESPACE" || c.Env[0].ValueFrom == nil ||
		c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("env %+v", c.Env)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 8080 || ports["health"] != 8081 {
		t.Errorf("ports %v", ports)
	}
	probe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "health" {
			t.Errorf("%s probe %+v, want GET %s on port health (8081)", what, p, path)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")

	ps, cs := pod.SecurityContext, c.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.SeccompProfile == nil ||
		ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", ps)
	}
	if cs == nil || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem ||
		cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation ||
		cs.Capabilities == nil || !slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v", cs)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
		if _, ok := c.Resources.Limits[r]; !ok {
			t.Errorf("no %s limit", r)
		}
	}

	// The config volume is the generated ConfigMap, mounted where --config
	// points, and holds a valid, conservative configuration.
	cm := find(t, objs, "ConfigMap")
	var mounted bool
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.GetName() {
			for _, m := range c.VolumeMounts {
				mounted = mounted || (m.Name == v.Name && m.MountPath == "/etc/tether")
			}
		}
	}
	if !mounted {
		t.Errorf("ConfigMap %s is not mounted at /etc/tether", cm.GetName())
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	cfg, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatalf("the ConfigMap's config.yaml: %v", err)
	}
	if !cfg.DryRun {
		t.Error("the deployed configuration must start in dryRun")
	}
	if _, err := cfg.Policy(); err != nil {
		t.Errorf("the deployed configuration builds no policy: %v", err)
	}

	// The metrics Service selects the pods and targets the metrics port.
	var svc corev1.Service
	into(t, find(t, objs, "Service"), &svc)
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %v does not select the pods (%v)", svc.Spec.Selector, d.Spec.Template.Labels)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service ports %+v", svc.Spec.Ports)
	}
}

func TestTenantReader(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("rbac", "tenant-reader.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &cr); err != nil {
		t.Fatal(err)
	}
	want := sorted(
		expand("storage.k8s.io", []string{"volumeattachments"}, read),
		expand("", []string{"persistentvolumes"}, read),
		expand("", []string{"nodes"}, read),
		expand("storage.k8s.io", []string{"csinodes", "csidrivers"}, read),
	)
	if g := grants(cr.Rules); cr.Kind != "ClusterRole" || !slices.Equal(g, want) {
		t.Errorf("%s grants %v, want %v", cr.Kind, g, want)
	}
}

// TestApplyOnControlPlane: the real apiserver accepts the build (server-side
// dry run first, then for real), and RBAC then lets the controller's
// account do what it needs and nothing beyond.
func TestApplyOnControlPlane(t *testing.T) {
	env := testenv.Get(t)
	file := filepath.Join(t.TempDir(), "default.yaml")
	all := build(t, "default")
	if err := os.WriteFile(file, all, 0o600); err != nil {
		t.Fatal(err)
	}

	// Before anything exists, the cluster-scoped part can be dry-run alone:
	// the namespaced objects need their namespace to exist first.
	var clusterScoped bytes.Buffer
	for _, o := range objects(t, all) {
		if o.GetNamespace() == "" && o.GetKind() != "Namespace" {
			data, err := yaml.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			clusterScoped.WriteString("---\n")
			clusterScoped.Write(data)
		}
	}
	csFile := filepath.Join(t.TempDir(), "cluster-scoped.yaml")
	if err := os.WriteFile(csFile, clusterScoped.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(t, "apply", "--dry-run=server", "-f", csFile); err != nil {
		t.Fatalf("server dry run of the CRD and cluster RBAC: %v\n%s", err, out)
	}

	if out, err := env.Kubectl(t, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	if out, err := env.Kubectl(t, "apply", "--dry-run=server", "-f", file); err != nil {
		t.Fatalf("server dry run of the whole build: %v\n%s", err, out)
	}
	out, err := env.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+crd.Name)
	if err != nil {
		t.Fatalf("CRD not established: %v\n%s", err, out)
	}

	// SubjectAccessReviews with exact group, resource and subresource (kubectl
	// auth can-i resolves names through discovery, which knows the KubeVirt
	// subresources only under their parent resources).
	canI := func(allowed bool, verb, group, resource, subresource, ns string) {
		t.Helper()
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   saUser,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: group, Resource: resource, Subresource: subresource, Namespace: ns,
			},
		}}
		got, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		if got.Status.Allowed != allowed {
			t.Errorf("%s %s/%s/%s in %q: allowed=%v, want %v (%s)", verb, group, resource, subresource, ns,
				got.Status.Allowed, allowed, got.Status.Reason)
		}
	}
	const allNamespaces = ""
	canI(true, "watch", "kubevirt.io", "virtualmachineinstances", "", allNamespaces)
	canI(true, "get", "kubevirt.io", "virtualmachines", "", "tenant-a")
	canI(true, "list", "kubevirt.io", "kubevirts", "", allNamespaces)
	canI(true, "get", "", "pods", "", "tenant-a")
	canI(true, "watch", "", "persistentvolumeclaims", "", allNamespaces)
	canI(true, "list", "cdi.kubevirt.io", "datavolumes", "", allNamespaces)
	canI(true, "update", "subresources.kubevirt.io", "virtualmachineinstances", "removevolume", "tenant-a")
	canI(true, "update", "subresources.kubevirt.io", "virtualmachines", "removevolume", "tenant-a")
	canI(true, "create", "tether.dev", "findings", "", "tenant-a")
	canI(true, "patch", "tether.dev", "findings", "status", "tenant-a")
	canI(true, "create", "", "events", "", "tenant-a")
	canI(true, "patch", "events.k8s.io", "events", "", "tenant-a")
	canI(true, "update", "coordination.k8s.io", "leases", "", namespace)

	canI(false, "update", "coordination.k8s.io", "leases", "", "default")
	canI(false, "delete", "", "pods", "", "tenant-a") // storage-remediation is not applied yet
	canI(false, "update", "kubevirt.io", "virtualmachineinstances", "", "tenant-a")
	canI(false, "update", "subresources.kubevirt.io", "virtualmachineinstances", "addvolume", "tenant-a")
	canI(true, "patch", "", "persistentvolumeclaims", "", "tenant-a")
	canI(true, "patch", "cdi.kubevirt.io", "datavolumes", "", "tenant-a")
	canI(true, "patch", "apps", "controllerrevisions", "", "tenant-a")
	canI(true, "get", "", "namespaces", "", allNamespaces)
	canI(false, "update", "", "persistentvolumeclaims", "", "tenant-a")
	canI(false, "delete", "apps", "controllerrevisions", "", "tenant-a")
	canI(false, "delete", "", "namespaces", "", allNamespaces)
	canI(false, "delete", "", "persistentvolumeclaims", "", "tenant-a")
	canI(false, "get", "", "secrets", "", namespace)
	canI(false, "delete", "tether.dev", "findings", "status", "tenant-a")
	// The storage checks read, and by default write nothing.
	canI(true, "watch", "", "nodes", "", allNamespaces)
	canI(true, "get", "", "persistentvolumes", "", allNamespaces)
	canI(true, "list", "storage.k8s.io", "volumeattachments", "", allNamespaces)
	canI(true, "watch", "storage.k8s.io", "csidrivers", "", allNamespaces)
	canI(false, "delete", "storage.k8s.io", "volumeattachments", "", allNamespaces)
	canI(false, "patch", "storage.k8s.io", "volumeattachments", "", allNamespaces)
	canI(false, "update", "", "nodes", "", allNamespaces)

	// The opt-in storage remediation adds exactly its writes.
	if out, err := env.Kubectl(t, "apply", "-k", filepath.Join("rbac", "storage-remediation")); err != nil {
		t.Fatalf("applying rbac/storage-remediation: %v\n%s", err, out)
	}
	testenv.Eventually(t, 10*time.Second, "the remediation grants", func() (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: saUser, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Group: "storage.k8s.io", Resource: "volumeattachments"},
		}}
		got, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, err
	})
	canI(true, "delete", "", "pods", "", "tenant-a")
	canI(true, "patch", "storage.k8s.io", "volumeattachments", "", allNamespaces)
	canI(false, "update", "storage.k8s.io", "volumeattachments", "", allNamespaces)
	canI(false, "delete", "", "nodes", "", allNamespaces)
	canI(false, "delete", "", "persistentvolumeclaims", "", "tenant-a")

	out, err = env.Kubectl(t, "get", "deployment", name, "-n", namespace, "-o", "jsonpath={.spec.replicas}")
	if err != nil || strings.TrimSpace(out) != "2" {
		t.Errorf("deployment replicas: %q, %v", out, err)
	}
}
