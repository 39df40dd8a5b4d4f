package tether_test

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/config/rbac"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/testing/manifest"
)

// The chart and config/ render the same objects for the same settings,
// except for these differences, which README.md lists too:
//
//  1. The chart creates no Namespace: Helm installs into the release
//     namespace (--create-namespace). config/manager's Namespace also
//     carries the label pod-security.kubernetes.io/enforce=restricted.
//  2. The ConfigMap is tether-controller-config, without kustomize's
//     content hash; a checksum/config annotation on the pods rolls the
//     Deployment out when it changes instead.
//  3. The image tag is the chart's appVersion, not latest.
//  4. Every object carries Helm's labels too (instance, managed-by,
//     version, helm.sh/chart); the selectors are config/'s.
//  5. The configuration lists every check the controller runs (disabled
//     ones with enabled: false) where config/ lists OrphanAttachmentPod
//     disabled; both mean the same configuration.
//  6. Rules are grouped differently (the KubeVirt CR in a rule of its own);
//     they grant the same.
//  7. The CRD lacks the label app.kubernetes.io/part-of that kustomize adds:
//     crds/ holds config/crd's file byte for byte (Helm does not template
//     CRDs).
var configParity = []struct {
	dir  string // under config/
	vals string // the chart's equivalent values
}{
	{"default", "{}"},
	{"namespaced", "scope:\n  namespaces: [tenant-a, tenant-b]"},
	{"webhook", "protection:\n  enabled: true\n  webhook: {enabled: true}"},
	// The opt-in overlays, compared with what the chart adds for them.
	{"rbac/protection", "protection: {enabled: true}"},
	{"rbac/storage-remediation", "storageRemediation: {enabled: true}"},
	{"rbac/policyreports", "policyReports: {enabled: true}"},
}

// TestParityWithConfig renders each config/ directory with kustomize and
// the chart with the equivalent values, and compares every object of
// config/ with the chart's of the same kind, namespace and name: RBAC
// grants and bindings, container arguments, ports, probes, security
// contexts, volumes, Services, the webhook, and the configuration file as
// the controller reads it.
func TestParityWithConfig(t *testing.T) {
	for _, p := range configParity {
		t.Run(p.dir, func(t *testing.T) {
			kustomized := manifest.Objects(t, manifest.Kustomize(t, filepath.Join("..", "..", "config", p.dir)))
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(p.vals), &vals); err != nil {
				t.Fatal(err)
			}
			chart := map[string]*unstructured.Unstructured{}
			for _, o := range render(t, vals) {
				chart[parityKey(o)] = o
			}
			seen := map[string]bool{}
			for _, want := range kustomized {
				k := parityKey(want)
				if want.GetKind() == "Namespace" { // difference 1
					continue
				}
				got, ok := chart[k]
				if !ok {
					t.Errorf("config/%s has %s, the chart does not", p.dir, k)
					continue
				}
				seen[k] = true
				for l, v := range want.GetLabels() { // differences 4 and 7
					if want.GetKind() == "CustomResourceDefinition" && l == "app.kubernetes.io/part-of" {
						continue
					}
					if got.GetLabels()[l] != v {
						t.Errorf("%s: label %s=%q, config/ has %q", k, l, got.GetLabels()[l], v)
					}
				}
				a, b := comparable(t, want), comparable(t, got)
				if !apiequality.Semantic.DeepEqual(a, b) {
					ya, _ := yaml.Marshal(a)
					yb, _ := yaml.Marshal(b)
					t.Errorf("%s differs\nconfig/%s:\n%s\nchart:\n%s", k, p.dir, ya, yb)
				}
			}
			if strings.HasPrefix(p.dir, "rbac/") {
				return // an overlay holds only its own objects
			}
			for k := range chart {
				if !seen[k] {
					t.Errorf("the chart renders %s, config/%s does not", k, p.dir)
				}
			}
		})
	}
}

