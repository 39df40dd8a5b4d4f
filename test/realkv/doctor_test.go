package realkv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/crdinstall"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/cmdtest"
	"github.com/tether-dev/tether/internal/testing/controlplane"
	"github.com/tether-dev/tether/internal/testing/realkubevirt"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// doctorLine is a line of `tether doctor -o json`.
type doctorLine struct {
	Check, Subject, Status, Why, Fix, Source string
}

// gateSet is one configuration of the KubeVirt CR's hot-plug gates, and
// what real virt-api must answer under it, by KubeVirt's rules
// (pkg/virt-api/rest/volumes.go, identical in v1.7.0 and v1.9.0: every
// volume call needs HotplugVolumes or DeclarativeHotplugVolumes, a
// VMI-level call on a VM-owned VMI needs HotplugVolumes;
// pkg/virt-config/featuregate: in v1.9.0 DeclarativeHotplugVolumes is Beta,
// on unless disabled, in v1.7.0 Alpha, on only when listed).
type gateSet struct {
	name               string
	enabled, disabled  []string
	wantVM, wantOwned  string // the route line's status
	wantStandalone     string
	wantGates, wantRC  string // the gates line's status; the worst status
	ownedAnswerMessage string // a phrase of the VMI-level line for the VM-owned VMI
}

// gateSets are the four gate sets for a release: v19 says whether
// DeclarativeHotplugVolumes is Beta there.
func gateSets(v19 bool) []gateSet {
	declListed := []string{"DeclarativeHotplugVolumes"}
	var noDecl []string
	if v19 {
		// Beta: on unless disabled.
		noDecl = []string{"DeclarativeHotplugVolumes"}
	}
	hpGates := "OK"
	if v19 {
		hpGates = "WARN" // deprecated since v1.9.0
	}
	return []gateSet{
		{name: "HotplugVolumes only", enabled: []string{"HotplugVolumes"}, disabled: noDecl,
			wantVM: "OK", wantOwned: "OK", wantStandalone: "OK", wantGates: hpGates, ownedAnswerMessage: "does not exist"},
		{name: "DeclarativeHotplugVolumes only", enabled: declListed,
			wantVM: "OK", wantOwned: "WARN", wantStandalone: "OK", wantGates: "OK", ownedAnswerMessage: "is owned by a VM"},
		{name: "both", enabled: []string{"HotplugVolumes", "DeclarativeHotplugVolumes"},
			wantVM: "OK", wantOwned: "OK", wantStandalone: "OK", wantGates: hpGates, ownedAnswerMessage: "does not exist"},
		{name: "none", disabled: noDecl,
			wantVM: "FAIL", wantOwned: "FAIL", wantStandalone: "FAIL", wantGates: "FAIL", ownedAnswerMessage: "feature gate to use this API"},
	}
}

