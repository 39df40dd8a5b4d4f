// Package e2e drives the built tether binary, as kubectl's plugin and on its
// own, against the real local control plane and KubeVirt emulator.
package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/cmdtest"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

var binDir string

func TestMain(m *testing.M) {
	// Build the binary once for the package, as a user would install it.
	dir, err := cmdtest.Build()
	if err != nil {
		panic(err)
	}
	binDir = dir
	defer os.RemoveAll(dir)
	testenv.Main(m, testenv.Options{Tenants: []string{"guest"}})
}

// tether runs `name args...` with the built binaries first on PATH.
func tether(t *testing.T, env *testenv.Env, name string, args ...string) cmdtest.Result {
	t.Helper()
	return cmdtest.Run(t, binDir, env.Infra.Kubeconfig, 2*time.Minute, name, args...)
}

// seed makes a VMI-only hot-plug that the tenant does not attach (an orphan
// with tenant evidence), and a volume the VM spec wants.
func seed(t *testing.T, env *testenv.Env) (ns, tenantKubeconfig string) {
	ctx := context.Background()
	ns = env.Namespace(t)
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Emulator.SetFeatureGates(ctx, "HotplugVolumes"); err != nil {
		t.Fatal(err)
	}
	vm := fixture.VM("node-x", fixture.Running(), fixture.InNamespace(ns))
	vm.UID = ""
	for _, o := range []client.Object{vm, fixture.PVC("pvc-orphan", fixture.InNamespace(ns)), fixture.PVC("pvc-kept", fixture.InNamespace(ns))} {
		o.SetUID("")
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := virtapi.NewSubresourceClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "VMI running", func() (bool, error) {
		var vmi kubevirtv1.VirtualMachineInstance
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "node-x"}, &vmi)
		return err == nil && vmi.Status.Phase == kubevirtv1.Running, err
	})
	for kind, vol := range map[virtapi.Kind]string{virtapi.VMI: "pvc-orphan", virtapi.VM: "pvc-kept"} {
		if err := virtapi.AddVolume(ctx, sub, kind, ns, "node-x", fixture.AddVolumeOptions(vol)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 20*time.Second, "both hot-plugs ready", func() (bool, error) {
		var vmi kubevirtv1.VirtualMachineInstance
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "node-x"}, &vmi); err != nil {
			return false, err
		}
		n := 0
		for _, vs := range vmi.Status.VolumeStatus {
			if vs.HotplugVolume != nil && vs.Phase == kubevirtv1.VolumeReady {
				n++
			}
		}
		return n == 2, nil
	})
	// The tenant's node for the VM (named otherwise, tied by providerID),
	// its CSI driver and its two volumes: tenant evidence concerns them.
	tc, err := clients.New(env.Tenants["guest"].Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{fixture.TenantNodeObject("worker-"+ns, ns, "node-x"), fixture.CSIDriver("csi.kubevirt.io", true),
		fixture.PV("tpv-orphan-"+ns, "pvc-orphan"), fixture.PV("tpv-kept-"+ns, "pvc-kept")} {
		o.SetUID("")
		if err := tc.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if _, shared := o.(*storagev1.CSIDriver); !shared {
			// One tenant cluster serves one infra namespace: the next
			// test's namespace must not see this one's node.
			t.Cleanup(func() { _ = tc.Delete(context.Background(), o) })
		}
	}
	return ns, env.Tenants["guest"].Kubeconfig
}

type report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Findings   []struct {
		ID        string   `json:"id"`
		Check     string   `json:"check"`
		Namespace string   `json:"namespace"`
		Volume    string   `json:"volume"`
		Evidence  []string `json:"evidence"`
		Object    struct {
			Kind, Name, UID string
		} `json:"object"`
		Action struct {
			Type      string `json:"type"`
			Safe      bool   `json:"safe"`
			BlockedBy string `json:"blockedBy"`
		} `json:"action"`
	} `json:"findings"`
}

