// Tests of the deployment manifests: what `kubectl kustomize config/default`
// builds, and that the real control plane accepts it and grants the
// controller exactly what it needs.
package manifests_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/config/crd"
	"github.com/tether-dev/tether/config/rbac"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/testing/manifest"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

const (
	namespace = "tether-system"
	name      = "tether-controller"
	saUser    = "system:serviceaccount:" + namespace + ":" + name
)

// build runs kubectl kustomize on a directory under config/.
func build(t *testing.T, dir string) []byte { return manifest.Kustomize(t, dir) }

// objects splits a multi-document YAML stream into objects.
func objects(t *testing.T, data []byte) []*unstructured.Unstructured {
	return manifest.Objects(t, data)
}

func into(t *testing.T, u *unstructured.Unstructured, v any) { manifest.Into(t, u, v) }

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

// named returns the object of a kind and name.
func named(t *testing.T, objs []*unstructured.Unstructured, kind, objName string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == objName {
			return o
		}
	}
	t.Fatalf("no %s %s in the build", kind, objName)
	return nil
}

// grants flattens RBAC rules into sorted "group/resource:verb" strings.
func grants(rules []rbacv1.PolicyRule) []string { return rbac.Grants(rules) }

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
		expand("", []string{"persistentvolumeclaims"}, read),
		expand("cdi.kubevirt.io", []string{"datavolumes"}, read),
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
	// config/rbac/protection: the finalizer patches, opt-in.
	wantProtectionRules = sorted(
		expand("", []string{"persistentvolumeclaims"}, []string{"get", "list", "watch", "patch"}),
		expand("cdi.kubevirt.io", []string{"datavolumes"}, []string{"get", "list", "watch", "patch"}),
		expand("apps", []string{"controllerrevisions"}, []string{"get", "list", "watch", "patch"}),
		expand("", []string{"namespaces"}, []string{"get"}),
	)
	wantMetricsAuthRules = sorted(
		expand("authentication.k8s.io", []string{"tokenreviews"}, []string{"create"}),
		expand("authorization.k8s.io", []string{"subjectaccessreviews"}, []string{"create"}),
	)
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
	want := []string{"ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ConfigMap", "CustomResourceDefinition", "Deployment",
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
	into(t, named(t, objs, "ClusterRole", name), &cr)
	if g := grants(cr.Rules); !slices.Equal(g, wantRules) {
		t.Errorf("ClusterRole grants\n %v\nwant\n %v", g, wantRules)
	}
	var auth rbacv1.ClusterRole
	into(t, named(t, objs, "ClusterRole", name+"-metrics-auth"), &auth)
	if g := grants(auth.Rules); !slices.Equal(g, wantMetricsAuthRules) {
		t.Errorf("metrics-auth ClusterRole grants %v, want %v", g, wantMetricsAuthRules)
	}
	var reader rbacv1.ClusterRole
	into(t, named(t, objs, "ClusterRole", "tether-metrics-reader"), &reader)
	if len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].NonResourceURLs, []string{"/metrics"}) ||
		!slices.Equal(reader.Rules[0].Verbs, []string{"get"}) || len(reader.Rules[0].Resources) > 0 {
		t.Errorf("tether-metrics-reader rules %+v, want GET /metrics only", reader.Rules)
	}
	var role rbacv1.Role
	into(t, find(t, objs, "Role"), &role)
	if g := grants(role.Rules); !slices.Equal(g, wantLeaseRules) || role.Namespace != namespace {
		t.Errorf("Role in %s grants %v, want %v", role.Namespace, g, wantLeaseRules)
	}
	wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}}
	for _, bound := range []string{cr.Name, auth.Name} {
		var crb rbacv1.ClusterRoleBinding
		into(t, named(t, objs, "ClusterRoleBinding", bound), &crb)
		if crb.RoleRef.Name != bound || crb.RoleRef.Kind != "ClusterRole" || !slices.Equal(crb.Subjects, wantSubject) {
			t.Errorf("ClusterRoleBinding %+v %+v", crb.RoleRef, crb.Subjects)
		}
	}
	var rb rbacv1.RoleBinding
	into(t, find(t, objs, "RoleBinding"), &rb)
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
		"--metrics-bind-address=:8443", "--health-probe-bind-address=:8081"}
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
	if ports["metrics"] != 8443 || ports["health"] != 8081 {
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
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
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