// setGates sets the KubeVirt CR's gate lists (real virt-api and
// virt-controller read them from its informer) and restores what was
// there when the test ends.
func setGates(t *testing.T, c client.Client, enabled, disabled []string) {
	t.Helper()
	kv := &unstructured.Unstructured{}
	kv.SetAPIVersion("kubevirt.io/v1")
	kv.SetKind("KubeVirt")
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: realkubevirt.Namespace, Name: "kubevirt"}, kv); err != nil {
		t.Fatal(err)
	}
	orig, _, _ := unstructured.NestedFieldCopy(kv.Object, "spec", "configuration", "developerConfiguration")
	patch := func(dev any) {
		p, err := json.Marshal(map[string]any{"spec": map[string]any{"configuration": map[string]any{"developerConfiguration": dev}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Patch(context.Background(), kv, client.RawPatch(types.MergePatchType, p)); err != nil {
			t.Fatal(err)
		}
	}
	orEmpty := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	patch(map[string]any{"featureGates": orEmpty(enabled), "disabledFeatureGates": orEmpty(disabled)})
	t.Cleanup(func() {
		// A merge patch replaces the lists: null removes them.
		restore := map[string]any{"featureGates": nil, "disabledFeatureGates": nil}
		if m, ok := orig.(map[string]any); ok {
			for _, k := range []string{"featureGates", "disabledFeatureGates"} {
				if v, ok := m[k]; ok {
					restore[k] = v
				}
			}
		}
		patch(restore)
	})
}

// doctor runs `tether doctor -o json` and returns its exit code and lines.
func doctor(t *testing.T, env *testenv.Env, args ...string) (int, []doctorLine) {
	t.Helper()
	r := tether(t, env, append([]string{"doctor", "-o", "json"}, args...)...)
	var lines []doctorLine
	if err := json.Unmarshal([]byte(r.Stdout), &lines); err != nil {
		t.Fatalf("doctor -o json (exit %d): %v\n%s%s", r.Code, err, r.Stdout, r.Stderr)
	}
	return r.Code, lines
}

func lineOf(lines []doctorLine, check, subject string) (doctorLine, bool) {
	for _, l := range lines {
		if l.Check == check && strings.Contains(l.Subject, subject) {
			return l, true
		}
	}
	return doctorLine{}, false
}

// checkGateSets runs doctor under each gate set against real virt-api:
// a running VM (VM-owned VMI) and a standalone VMI, the three route lines
// match virt-api's rules, the gates line says the gates, and the exit
// code is the worst line's.
func checkGateSets(t *testing.T, env *testenv.Env, sets []gateSet) *world {
	w := newWorldIn(t, env)
	w.vm("owned")
	w.standaloneVMI("alone")
	for _, gs := range sets {
		t.Run(gs.name, func(t *testing.T) {
			setGates(t, w.C, gs.enabled, gs.disabled)
			var code int
			var lines []doctorLine
			var mismatch string
			// virt-api reads the CR through its informer: wait until its
			// answers follow the new gates.
			testenv.Eventually(t, 60*time.Second, "virt-api answers by the gates "+gs.name, func() (bool, error) {
				code, lines = doctor(t, env, "-n", w.NS)
				mismatch = ""
				for _, want := range []struct{ subject, status, phrase string }{
					{"VM-level", gs.wantVM, ""},
					{"VM-owned VMI", gs.wantOwned, gs.ownedAnswerMessage},
					{"standalone VMI", gs.wantStandalone, ""},
				} {
					l, ok := lineOf(lines, "kubevirt.route", want.subject)
					if !ok || l.Status != want.status || !strings.Contains(l.Why, want.phrase) {
						mismatch += fmt.Sprintf("\n%s: want %s (%q), got %+v", want.subject, want.status, want.phrase, l)
					}
				}
				return mismatch == "", nil
			})
			if mismatch != "" {
				t.Fatal(mismatch)
			}
			g, _ := lineOf(lines, "kubevirt.gates", "")
			if g.Status != gs.wantGates {
				t.Errorf("gates line: want %s, got %+v", gs.wantGates, g)
			}
			worst := 0
			for _, l := range lines {
				if l.Source == "" || (l.Status != "OK" && l.Fix == "") {
					t.Errorf("a line without its source or fix: %+v", l)
				}
				worst = max(worst, map[string]int{"OK": 0, "WARN": 1, "FAIL": 2}[l.Status])
			}
			if code != worst {
				t.Errorf("exit code %d, want %d (the worst line)", code, worst)
			}
		})
	}
	return w
}

// Real KubeVirt v1.9.0, the shared world: each gate set.
func TestRealDoctor_v19_gateSets(t *testing.T) {
	checkGateSets(t, testenv.Get(t), gateSets(true))
}

// Real KubeVirt v1.7.0, a world of its own: each gate set; then, with
// both gates listed, a kube-controller-manager that does not force-detach
// on a timer: every line OK, exit 0.
func TestRealDoctor_v17_gateSets(t *testing.T) {
	env := startV17(t)
	w := checkGateSets(t, env, gateSets(false))
	t.Run("well configured", func(t *testing.T) { wellConfigured(t, env, w) })
	t.Run("under HCO", func(t *testing.T) { underHCO(t, env, w) })
}

// underHCO: a HyperConverged object (its CRD only: HCO itself does not run
// here) makes doctor foresee HCO's next upgrade, which lists only
// DeclarativeHotplugVolumes (hyperconverged-cluster-operator#4381): on
// v1.7 with HotplugVolumes listed, after KubeVirt v1.9 and that HCO the
// VMI-level route for VM-owned VMIs closes and virt-controller starts
// removing VMI-only hot-plugs (KubeVirt's v1.9 gate rules).
func underHCO(t *testing.T, env *testenv.Env, w *world) {
	setGates(t, w.C, []string{"HotplugVolumes"}, nil)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "hyperconvergeds.hco.kubevirt.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "hco.kubevirt.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "hyperconvergeds", Singular: "hyperconverged", Kind: "HyperConverged", ListKind: "HyperConvergedList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := crdinstall.Install(context.Background(), env.Config, crd); err != nil {
		t.Fatal(err)
	}
	hc := &unstructured.Unstructured{}
	hc.SetAPIVersion("hco.kubevirt.io/v1beta1")
	hc.SetKind("HyperConverged")
	hc.SetNamespace(w.NS)
	hc.SetName("kubevirt-hyperconverged")
	if err := w.C.Create(context.Background(), hc); err != nil {
		t.Fatal(err)
	}
	var l doctorLine
	testenv.Eventually(t, 30*time.Second, "doctor sees HCO", func() (bool, error) {
		_, lines := doctor(t, env, "-n", w.NS)
		l, _ = lineOf(lines, "kubevirt.upgrade", "")
		return strings.Contains(l.Why, "HCO "+w.NS+"/kubevirt-hyperconverged"), nil
	})
	for _, phrase := range []string{"KubeVirt v1.9.0 and HCO", "the VMI-level route for VM-owned VMIs closes", "starts removing hot-plugs"} {
		if l.Status != "WARN" || !strings.Contains(l.Why, phrase) {
			t.Errorf("upgrade line: want WARN saying %q, got %+v", phrase, l)
		}
	}
}

// A tenant whose driver hot-plugs one volume through the VM and one
// through the VMI of a VM-owned VMI (HotplugVolumes listed): doctor reads
// the tenant, ties its node to the VM and says the driver uses the
// VMI-level route, which HotplugVolumes alone keeps open (WARN).
func TestRealDoctor_tenantDriverRoute(t *testing.T) {
	env := testenv.Get(t)
	w := newWorld(t)
	setGates(t, w.C, []string{"HotplugVolumes"}, []string{"DeclarativeHotplugVolumes"})
	w.claims("pvc-vm", "pvc-vmi")
	w.vm("node-a")
	scope := tenant(t, env, w.NS, "node-a", "pvc-vm", "pvc-vmi")
	testenv.Eventually(t, 60*time.Second, "virt-api serves the VMI route for VM-owned VMIs", func() (bool, error) {
		_, lines := doctor(t, env, "-n", w.NS)
		l, _ := lineOf(lines, "kubevirt.route", "VM-owned VMI")
		return l.Status == "OK", nil
	})
	w.hotplug(virtapi.VM, "node-a", "pvc-vm")
	w.hotplug(virtapi.VMI, "node-a", "pvc-vmi")
	// The driver's controller, as it runs in the infra namespace.
	labels := map[string]string{"app": "kubevirt-csi-driver"}
	ctrl := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-csi-controller", Namespace: w.NS},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "csi-driver", Image: "quay.io/kubevirt/kubevirt-csi-driver:v0.4.2"}}}}},
	}
	if err := w.C.Create(context.Background(), ctrl); err != nil {
		t.Fatal(err)
	}

	code, lines := doctor(t, env, scope...)
	for _, c := range []struct{ check, status, phrase string }{
		{"tenant.access", "OK", ""},
		{"tenant.nodes", "OK", "all 1 Nodes"},
		{"tenant.csidriver", "OK", "csi.kubevirt.io"},
		{"tenant.driver-route", "WARN", "volume pvc-vmi of VMI " + w.NS + "/node-a"},
		{"tenant.driver-route", "WARN", "controller v0.4.2 (Deployment " + w.NS + "/kubevirt-csi-controller)"},
	} {
		l, ok := lineOf(lines, c.check, "tenant guest")
		if !ok || l.Status != c.status || !strings.Contains(l.Why, c.phrase) {
			t.Errorf("%s: want %s saying %q, got %+v", c.check, c.status, c.phrase, l)
		}
	}
	if code < 1 {
		t.Errorf("exit code %d with a WARN line", code)
	}
}

