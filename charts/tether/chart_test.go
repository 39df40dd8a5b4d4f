// Tests of the Helm chart, with Helm's Go SDK: it lints clean, renders
// what each values file in ci/ asks for, refuses bad values with a message
// that names them, matches config/ (parity_test.go), and the real control
// plane accepts what it renders and grants exactly what the values say
// (cluster_test.go).
package tether_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tether-dev/tether/config/rbac"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/testing/manifest"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

// The release is installed as "tether" into namespace tether-system unless
// a test says otherwise; name is the controller's objects' name.
const (
	release   = "tether"
	namespace = "tether-system"
	name      = rbac.ServiceAccount
)

// ciFiles are the values files in ci/, by name without "-values.yaml".
func ciFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files in ci/: %v", err)
	}
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(filepath.Base(f), "-values.yaml"))
	}
	return out
}

// values reads ci/<name>-values.yaml.
func values(t *testing.T, name string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValuesFile(filepath.Join("ci", name+"-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return v.AsMap()
}

// renderIn renders the chart as `helm install --dry-run` without a cluster
// would, CRDs included, into namespace ns.
func renderIn(t *testing.T, ns string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	chrt, err := loader.Load(".")
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.ClientOnly = true
	install.DryRun = true
	install.IncludeCRDs = true
	install.ReleaseName = release
	install.Namespace = ns
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return nil, err
	}
	return manifest.Objects(t, []byte(rel.Manifest)), nil
}

// render renders the chart into tether-system and fails the test on error.
func render(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderIn(t, namespace, vals)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return objs
}

// key names an object as "Kind namespace/name".
func key(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

func keys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, key(o))
	}
	sort.Strings(out)
	return out
}

// get returns the object of that kind, namespace and name, or nil.
func get(objs []*unstructured.Unstructured, kind, ns, objName string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == objName {
			return o
		}
	}
	return nil
}

func must(t *testing.T, objs []*unstructured.Unstructured, kind, ns, objName string) *unstructured.Unstructured {
	t.Helper()
	o := get(objs, kind, ns, objName)
	if o == nil {
		t.Fatalf("no %s %s/%s among\n%s", kind, ns, objName, strings.Join(keys(objs), "\n"))
	}
	return o
}

// grantsOf returns the grants of a Role or ClusterRole, or nil if absent.
func grantsOf(t *testing.T, objs []*unstructured.Unstructured, kind, ns, objName string) []string {
	t.Helper()
	o := get(objs, kind, ns, objName)
	if o == nil {
		return nil
	}
	var r rbacv1.ClusterRole // a Role has the same rules field
	manifest.Into(t, o, &r)
	return rbac.Grants(r.Rules)
}

// allGrants are the grants of every Role and ClusterRole bound to the
// controller's ServiceAccount.
func allGrants(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding
		manifest.Into(t, o, &b)
		if len(b.Subjects) != 1 || b.Subjects[0].Name != name {
			continue
		}
		out = append(out, grantsOf(t, objs, b.RoleRef.Kind, o.GetNamespace(), b.RoleRef.Name)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	manifest.Into(t, must(t, objs, "Deployment", namespace, name), &d)
	return d
}

// controllerConfig parses the rendered configuration file as the
// controller does at start.
func controllerConfig(t *testing.T, objs []*unstructured.Unstructured) *config.Config {
	t.Helper()
	data, _, _ := unstructured.NestedString(must(t, objs, "ConfigMap", namespace, name+"-config").Object, "data", "config.yaml")
	cfg, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatalf("the rendered config.yaml: %v\n%s", err, data)
	}
	return cfg
}

// TestLint: Helm's linter finds nothing above INFO, with the defaults and
// with every values file in ci/.
func TestLint(t *testing.T) {
	for _, f := range append([]string{""}, ciFiles(t)...) {
		t.Run("values="+f, func(t *testing.T) {
			var vals map[string]any
			if f != "" {
				vals = values(t, f)
			}
			l := lint.All(".", vals, namespace, false)
			for _, m := range l.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("lint: %s", m)
				}
			}
		})
	}
}