func TestKubectlPlugin_auditJSON_planThenApply(t *testing.T) {
	env := testenv.Get(t)
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed")
	}
	ns, tenantKC := seed(t, env)
	scope := []string{"-n", ns, "--tenant", "guest=" + tenantKC + ":" + ns}

	r := tether(t, env, "kubectl", append([]string{"tether", "audit", "-o", "json"}, scope...)...)
	if r.Code != 1 {
		t.Fatalf("audit with findings: want exit 1, got %d\nstdout:%s\nstderr:%s", r.Code, r.Stdout, r.Stderr)
	}
	var rep report
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("audit -o json is not JSON: %v\n%s", err, r.Stdout)
	}
	if rep.APIVersion != "tether.dev/v1alpha1" || rep.Kind != "AuditReport" || len(rep.Findings) != 1 {
		t.Fatalf("want one finding in a tether.dev/v1alpha1 AuditReport, got %+v", rep)
	}
	f := rep.Findings[0]
	if f.Check != "OrphanHotplugVolume" || f.Namespace != ns || f.Object.Kind != "VirtualMachineInstance" ||
		f.Object.Name != "node-x" || f.Object.UID == "" || f.Volume != "pvc-orphan" ||
		f.Action.Type != "VMIRemoveVolume" || !f.Action.Safe || len(f.Evidence) == 0 {
		t.Fatalf("unexpected finding %+v", f)
	}

	// fix without --apply is a plan: exit 0, nothing changes.
	r = tether(t, env, "tether", append([]string{"fix"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "would apply") || !strings.Contains(r.Stdout, "nothing changed") {
		t.Fatalf("fix (plan): code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := tether(t, env, "tether", append([]string{"audit", "-o", "json"}, scope...)...); !strings.Contains(r.Stdout, "pvc-orphan") {
		t.Fatal("the plan changed the cluster")
	}

	r = tether(t, env, "tether", append([]string{"fix", "--apply"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply: code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = tether(t, env, "tether", append([]string{"audit"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "No findings") {
		t.Fatalf("audit after fix: code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// The wanted volume is still there.
	out, err := env.Kubectl(t, "get", "vmi", "-n", ns, "node-x", "-o", "jsonpath={.status.volumeStatus[*].name}")
	if err != nil || !strings.Contains(out, "pvc-kept") || strings.Contains(out, "pvc-orphan") {
		t.Fatalf("volumes after fix: %q (%v)", out, err)
	}
	// An Event records the action on the VMI.
	out, err = env.Kubectl(t, "get", "events", "-n", ns, "--field-selector", "reason=TetherOrphanDetached", "-o", "name")
	if err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("no TetherOrphanDetached event: %q (%v)", out, err)
	}
}

func TestFix_maxZero_plansNothing(t *testing.T) {
	env := testenv.Get(t)
	ns, tenantKC := seed(t, env)
	r := tether(t, env, "tether", "fix", "--apply", "--max", "0", "-n", ns, "--tenant", "guest="+tenantKC+":"+ns)
	if r.Code != 0 || !strings.Contains(r.Stdout, "skipped: --max 0 reached") {
		t.Fatalf("code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := tether(t, env, "tether", "audit", "-o", "json", "-n", ns, "--tenant", "guest="+tenantKC+":"+ns); !strings.Contains(r.Stdout, "pvc-orphan") {
		t.Fatal("--max 0 changed the cluster")
	}
}

func TestAudit_tenantDown_noAction(t *testing.T) {
	env := testenv.Get(t)
	ns, _ := seed(t, env)
	dead := filepath.Join(t.TempDir(), "dead.kubeconfig")
	cfg := strings.ReplaceAll(mustRead(t, env.Tenants["guest"].Kubeconfig), env.Tenants["guest"].URL, "https://127.0.0.1:1")
	if err := os.WriteFile(dead, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The anomaly guard refuses the whole batch (the tenant's evidence is
	// partial), naming why and the override; the plan shows the orphan
	// blocked anyway.
	r := tether(t, env, "tether", "fix", "--apply", "-n", ns, "--tenant", "guest="+dead+":"+ns)
	if r.Code != 2 || !strings.Contains(r.Stdout, "blocked: TenantUnreachable") || strings.Contains(r.Stdout, "Applied") ||
		!strings.Contains(r.Stderr, `anomaly guard refused the whole batch, nothing was changed: tenant "guest" could not be read`) || !strings.Contains(r.Stderr, "--override-guard") {
		t.Fatalf("code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// Overridden, the run goes on, says so, and still acts on nothing the
	// tenant's silence leaves unproven.
	r = tether(t, env, "tether", "fix", "--apply", "--override-guard", "-n", ns, "--tenant", "guest="+dead+":"+ns)
	if r.Code != 0 || !strings.Contains(r.Stdout, "blocked: TenantUnreachable") || strings.Contains(r.Stdout, "Applied") || !strings.Contains(r.Stderr, "anomaly guard overridden (--override-guard)") {
		t.Fatalf("override: code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// A tenant node that cannot be tied to an infra VM (no providerID, no
// annotations, no CSINode node ID) may be the VM: the audit names it, the
// orphan is blocked TenantNodeUnmapped, and fix --apply changes nothing.
func TestFix_unmappedTenantNode_noAction(t *testing.T) {
	env := testenv.Get(t)
	ns, tenantKC := seed(t, env)
	tc, err := clients.New(env.Tenants["guest"].Config)
	if err != nil {
		t.Fatal(err)
	}
	bare := fixture.TenantNodeObject("bare-"+ns, ns, "")
	bare.Spec.ProviderID, bare.Annotations = "", nil
	bare.UID = ""
	if err := tc.Create(context.Background(), bare); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.Delete(context.Background(), bare) })
	scope := []string{"-n", ns, "--tenant", "guest=" + tenantKC + ":" + ns}
	r := tether(t, env, "tether", append([]string{"audit", "-o", "json"}, scope...)...)
	var rep struct {
		Tenants []struct {
			UnmappedNodes []string `json:"unmappedNodes"`
		} `json:"tenants"`
		Findings []struct {
			Check  string `json:"check"`
			Volume string `json:"volume"`
			Action struct {
				Safe      bool   `json:"safe"`
				BlockedBy string `json:"blockedBy"`
			} `json:"action"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("%v\n%s%s", err, r.Stdout, r.Stderr)
	}
	if len(rep.Tenants) != 1 || len(rep.Tenants[0].UnmappedNodes) != 1 || !strings.Contains(rep.Tenants[0].UnmappedNodes[0], "bare-"+ns) {
		t.Fatalf("the unmapped node is not reported: %+v", rep.Tenants)
	}
	found := false
	for _, f := range rep.Findings {
		if f.Volume == "pvc-orphan" && f.Check == "OrphanHotplugVolume" {
			found = true
			if f.Action.Safe || f.Action.BlockedBy != "TenantNodeUnmapped" {
				t.Fatalf("pvc-orphan: %+v, want blocked TenantNodeUnmapped", f.Action)
			}
		}
	}
	if !found {
		t.Fatalf("no finding for pvc-orphan:\n%s", r.Stdout)
	}
	r = tether(t, env, "tether", append([]string{"fix", "--apply"}, scope...)...)
	if strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("acted although a tenant node is unmapped:\n%s%s", r.Stdout, r.Stderr)
	}
	r = tether(t, env, "tether", append([]string{"audit"}, scope...)...)
	if !strings.Contains(r.Stdout, "cannot be tied to an infra VM") {
		t.Fatalf("the table does not warn about the node:\n%s", r.Stdout)
	}
}

func TestBadInput_clearErrors(t *testing.T) {
	env := testenv.Get(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "--checks", "NoSuchCheck"}, `unknown check "NoSuchCheck"`},
		{[]string{"audit", "-l", "a in (b"}, "not a valid label selector"},
		{[]string{"audit", "--kubeconfig", "/nonexistent/kubeconfig"}, "cannot be read"},
		{[]string{"audit", "-o", "xml"}, "use table, json, yaml, policyreport, dot"},
		{[]string{"fix", "-o", "dot"}, "use table, json, yaml\n"}, // the pictures and reports are the audit's
		{[]string{"audit", "-n", "a", "-A"}, "exclude each other"},
		{[]string{"audit", "-A", "--tenant", "g=" + env.Tenants["guest"].Kubeconfig}, "name the infra namespace of its VMs"},
		{[]string{"audit", "-n", "a", "--tenant", "g=" + env.Tenants["guest"].Kubeconfig + ":a", "--tenant-driver", "Not_A_Driver"}, "is not a CSI driver name"},
		{[]string{"audit", "--tenant", "guest"}, "NAME=KUBECONFIG[:NAMESPACE]"},
		{[]string{"fix", "--check", "Nope"}, `unknown check "Nope"`},
		{[]string{"fix", "--max", "-1"}, "--max must be 0 or more"},
		{[]string{"audit", "--fence-gone-nodes-after", "-1s"}, "fence gone nodes after must not be negative"},
		{[]string{"audit", "--fence-gone-nodes-after", "10s"}, "fence gone nodes after 10s is too short: use at least 1m0s"},
		{[]string{"audit", "--blocked-deletion-grace", "-5m"}, "blocked deletion grace must not be negative"},
		{[]string{"audit", "--fence-gone-nodes-after", "5m", "--controller-namespace", "Bad_NS"}, `--controller-namespace "Bad_NS" is not a namespace name`},
	} {
		r := tether(t, env, "tether", c.args...)
		if r.Code != 2 || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%v: want exit 2 and %q, got %d\nstderr: %s", c.args, c.want, r.Code, r.Stderr)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A namespaced user may not list Nodes: the audit still runs and says which
// checks saw nothing, instead of silently reporting a clean storage view.
func TestAudit_namespacedUser_warnsAboutStorageView(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	if out, err := env.Kubectl(t, "create", "rolebinding", "alice-admin", "-n", ns, "--clusterrole=cluster-admin", "--user=alice"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	cfg, err := env.Infra.UserConfig("alice")
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "alice.kubeconfig")
	if err := env.Infra.WriteKubeconfig(cfg, kc); err != nil {
		t.Fatal(err)
	}
	r := tether(t, env, "tether", "audit", "--kubeconfig", kc, "-n", ns)
	if r.Code != 0 || !strings.Contains(r.Stdout, "warning: cannot list Nodes (forbidden)") {
		t.Fatalf("code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = tether(t, env, "tether", "audit", "--kubeconfig", kc, "-n", ns, "-o", "json")
	if !strings.Contains(r.Stdout, `"warnings"`) {
		t.Fatalf("JSON report lacks warnings:\n%s", r.Stdout)
	}
}

// fix --apply --plan acts only on the reviewed plan's findings that still
// match the cluster: a plan whose finding names another object (as if the
// VMI had been replaced since the review) changes nothing and reports
// changed-since-plan; the plan as reviewed is applied.
func TestFix_applyReviewedPlan(t *testing.T) {
	env := testenv.Get(t)
	ns, tenantKC := seed(t, env)
	scope := []string{"-n", ns, "--tenant", "guest=" + tenantKC + ":" + ns}
	r := tether(t, env, "tether", append([]string{"fix", "-o", "json"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, `"planned": true`) {
		t.Fatalf("fix -o json: code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	dir := t.TempDir()
	reviewed := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(reviewed, []byte(r.Stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	var p struct {
		Items []struct {
			Finding struct {
				Object struct{ UID string } `json:"object"`
			} `json:"finding"`
			Planned bool `json:"planned"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &p); err != nil || len(p.Items) == 0 {
		t.Fatalf("plan: %v\n%s", err, r.Stdout)
	}
	stale := filepath.Join(dir, "stale.json")
	other := strings.ReplaceAll(r.Stdout, p.Items[0].Finding.Object.UID, "00000000-0000-0000-0000-000000000000")
	if err := os.WriteFile(stale, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}

	r = tether(t, env, "tether", append([]string{"fix", "--apply", "--plan", stale}, scope...)...)
	if r.Code != 1 || !strings.Contains(r.Stdout, "changed-since-plan") || strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply --plan (stale): code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := tether(t, env, "tether", append([]string{"audit", "-o", "json"}, scope...)...); !strings.Contains(r.Stdout, "pvc-orphan") {
		t.Fatal("a plan that no longer matched changed the cluster")
	}

	r = tether(t, env, "tether", append([]string{"fix", "--apply", "--plan", reviewed}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") || strings.Contains(r.Stderr, "without --plan") {
		t.Fatalf("fix --apply --plan (reviewed): code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = tether(t, env, "tether", append([]string{"fix", "--apply", "--plan", filepath.Join(dir, "missing.json")}, scope...)...)
	if r.Code != 2 || !strings.Contains(r.Stderr, "tether fix -o json") {
		t.Fatalf("fix --apply --plan (missing file): code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// fix --apply shares the controller's blast-radius limit where it shares its
// namespace: while the breaker is tripped it changes nothing and says how to
// reset it; `tether controller reset-breaker` resets it; fix then says what
// its action does to the controller's window (from the limit the controller
// publishes), acts, and records its action there, where the controller
// counts it; filling the window does not trip the breaker.
func TestFix_honoursTheControllersBreaker(t *testing.T) {
	env := testenv.Get(t)
	env.InstallController(t)
	ns, tenantKC := seed(t, env)
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := findingrecord.TripBreaker(ctx, c, ns, time.Now(), "more than 5 actions within 10m0s"); err != nil {
		t.Fatal(err)
	}
	scope := []string{"-n", ns, "--tenant", "guest=" + tenantKC + ":" + ns, "--controller-namespace", ns}
	r := tether(t, env, "tether", append([]string{"fix", "--apply"}, scope...)...)
	if r.Code != 2 || !strings.Contains(r.Stderr, "tether controller reset-breaker -n "+ns) || strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply with a tripped breaker: code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := tether(t, env, "tether", append([]string{"audit", "-o", "json"}, scope...)...); !strings.Contains(r.Stdout, "pvc-orphan") {
		t.Fatal("fix acted although the breaker was tripped")
	}
	r = tether(t, env, "tether", "controller", "reset-breaker", "-n", ns)
	if r.Code != 0 || !strings.Contains(r.Stdout, "reset") {
		t.Fatalf("reset-breaker: code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := tether(t, env, "tether", "controller", "reset-breaker", "-n", ns); r.Code != 0 || !strings.Contains(r.Stdout, "not tripped") {
		t.Fatalf("reset-breaker again: code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// The controller publishes its limit beside its breaker: fix says, in
	// its dry run and before it acts, what it does to the window.
	if err := findingrecord.PublishLimits(ctx, c, ns, findingrecord.Limits{Max: 1, Interval: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	r = tether(t, env, "tether", append([]string{"fix"}, scope...)...)
	if want := "allows 1 actions per 10m0s; its window holds 0 now"; !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "fill it (1 of 1)") {
		t.Fatalf("fix (dry run) does not say what --apply does to the controller's window (%q):\n%s", want, r.Stderr)
	}
	r = tether(t, env, "tether", append([]string{"fix", "--apply"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") || !strings.Contains(r.Stderr, "never trip its breaker") {
		t.Fatalf("fix --apply after the reset: code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if br, err := findingrecord.Breaker(ctx, c, ns); err != nil || br.Tripped {
		t.Fatalf("fix's action filled the window and tripped the breaker: %+v %v", br, err)
	}
	var recs v1alpha1.FindingList
	if err := c.List(ctx, &recs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCheck: findingrecord.FixCheck}); err != nil {
		t.Fatal(err)
	}
	if len(recs.Items) != 1 || recs.Items[0].Status.Reason != "Applied" || recs.Items[0].Status.LastAttempt == nil {
		t.Fatalf("want one record of fix's action for the controller's window, got %+v", recs.Items)
	}
}

// --object narrows fix to one object, named NAMESPACE/NAME or, where only
// one namespace has it, NAME; an object the survey did not read is an
// error that names what was read, not an empty plan that reads as "no
// drift about it", and nothing is changed.
func TestFix_objectMustNameSomethingRead(t *testing.T) {
	env := testenv.Get(t)
	ns, tenantKC := seed(t, env)
	tenant := "guest=" + tenantKC + ":" + ns
	for _, object := range []string{ns + "/node-x", "node-x"} {
		r := tether(t, env, "tether", "fix", "-n", ns, "--tenant", tenant, "--object", object)
		if r.Code != 0 || !strings.Contains(r.Stdout, "pvc-orphan") {
			t.Fatalf("--object %s: code %d\n%s%s", object, r.Code, r.Stdout, r.Stderr)
		}
	}
	for object, want := range map[string]string{
		ns + "/no-such-vm": `--object "` + ns + `/no-such-vm": nothing read in namespace ` + ns + ` is named no-such-vm`,
		"no-such-vm":       `--object "no-such-vm": nothing read in every namespace is named no-such-vm`,
		ns + "/":           "names nothing",
	} {
		r := tether(t, env, "tether", "fix", "--apply", "-n", ns, "--tenant", tenant, "--object", object)
		if r.Code != 2 || !strings.Contains(r.Stderr, want) || strings.Contains(r.Stdout, "Applied") {
			t.Fatalf("--object %s: code %d, want 2 and %q\n%s%s", object, r.Code, want, r.Stdout, r.Stderr)
		}
	}
	if r := tether(t, env, "tether", "audit", "-o", "json", "-n", ns, "--tenant", tenant); !strings.Contains(r.Stdout, "pvc-orphan") {
		t.Fatal("a refused --object changed the cluster")
	}
}