// wellConfigured: with everything the repairs depend on in place — both
// hot-plug gates listed on KubeVirt v1.7 (an upgrade to v1.9 keeps every
// route: HotplugVolumes stays listed), and a kube-controller-manager pod
// (as kubeadm runs it, in kube-system) whose flags switch the 6-minute
// force detach off — doctor prints only OK lines and exits 0; the same pod
// without the flag makes it exit 1.
func wellConfigured(t *testing.T, env *testenv.Env, w *world) {
	setGates(t, w.C, []string{"HotplugVolumes", "DeclarativeHotplugVolumes"}, nil)
	kcm := func(args ...string) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager-doctor", Namespace: metav1.NamespaceSystem, Labels: map[string]string{"component": "kube-controller-manager"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-controller-manager", Image: "registry.k8s.io/kube-controller-manager:v1.36.3",
				Command: append([]string{"kube-controller-manager"}, args...)}}},
		}
		if err := w.C.Create(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.C.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	}
	kcm("--disable-force-detach-on-timeout=true", "--leader-elect=false")

	var r cmdtest.Result
	testenv.Eventually(t, 60*time.Second, "doctor exits 0", func() (bool, error) {
		r = tether(t, env, "doctor", "-n", w.NS)
		return r.Code == 0, nil
	})
	if r.Code != 0 {
		t.Fatalf("exit %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	body, summary, _ := strings.Cut(r.Stdout, "\n\n")
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, "OK    ") {
			t.Errorf("a line that is not OK: %q", l)
		}
	}
	if !strings.Contains(summary, "0 WARN, 0 FAIL") || len(strings.Split(body, "\n")) < 7 {
		t.Errorf("want at least 7 OK lines and no other, got:\n%s", r.Stdout)
	}

	if err := w.C.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager-doctor", Namespace: metav1.NamespaceSystem}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the pod gone", func() (bool, error) {
		var p corev1.Pod
		err := w.C.Get(context.Background(), client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "kube-controller-manager-doctor"}, &p)
		return apierrors.IsNotFound(err), nil
	})
	kcm("--leader-elect=false")
	code, lines := doctor(t, env, "-n", w.NS)
	if l, _ := lineOf(lines, "kube.force-detach", ""); code != 1 || l.Status != "WARN" {
		t.Errorf("without the flag: want exit 1 and a WARN force-detach line, got %d, %+v", code, l)
	}
}