// TestCRDIsConfigs: the chart installs the very CRD file of config/crd.
func TestCRDIsConfigs(t *testing.T) {
	chart, err := os.ReadFile(filepath.Join("crds", "tether.dev_findings.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "tether.dev_findings.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(chart, cfg) {
		t.Error("charts/tether/crds/tether.dev_findings.yaml differs from config/crd/tether.dev_findings.yaml: copy it over")
	}
	entries, _ := os.ReadDir("crds")
	if len(entries) != 1 {
		t.Errorf("crds/ holds %d files, want only the Finding CRD", len(entries))
	}
}

// TestRefused: values the schema or the chart refuses, each with a message
// that names the value.
func TestRefused(t *testing.T) {
	cases := []struct {
		name string
		vals string
		want []string
	}{
		{"replicas as a word -> schema names it", `replicas: two`, []string{"replicas", "integer"}},
		{"unknown key -> schema names it", `replica: 2`, []string{"replica", "not allowed"}},
		{"unknown nested key -> schema names it", "protection:\n  enable: true", []string{"protection", "enable"}},
		{"unknown check -> schema names it", "checks:\n  OrphanAttachmentPod: {enabled: true}", []string{"checks", "OrphanAttachmentPod"}},
		{"fencing without a tenant -> names tenants", "checks:\n  TenantNodeDown: {enabled: true}", []string{"TenantNodeDown", "tenants", "tenant-fencer"}},
		{"pull policy not an enum value -> lists them", "image:\n  pullPolicy: Sometimes", []string{"pullPolicy", "IfNotPresent"}},
		{"duration without unit -> names it", "blastRadius:\n  interval: 10", []string{"interval"}},
		{"duration in words -> names it", `actionTimeout: ten minutes`, []string{"actionTimeout"}},
		{"namespace not a DNS label -> names it", "scope:\n  namespaces: [Tenant_A]", []string{"namespaces"}},
		{"failure policy not an enum value -> names it", "protection:\n  webhook:\n    failurePolicy: Open", []string{"failurePolicy"}},
		{"tenant without Secret -> names it", "tenants:\n  - name: guest1", []string{"secretName"}},
		{"storage check with namespaces -> says why", "scope:\n  namespaces: [a]\nchecks:\n  BlockedDeletion: {enabled: true}",
			[]string{"BlockedDeletion", "scope.namespaces"}},
		{"storage remediation with namespaces -> says why", "scope:\n  namespaces: [a]\nstorageRemediation: {enabled: true}",
			[]string{"storageRemediation.enabled", "scope.namespaces"}},
		{"forceDetach without its rights -> names them", "storage: {forceDetach: true}", []string{"storage.forceDetach", "storageRemediation.enabled"}},
		{"webhook without protection -> names it", "protection:\n  webhook: {enabled: true}", []string{"protection.webhook.enabled", "protection.enabled"}},
		{"webhook without cert-manager nor CA -> names caBundle", "protection:\n  enabled: true\n  webhook: {enabled: true, certManager: false}",
			[]string{"protection.webhook.caBundle"}},
		{"two replicas without leader election -> says both act", "leaderElection: {enabled: false}", []string{"replicas", "leaderElection.enabled"}},
		{"tenantAuthoritative without tenants -> names tenants", `tenantAuthoritative: true`, []string{"tenantAuthoritative", "tenants"}},
		{"report API not one of the two -> lists them", "policyReports:\n  api: wgpolicyk8s.io/v1beta1", []string{"policyReports", "openreports.io/v1alpha1"}},
		{"flow control limit response not an enum value -> names it", "flowControl: {enabled: true, limitResponse: Drop}", []string{"limitResponse", "Queue"}},
		{"flow control ServiceAccount without namespace -> names it", "flowControl:\n  enabled: true\n  subjects: [{kind: ServiceAccount, name: auditor}]",
			[]string{"subjects", "namespace"}},
		{"flow control subject of an unknown kind -> names it", "flowControl:\n  subjects: [{kind: Robot, name: r2}]", []string{"kind", "ServiceAccount"}},
		{"ServiceMonitor without Service -> names it", "metrics:\n  service: {enabled: false}\n  serviceMonitor: {enabled: true}",
			[]string{"metrics.service.enabled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := chartutil.ReadValues([]byte(tc.vals))
			if err != nil {
				t.Fatal(err)
			}
			_, err = renderIn(t, namespace, vals.AsMap())
			if err == nil {
				t.Fatalf("values %q rendered, want them refused", tc.vals)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// TestChecksAreTheControllers: the chart offers exactly the checks the
// controller runs (the rows that name a loop), in the schema and in
// values.yaml; each renders into a configuration the controller accepts
// with it enabled; with scope.namespaces, the storage checks, and only
// they, are refused.
func TestChecksAreTheControllers(t *testing.T) {
	want := config.ControllerChecks()
	slices.Sort(want)
	data, err := os.ReadFile("values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Checks struct {
				Properties map[string]any `json:"properties"`
			} `json:"checks"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(schema.Properties.Checks.Properties)); !slices.Equal(got, want) {
		t.Errorf("the schema's checks are %v, want the controller's %v", got, want)
	}
	defaults, err := chartutil.ReadValuesFile("values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(defaults.AsMap()["checks"].(map[string]any))); !slices.Equal(got, want) {
		t.Errorf("values.yaml lists the checks %v, want the controller's %v", got, want)
	}
	for _, check := range want {
		on := map[string]any{"checks": map[string]any{check: map[string]any{"enabled": true}}}
		if check == "TenantNodeDown" { // it fences tenant nodes: it needs a tenant
			on["tenants"] = []any{map[string]any{"name": "guest1", "secretName": "guest1-kubeconfig", "namespace": "a"}}
		}
		if cfg := controllerConfig(t, render(t, on)); !cfg.Enabled(check) {
			t.Errorf("checks.%s.enabled: true renders a configuration without it", check)
		}
		on["scope"] = map[string]any{"namespaces": []any{"a"}}
		_, err := renderIn(t, namespace, on)
		if storage := slices.Contains(config.StorageChecks(), check); storage != (err != nil) {
			t.Errorf("%s with scope.namespaces: refused %v (%v), want refused only for a storage check", check, err != nil, err)
		}
	}
}

// TestRender: what each values file in ci/ renders, and that its
// configuration file is one the controller accepts.
func TestRender(t *testing.T) {
	argsOf := func(t *testing.T, objs []*unstructured.Unstructured) []string {
		return deployment(t, objs).Spec.Template.Spec.Containers[0].Args
	}
	has := func(objs []*unstructured.Unstructured, kind, ns, n string) bool { return get(objs, kind, ns, n) != nil }
	cases := map[string]func(t *testing.T, objs []*unstructured.Unstructured, cfg *config.Config){
		"default": func(t *testing.T, objs []*unstructured.Unstructured, cfg *config.Config) {
			if !cfg.DryRun || !cfg.Enabled("OrphanHotplugVolume") || len(cfg.Scope.Namespaces) != 0 || cfg.Protection.Enabled {
				t.Errorf("config %+v, want dry run, OrphanHotplugVolume, every namespace, no protection", cfg)
			}
			d := deployment(t, objs)
			if *d.Spec.Replicas != 2 || !slices.Contains(argsOf(t, objs), "--leader-elect") {
				t.Errorf("replicas %d, args %v: want 2 with --leader-elect", *d.Spec.Replicas, argsOf(t, objs))
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/tether-dev/tether:v0.1.0" {
				t.Errorf("image %s, want the appVersion's", img)
			}
			for _, n := range []string{name + "-protection", name + "-storage-remediation", name + "-policyreports"} {
				if has(objs, "ClusterRole", "", n) {
					t.Errorf("opt-in ClusterRole %s rendered by default", n)
				}
			}
			if !has(objs, "PodDisruptionBudget", namespace, name) || has(objs, "ServiceMonitor", namespace, name) {
				t.Error("want a PodDisruptionBudget and no ServiceMonitor")
			}
			if has(objs, "FlowSchema", "", name) || has(objs, "PriorityLevelConfiguration", "", name) {
				t.Error("priority and fairness objects rendered by default")
			}
		},
		"namespaced": func(t *testing.T, objs []*unstructured.Unstructured, cfg *config.Config) {
			if !slices.Equal(cfg.Scope.Namespaces, []string{"tenant-a", "tenant-b"}) {
				t.Errorf("scope.namespaces %v", cfg.Scope.Namespaces)
			}
			if has(objs, "ClusterRole", "", name) {
				t.Error("the cluster-wide ClusterRole is rendered for a namespaced scope")
			}
			for _, ns := range []string{"tenant-a", "tenant-b"} {
				if g := grantsOf(t, objs, "Role", ns, name); !slices.Contains(g, "/pods:list") || slices.Contains(g, "/persistentvolumeclaims:patch") {
					t.Errorf("Role in %s grants %v", ns, g)
				}
			}
			if !has(objs, "Role", namespace, name+"-records") {
				t.Error("no records Role in the release namespace")
			}
		},
		"protection-off": func(t *testing.T, objs []*unstructured.Unstructured, cfg *config.Config) {
			g := allGrants(t, objs)
			for _, w := range []string{"/persistentvolumeclaims:patch", "cdi.kubevirt.io/datavolumes:patch", "apps/controllerrevisions:patch", "/namespaces:get", "/pods:delete"} {
				if slices.Contains(g, w) {
					t.Errorf("protection off, yet %s is granted", w)
				}
			}
			if slices.Contains(argsOf(t, objs), "--leader-elect") || has(objs, "PodDisruptionBudget", namespace, name) {
				t.Errorf("one replica without leader election: args %v, or a PodDisruptionBudget", argsOf(t, objs))
			}
		},
		"protection": func(t *testing.T, objs []*unstructured.Unstructured, cfg *config.Config) {
			if !cfg.Protection.Enabled {
				t.Error("protection.enabled is not in the configuration")
			}
			if g := grantsOf(t, objs, "ClusterRole", "", name+"-protection"); !slices.Contains(g, "/persistentvolumeclaims:patch") {
				t.Errorf("protection ClusterRole grants %v", g)
			}
			for _, a := range []string{"--webhook-bind-address=:9443", "--webhook-cert-dir=/etc/tether/webhook-tls"} {
				if !slices.Contains(argsOf(t, objs), a) {
					t.Errorf("args %v lack %s", argsOf(t, objs), a)
				}
			}
			for _, k := range [][2]string{{"ValidatingWebhookConfiguration", ""}, {"ValidatingAdmissionPolicy", ""}, {"ValidatingAdmissionPolicyBinding", ""},
				{"Certificate", namespace}, {"Issuer", namespace}, {"Service", namespace}} {
				if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == k[0] && o.GetNamespace() == k[1] }) {
					t.Errorf("no %s", k[0])
				}
			}
		},
		"storage-remediation": func(t *testing.T, objs []*unstructured.Unstructured, cfg *config.Config) {
			if cfg.DryRun || !cfg.Enabled("StaleVolumeAttachment") || !cfg.Storage.ForceDetach || cfg.Grace("StaleVolumeAttachment").Minutes() != 15 {
				t.Errorf("config %+v", cfg)
			}
			want := []string{"/pods:delete", "storage.k8s.io/volumeattachments:delete", "storage.k8s.io/volumeattachments:patch"}
			if g := grantsOf(t, objs, "ClusterRole", "", name+"-storage-remediation"); !slices.Equal(g, want) {
				t.Errorf("storage-remediation ClusterRole grants %v, want %v", g, want)
			}
		},
		"tenants": func(t *testing.T, objs []*unstructured.Unstructured, cfg *config.Config) {
			if len(cfg.Tenants) != 2 || cfg.Tenants[0].Kubeconfig != "/etc/tether/tenants/guest1/kubeconfig" || cfg.Tenants[1].Driver != "csi.example.com" ||
				!cfg.Tenants[1].MatchNodesByName || !cfg.TenantAuthoritative {
				t.Errorf("tenants %+v", cfg.Tenants)
			}
			if cfg.Fencing.FenceAfter.Duration != 2*time.Minute || cfg.Fencing.UnfenceSettle.Duration != 90*time.Second {
				t.Errorf("fencing %+v, want fenceAfter 2m and unfenceSettle 90s", cfg.Fencing)
			}
			pod := deployment(t, objs).Spec.Template.Spec
			for _, v := range pod.Volumes {
				if v.Name == "tenant-guest2" && (v.Secret == nil || v.Secret.SecretName != "guest2-kubeconfig" || v.Secret.Items[0].Key != "value" || v.Secret.Items[0].Path != "kubeconfig") {
					t.Errorf("volume %+v", v)
				}
			}
			if !slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == "tenant-guest1" && m.MountPath == "/etc/tether/tenants/guest1"
			}) {
				t.Errorf("mounts %+v", pod.Containers[0].VolumeMounts)
			}
			if g := grantsOf(t, objs, "Role", "tenant-b", name+"-policyreports"); !slices.Contains(g, "wgpolicyk8s.io/policyreports:create") ||
				!slices.Contains(g, "openreports.io/reports:create") ||
				slices.Contains(g, "wgpolicyk8s.io/clusterpolicyreports:create") || slices.Contains(g, "openreports.io/clusterreports:create") {
				t.Errorf("policy reports Role in tenant-b grants %v", g)
			}
			if args := argsOf(t, objs); !slices.Contains(args, "--policy-reports") || !slices.Contains(args, "--report-api=openreports.io/v1alpha1") {
				t.Errorf("args %v lack --policy-reports --report-api=openreports.io/v1alpha1", args)
			}
		},
		"metrics": func(t *testing.T, objs []*unstructured.Unstructured, cfg *config.Config) {
			sm := must(t, objs, "ServiceMonitor", namespace, name)
			if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetLabels()["release"] != "prometheus" {
				t.Errorf("ServiceMonitor %s labels %v", sm.GetAPIVersion(), sm.GetLabels())
			}
			var b rbacv1.ClusterRoleBinding
			manifest.Into(t, must(t, objs, "ClusterRoleBinding", "", "tether-metrics-reader"), &b)
			if b.Subjects[0].Name != "prometheus" || b.Subjects[0].Namespace != "monitoring" {
				t.Errorf("metrics reader binding %+v", b.Subjects)
			}
			g := grantsOf(t, objs, "ClusterRole", "", name+"-policyreports")
			if !slices.Contains(g, "wgpolicyk8s.io/clusterpolicyreports:update") || !slices.Contains(g, "wgpolicyk8s.io/policyreports:delete") {
				t.Errorf("policy reports ClusterRole grants %v", g)
			}
		},
		"flowcontrol": func(t *testing.T, objs []*unstructured.Unstructured, cfg *config.Config) {
			var pl flowcontrolv1.PriorityLevelConfiguration
			manifest.Into(t, must(t, objs, "PriorityLevelConfiguration", "", name), &pl)
			if l := pl.Spec.Limited; l == nil || *l.NominalConcurrencyShares != 5 || l.LimitResponse.Type != flowcontrolv1.LimitResponseTypeReject || l.LimitResponse.Queuing != nil {
				t.Errorf("priority level %+v", pl.Spec.Limited)
			}
			var fs, le flowcontrolv1.FlowSchema
			manifest.Into(t, must(t, objs, "FlowSchema", "", name), &fs)
			manifest.Into(t, must(t, objs, "FlowSchema", "", name+"-leader-election"), &le)
			var subjects []string
			for _, s := range fs.Spec.Rules[0].Subjects {
				switch s.Kind {
				case flowcontrolv1.SubjectKindServiceAccount:
					subjects = append(subjects, "sa:"+s.ServiceAccount.Namespace+"/"+s.ServiceAccount.Name)
				case flowcontrolv1.SubjectKindUser:
					subjects = append(subjects, "user:"+s.User.Name)
				case flowcontrolv1.SubjectKindGroup:
					subjects = append(subjects, "group:"+s.Group.Name)
				}
			}
			if want := []string{"sa:" + namespace + "/" + name, "user:alice", "group:sre", "sa:ops/tether-audit"}; !slices.Equal(subjects, want) {
				t.Errorf("flow schema subjects %v, want %v", subjects, want)
			}
			if fs.Spec.PriorityLevelConfiguration.Name != name || fs.Spec.MatchingPrecedence != 8000 ||
				le.Spec.PriorityLevelConfiguration.Name != "leader-election" || le.Spec.MatchingPrecedence != 7999 {
				t.Errorf("flow schemas: %s at %d, leader election %s at %d", fs.Spec.PriorityLevelConfiguration.Name, fs.Spec.MatchingPrecedence,
					le.Spec.PriorityLevelConfiguration.Name, le.Spec.MatchingPrecedence)
			}
		},
		"ha": func(t *testing.T, objs []*unstructured.Unstructured, cfg *config.Config) {
			pod := deployment(t, objs).Spec.Template.Spec
			if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil || len(pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
				len(pod.Tolerations) != 1 || pod.NodeSelector["node-role.kubernetes.io/control-plane"] != "" {
				t.Errorf("scheduling %+v %+v %+v", pod.Affinity, pod.Tolerations, pod.NodeSelector)
			}
			if a := argsOf(t, objs); a[len(a)-1] != "--allow-second-controller=false" {
				t.Errorf("extraArgs not appended: %v", a)
			}
		},
	}
	for _, f := range ciFiles(t) {
		t.Run(f, func(t *testing.T) {
			check, ok := cases[f]
			if !ok {
				t.Fatalf("ci/%s-values.yaml has no case in TestRender", f)
			}
			objs := render(t, values(t, f))
			cfg := controllerConfig(t, objs)
			if err := cfg.Validate(); err != nil {
				t.Errorf("the controller refuses the rendered configuration: %v", err)
			}
			d := deployment(t, objs)
			if ann := d.Spec.Template.Annotations["checksum/config"]; len(ann) != 64 {
				t.Errorf("checksum/config annotation %q", ann)
			}
			check(t, objs, cfg)
		})
	}
}