// parityKey names an object; the hashed ConfigMap by its base name
// (difference 2).
func parityKey(o *unstructured.Unstructured) string {
	n := o.GetName()
	if o.GetKind() == "ConfigMap" && strings.HasPrefix(n, name+"-config") {
		n = name + "-config"
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + n
}

// comparable is what must be equal in an object: everything but its
// metadata, with the differences listed above taken out.
func comparable(t *testing.T, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	c := runtime.DeepCopyJSON(o.Object)
	delete(c, "metadata")
	delete(c, "status") // typed objects carry an empty one
	switch o.GetKind() {
	case "Role", "ClusterRole": // difference 6
		var r rbacv1.ClusterRole
		manifest.Into(t, o, &r)
		var urls []string
		for _, rule := range r.Rules {
			urls = append(urls, rule.NonResourceURLs...)
		}
		c["rules"] = map[string]any{"grants": rbac.Grants(r.Rules), "nonResourceURLs": urls}
	case "ConfigMap": // difference 5
		data, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
		cfg, err := config.Parse([]byte(data))
		if err != nil {
			t.Fatalf("%s: %v", parityKey(o), err)
		}
		maps.DeleteFunc(cfg.Checks, func(_ string, c config.CheckConfig) bool { return !c.Enabled })
		u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
		c["data"] = u
	case "Deployment":
		tpl := c["spec"].(map[string]any)["template"].(map[string]any)
		delete(tpl, "metadata") // differences 2 (annotation) and 4 (labels)
		pod := tpl["spec"].(map[string]any)
		for _, ctr := range pod["containers"].([]any) {
			ctr := ctr.(map[string]any)
			ctr["image"], _, _ = strings.Cut(ctr["image"].(string), ":") // difference 3
			byName(ctr["ports"])
			byName(ctr["volumeMounts"])
		}
		byName(pod["volumes"])
		for _, v := range pod["volumes"].([]any) {
			if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
				cm["name"] = name + "-config" // difference 2
			}
		}
	}
	return c
}

// byName sorts a list of named items (ports, volumes, mounts): a patch
// prepends, the chart appends, and the order means nothing.
func byName(list any) {
	if l, ok := list.([]any); ok {
		slices.SortFunc(l, func(a, b any) int {
			return strings.Compare(a.(map[string]any)["name"].(string), b.(map[string]any)["name"].(string))
		})
	}
}

// TestParityDeletePolicy: the chart's admission policy is the one
// `tether manifests protection --allow ...` prints.
func TestParityDeletePolicy(t *testing.T) {
	allow := []string{"system:kube-controller-manager", "system:serviceaccount:argocd:argocd-application-controller"}
	objs := render(t, map[string]any{"protection": map[string]any{"deletePolicy": map[string]any{"enabled": true, "allow": []any{allow[0], allow[1]}}}})
	p, b := protect.Policy(protect.PolicyOptions{Allow: allow})
	for _, want := range []runtime.Object{p, b} {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
		if err != nil {
			t.Fatal(err)
		}
		w := &unstructured.Unstructured{Object: u}
		got := must(t, objs, w.GetKind(), "", w.GetName())
		if a, b := comparable(t, w), comparable(t, got); !apiequality.Semantic.DeepEqual(a, b) {
			ya, _ := yaml.Marshal(a)
			yb, _ := yaml.Marshal(b)
			t.Errorf("%s differs from `tether manifests protection`:\n%s\nchart:\n%s", w.GetKind(), ya, yb)
		}
		if !slices.Equal(slices.Sorted(maps.Keys(w.GetLabels())), []string{"app.kubernetes.io/name", "app.kubernetes.io/part-of"}) {
			t.Errorf("labels of protect.Policy changed: %v; check the chart's", w.GetLabels())
		}
	}
}

// TestParityNamespacedProtection: with protection, the chart's Roles are
// those of `tether manifests rbac --protection` for any namespaces and
// release namespace, including one that is itself in scope.
func TestParityNamespacedProtection(t *testing.T) {
	for _, nss := range [][]string{{"a", "b", "c"}, {"a", "ctl"}} {
		t.Run(strings.Join(nss, ","), func(t *testing.T) {
			var list []any
			for _, n := range nss {
				list = append(list, n)
			}
			objs, err := renderIn(t, "ctl", map[string]any{"scope": map[string]any{"namespaces": list}, "protection": map[string]any{"enabled": true}})
			if err != nil {
				t.Fatal(err)
			}
			want, err := rbac.Namespaced(rbac.Options{Namespaces: nss, ControllerNamespace: "ctl", Protection: true})
			if err != nil {
				t.Fatal(err)
			}
			var wantKeys []string
			for _, o := range want {
				u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
				w := &unstructured.Unstructured{Object: u}
				wantKeys = append(wantKeys, key(w))
				got := get(objs, w.GetKind(), w.GetNamespace(), w.GetName())
				if got == nil {
					t.Errorf("the chart lacks %s", key(w))
					continue
				}
				if a, b := comparable(t, w), comparable(t, got); !apiequality.Semantic.DeepEqual(a, b) {
					t.Errorf("%s: chart %v, `tether manifests rbac` %v", key(w), b, a)
				}
			}
			for _, o := range objs {
				k := o.GetKind()
				if (k == "Role" || k == "RoleBinding" || k == "ClusterRole" || k == "ClusterRoleBinding") && !slices.Contains(wantKeys, key(o)) &&
					!strings.HasPrefix(o.GetName(), name+"-leader-election") && !strings.HasPrefix(o.GetName(), name+"-metrics-auth") && o.GetName() != "tether-metrics-reader" {
					t.Errorf("the chart renders %s, which `tether manifests rbac` does not", key(o))
				}
			}
		})
	}
}