// doctor --controller-config asks the API server's RBAC (SubjectAccessReview)
// whether the controller's account holds what that configuration enables:
// nothing bound, the account lacks the base grants (FAIL naming
// config/rbac); with config/rbac bound, protection still lacks its
// overlay (FAIL naming config/rbac/protection); with the overlay, OK.
func TestRealDoctor_controllerRBAC(t *testing.T) {
	env := testenv.Get(t)
	w := newWorld(t)
	cfgFile := filepath.Join(t.TempDir(), "controller.yaml")
	cfg := "apiVersion: tether.dev/v1alpha1\nkind: ControllerConfig\nchecks:\n  OrphanHotplugVolume:\n    enabled: true\nscope:\n  namespaces: [" + w.NS + "]\nprotection:\n  enabled: true\n"
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	rbacLine := func() doctorLine {
		t.Helper()
		_, lines := doctor(t, env, "-n", w.NS, "--controller-config", cfgFile)
		l, ok := lineOf(lines, "controller.rbac", "system:serviceaccount:tether-system:tether-controller")
		if !ok {
			t.Fatalf("no controller.rbac line in %+v", lines)
		}
		return l
	}
	if l := rbacLine(); l.Status != "FAIL" || !strings.Contains(l.Fix, "config/rbac") || !strings.Contains(l.Why, "protection") {
		t.Errorf("nothing bound: want FAIL naming config/rbac, got %+v", l)
	}
	env.InstallController(t)
	var l doctorLine
	testenv.Eventually(t, 30*time.Second, "only protection's grants missing", func() (bool, error) {
		l = rbacLine()
		return l.Status == "FAIL" && !strings.Contains(l.Why, "records"), nil
	})
	if !strings.Contains(l.Fix, "config/rbac/protection") || !strings.Contains(l.Why, "patch persistentvolumeclaims in namespace "+w.NS) {
		t.Errorf("with config/rbac: want protection's overlay named, got %+v", l)
	}
	env.InstallController(t, "rbac/protection")
	testenv.Eventually(t, 30*time.Second, "nothing missing", func() (bool, error) {
		l = rbacLine()
		return l.Status == "OK", nil
	})

	// Without --controller-config: the controller's Deployment (labelled
	// as config/manager and the chart label it) names its account and
	// ConfigMap. A configuration that lets StaleVolumeAttachment act needs
	// the opt-in storage-remediation grants, which are not bound: WARN.
	acting := "apiVersion: tether.dev/v1alpha1\nkind: ControllerConfig\ndryRun: false\nchecks:\n  StaleVolumeAttachment:\n    enabled: true\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "doctor-controller-config", Namespace: "tether-system"}, Data: map[string]string{"config.yaml": acting}}
	labels := map[string]string{"app.kubernetes.io/name": "tether", "app.kubernetes.io/component": "controller"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "doctor-controller", Namespace: "tether-system", Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				ServiceAccountName: "tether-controller",
				Containers:         []corev1.Container{{Name: "controller", Image: "ghcr.io/tether-dev/tether:latest", Args: []string{"controller", "--config=/etc/tether/config.yaml"}}},
				Volumes:            []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}}},
			}}},
	}
	for _, o := range []client.Object{cm, dep} {
		if err := w.C.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.C.Delete(context.Background(), o) })
	}
	_, lines := doctor(t, env, "-n", w.NS)
	l, ok := lineOf(lines, "controller.rbac", "system:serviceaccount:tether-system:tether-controller")
	if !ok || l.Status != "WARN" || !strings.Contains(l.Why, "delete pods") || !strings.Contains(l.Fix, "storage-remediation") {
		t.Errorf("the deployed controller's configuration: want WARN naming the storage-remediation overlay, got %+v", l)
	}
}

