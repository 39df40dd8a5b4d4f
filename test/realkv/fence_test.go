package realkv

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

func outOfService(n *corev1.Node) bool {
	for _, tt := range n.Spec.Taints {
		if tt.Key == snapshot.OutOfServiceTaint {
			return true
		}
	}
	return false
}

// tenantIdentity binds the ClusterRoles of config/rbac's files to user in
// the tenant and returns a config that impersonates user.
func tenantIdentity(t *testing.T, env *testenv.Env, user string, files ...string) *rest.Config {
	t.Helper()
	tc, err := clients.New(env.Tenants["guest"].Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal(data, &role); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}}
		for _, o := range []client.Object{&role, binding} {
			if err := tc.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { _ = tc.Delete(context.Background(), binding) })
	}
	cfg := rest.CopyConfig(env.Tenants["guest"].Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

// executorFor acts in w's namespace with the tenant read through cfg.
func executorFor(t *testing.T, w *world, cfg *rest.Config) *act.Executor {
	t.Helper()
	p := check.DefaultPolicy()
	p.Scope.Namespaces = []string{w.NS}
	ex, err := act.NewExecutor(w.Env.Config, p, observe.Options{Namespace: w.NS,
		Tenants: []observe.TenantSource{{Name: "guest", Namespace: w.NS, Config: cfg}}})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// A tenant node whose infra VM is stopped on real KubeVirt (the VMI goes):
// tether fences it with the out-of-service taint only once the node is
// NotReady past the grace; a plan made while the VM was down changes
// nothing once the VM runs again, and the act's live re-check refuses it;
// once the node is Ready again tether removes its own taint, and never an
// operator's.
func TestReal_tenantNodeDown_fencedThenUnfenced(t *testing.T) {
	w := newWorld(t)
	w.vm("infra")
	scope := tenant(t, w.Env, w.NS, "infra")
	tc, err := clients.New(w.Env.Tenants["guest"].Config)
	if err != nil {
		t.Fatal(err)
	}
	node := "worker-" + w.NS
	var stdout string
	fix := func(args ...string) (int, string) {
		r := tether(t, w.Env, append(append([]string{"fix"}, args...), scope...)...)
		if r.Code > 1 {
			t.Fatalf("fix %v: exit %d\n%s%s", args, r.Code, r.Stdout, r.Stderr)
		}
		stdout = r.Stdout
		return r.Code, r.Stdout + r.Stderr
	}

	// Stop the VM: virt-controller deletes its VMI.
	w.PatchVM("infra", `{"spec":{"runStrategy":"Halted"}}`)
	testenv.Eventually(t, 90*time.Second, "VMI infra gone", func() (bool, error) {
		_, err := w.vmi("infra")
		return apierrors.IsNotFound(err), nil
	})

	// The guest's kubelet still counts as Ready (harvester #9939): held.
	testenv.SetNodeReady(t, tc, node, corev1.ConditionTrue, time.Now())
	f := only(t, audit(t, w.Env, scope), check.TenantNodeDown, "")
	if f.Action.BlockedBy != string(check.TenantNodeStillReady) {
		t.Fatalf("node still Ready: want held TenantNodeStillReady, got %+v", f)
	}
	// NotReady for 10 s: within the grace.
	testenv.SetNodeReady(t, tc, node, corev1.ConditionUnknown, time.Now().Add(-10*time.Second))
	if _, out := fix("--apply"); strings.Contains(out, "Applied") || outOfService(testenv.Node(t, tc, node)) {
		t.Fatalf("fenced within the grace:\n%s", out)
	}
	// NotReady for two minutes: a plan, then the VM starts again.
	testenv.SetNodeReady(t, tc, node, corev1.ConditionUnknown, time.Now().Add(-2*time.Minute))
	code, out := fix("-o", "json")
	if code != 0 || !strings.Contains(out, `"planned": true`) {
		t.Fatalf("fix -o json with the VM down: exit %d\n%s", code, out)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	planJSON := stdout
	if err := os.WriteFile(planFile, []byte(planJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Items []struct {
			Finding drift.Finding `json:"finding"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(planJSON), &plan); err != nil || len(plan.Items) != 1 {
		t.Fatalf("plan: %v\n%s", err, planJSON)
	}
	w.PatchVM("infra", `{"spec":{"runStrategy":"Always"}}`)
	w.running("infra")
	code, out = fix("--apply", "--plan", planFile)
	if code != 1 || !strings.Contains(out, "changed-since-plan") || outOfService(testenv.Node(t, tc, node)) {
		t.Fatalf("fix --apply --plan after the VM started again: exit %d\n%s", code, out)
	}
	if res := executorFor(t, w, w.Env.Tenants["guest"].Config).Apply(context.Background(), plan.Items[0].Finding, act.Evidence{}); res.Outcome != drift.Refused || !strings.Contains(res.Message, "live re-check") || outOfService(testenv.Node(t, tc, node)) {
		t.Fatalf("act on a fence the running VMI contradicts: %+v", res)
	}

	// Down again for good: fenced.
	w.PatchVM("infra", `{"spec":{"runStrategy":"Halted"}}`)
	testenv.Eventually(t, 90*time.Second, "VMI infra gone", func() (bool, error) {
		_, err := w.vmi("infra")
		return apierrors.IsNotFound(err), nil
	})
	// Through the tenant-reader role alone the write is refused and the
	// node stays as it is.
	reader := tenantIdentity(t, w.Env, "tether-reader-"+w.NS, "tenant-reader.yaml")
	if res := executorFor(t, w, reader).Apply(context.Background(), plan.Items[0].Finding, act.Evidence{}); res.Outcome == drift.Applied ||
		!strings.Contains(res.Message, "forbidden") || outOfService(testenv.Node(t, tc, node)) {
		t.Fatalf("fencing with the reader role only: %+v", res)
	}
	t0 := time.Now()
	if _, out := fix("--apply"); !strings.Contains(out, "Applied") {
		t.Fatalf("fix --apply with the VM down and the node NotReady: \n%s", out)
	}
	n := testenv.Node(t, tc, node)
	if !outOfService(n) || !strings.Contains(n.Annotations[snapshot.FencedAnnotation], "infra VM "+w.NS+"/infra down") {
		t.Fatalf("node after fencing: taints %v, annotations %v", n.Spec.Taints, n.Annotations)
	}
	t.Logf("fix --apply fenced the node in %s", time.Since(t0).Round(time.Millisecond))
	if _, out := fix("--apply"); strings.Contains(out, "Applied") {
		t.Fatalf("a fenced node was fenced again:\n%s", out)
	}

	// Back: the VMI runs, but the node is not Ready yet: the taint stays.
	w.PatchVM("infra", `{"spec":{"runStrategy":"Always"}}`)
	w.running("infra")
	if _, out := fix("--apply"); strings.Contains(out, "Applied") || !outOfService(testenv.Node(t, tc, node)) {
		t.Fatalf("un-fenced before the node was Ready:\n%s", out)
	}
	testenv.SetNodeReady(t, tc, node, corev1.ConditionTrue, time.Now())
	// Un-fenced through the reader and fencer roles (least privilege).
	code, _ = fix("-o", "json")
	if err := json.Unmarshal([]byte(stdout), &plan); err != nil || code != 0 || len(plan.Items) != 1 || plan.Items[0].Finding.Action.Type != check.RemoveOutOfServiceTaint {
		t.Fatalf("plan with the VM back and the node Ready: %v\n%s", err, stdout)
	}
	fencer := tenantIdentity(t, w.Env, "tether-reader-"+w.NS, "tenant-reader.yaml", "tenant-fencer.yaml")
	if res := executorFor(t, w, fencer).Apply(context.Background(), plan.Items[0].Finding, act.Evidence{}); res.Outcome != drift.Applied {
		t.Fatalf("un-fencing with the reader and fencer roles: %+v", res)
	}
	if n := testenv.Node(t, tc, node); outOfService(n) || n.Annotations[snapshot.FencedAnnotation] != "" {
		t.Fatalf("node after un-fencing: taints %v, annotations %v", n.Spec.Taints, n.Annotations)
	}

	// An operator's own taint, with the VM running and the node Ready:
	// never touched.
	n = testenv.Node(t, tc, node)
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: snapshot.OutOfServiceTaint, Value: "operator", Effect: corev1.TaintEffectNoExecute})
	if err := tc.Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if _, out := fix("--apply"); strings.Contains(out, "Applied") || !outOfService(testenv.Node(t, tc, node)) {
		t.Fatalf("an operator's taint was touched:\n%s", out)
	}
	var vmi kubevirtv1.VirtualMachineInstance
	if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: "infra"}, &vmi); err != nil || vmi.Status.Phase != kubevirtv1.Running {
		t.Fatalf("the infra VMI must be left running: %v", err)
	}
}