// doctor asks each tenant whether the identity of its kubeconfig may fence
// there (SelfSubjectAccessReview of config/rbac/tenant-fencer.yaml's own
// rules): an identity bound only to tenant-reader may not, which is fine
// while the controller's configuration does not fence (OK) and a WARN when
// it does; bound to tenant-fencer too, it is OK either way.
func TestRealDoctor_tenantFenceRights(t *testing.T) {
	env := testenv.Get(t)
	w := newWorld(t)
	w.vm("node-f")
	tenant(t, env, w.NS, "node-f")
	writeConfig := func(body string) string {
		f := filepath.Join(t.TempDir(), "controller.yaml")
		if err := os.WriteFile(f, []byte("apiVersion: tether.dev/v1alpha1\nkind: ControllerConfig\nscope:\n  namespaces: ["+w.NS+"]\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	fencing := writeConfig("dryRun: false\nchecks:\n  TenantNodeDown:\n    enabled: true\ntenants:\n- name: guest\n  kubeconfig: /etc/tether/tenants/guest\n  namespace: " + w.NS + "\n")
	reporting := writeConfig("checks:\n  OrphanHotplugVolume:\n    enabled: true\n")
	kubeconfigAs := func(user string, files ...string) string {
		f := filepath.Join(t.TempDir(), user+".kubeconfig")
		if err := controlplane.WriteKubeconfig(f, tenantIdentity(t, env, user, files...)); err != nil {
			t.Fatal(err)
		}
		return f
	}
	fenceLine := func(kubeconfig, cfg string) doctorLine {
		t.Helper()
		_, lines := doctor(t, env, "-n", w.NS, "--tenant", "guest="+kubeconfig+":"+w.NS, "--controller-config", cfg)
		l, ok := lineOf(lines, "tenant.fence", "tenant guest")
		if !ok {
			t.Fatalf("no tenant.fence line in %+v", lines)
		}
		return l
	}

	reader := kubeconfigAs("doctor-reader-"+w.NS, "tenant-reader.yaml")
	if l := fenceLine(reader, reporting); l.Status != "OK" || !strings.Contains(l.Why, "only reports") {
		t.Errorf("reader only, nothing fences: want OK saying TenantNodeDown only reports, got %+v", l)
	}
	if l := fenceLine(reader, fencing); l.Status != "WARN" || !strings.Contains(l.Why, "nodes") || !strings.Contains(l.Fix, "--fence") {
		t.Errorf("reader only, the configuration fences: want WARN naming the Node grants and the --fence fix, got %+v", l)
	}
	fencer := kubeconfigAs("doctor-fencer-"+w.NS, "tenant-reader.yaml", "tenant-fencer.yaml")
	var l doctorLine
	testenv.Eventually(t, 30*time.Second, "the fencer binding counted", func() (bool, error) {
		l = fenceLine(fencer, fencing)
		return l.Status == "OK", nil
	})
	if !strings.Contains(l.Why, "can taint") {
		t.Errorf("with the fencer role: want OK saying it can taint, got %+v", l)
	}
}
