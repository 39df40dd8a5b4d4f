package install_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/testing/realnode"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// helmConfig is Helm's action configuration for namespace ns of the world,
// keeping releases in Secrets as the helm CLI does.
func helmConfig(t *testing.T, env *testenv.Env, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kc := env.Infra.Kubeconfig
	flags.KubeConfig, flags.Namespace = &kc, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", t.Logf); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// chartValues are what an operator sets to run tether for real on this
// world: the built image, the real node, dry run off, OrphanHotplugVolume
// on the world's namespace, one action per window (so a second orphan
// trips the breaker), protection on, and a metrics reader.
func chartValues(tag, worldNS, reader string) map[string]any {
	return map[string]any{
		"image":              map[string]any{"tag": tag},
		"nodeSelector":       map[string]any{realnode.Label: "true"},
		"dryRun":             false,
		"allowVMIOnlyDetach": true,
		"scope":              map[string]any{"namespaces": []any{worldNS}},
		"checks":             map[string]any{"OrphanHotplugVolume": map[string]any{"enabled": true, "gracePeriod": "2s"}},
		"blastRadius":        map[string]any{"maxActions": 1, "interval": "30m"},
		"backoff":            map[string]any{"base": "1s", "max": "5s"},
		"protection":         map[string]any{"enabled": true},
		"metrics":            map[string]any{"readers": []any{map[string]any{"name": reader, "namespace": worldNS}}},
	}
}

// TestHelm_installUpgradeUninstall_onARealNode: the chart installed with
// Helm's SDK runs two replicas of the built image on the real node; both
// become Ready through their probes; one holds the Lease; the metrics
// endpoint speaks HTTPS, serves a token bound to tether-metrics-reader and
// refuses others; the leader repairs one seeded orphan and its breaker
// stops the second; an upgrade to a second build (CRD first, as
// docs/operations.md says) keeps the records and the tripped breaker; the
// uninstall as documented leaves no tether finalizer behind.
func TestHelm_installUpgradeUninstall_onARealNode(t *testing.T) {
	env := get(t)
	ctx := context.Background()
	world, orphans := seededWorld(t, env, "hp-")

	v1 := buildImage(t, env, firstBuild)
	ns := env.Namespace(t)
	chrt, err := loader.Load(filepath.Join(repoRoot(), "charts", "tether"))
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(helmConfig(t, env, ns))
	install.ReleaseName, install.Namespace, install.Timeout = "tether", ns, 3*time.Minute
	t0 := time.Now()
	if _, err := install.RunWithContext(ctx, chrt, chartValues(v1.Tag, world.ns, "scraper")); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	before := checkRunning(t, env, world, ns, v1.Tag, t0, orphans)

	// Upgrade: CRD first, then the chart with a second build.
	v2 := buildImage(t, env, secondBuild)
	if out, err := env.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(repoRoot(), "charts", "tether", "crds")); err != nil {
		t.Fatalf("applying the CRD first: %v\n%s", err, out)
	}
	up := action.NewUpgrade(helmConfig(t, env, ns))
	up.Namespace, up.ReuseValues, up.Timeout = ns, true, 3*time.Minute
	if _, err := up.RunWithContext(ctx, "tether", chrt, map[string]any{"image": map[string]any{"tag": v2.Tag}}); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	checkUpgraded(t, env, world, ns, v2.Tag, before)

	// Uninstall as docs/operations.md says: helm uninstall, then release
	// the protection finalizers.
	un := action.NewUninstall(helmConfig(t, env, ns))
	un.Wait, un.Timeout = true, 2*time.Minute
	if _, err := un.Run("tether"); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	waitNoPods(t, env, ns)
	releaseFinalizers(t, env, v2)
	world.checkNoFinalizers(t)
}

// The two builds every test installs and upgrades between (the kustomize
// overlays in testdata name them too).
const (
	firstBuild  = "v0.0.0-install.1"
	secondBuild = "v0.0.0-install.2"
)

// installed is what an installation showed before its upgrade.
type installed struct {
	breaker *v1alpha1.Finding
	records map[string]v1alpha1.Finding
	held    attachment
}

// checkRunning: the Deployment in ns runs two Ready replicas of tag on the
// real node (both through their probes), one holds the Lease, the metrics
// endpoint answers as it must, and the leader repairs exactly one of the
// two orphans before the breaker (one action per window) stops it.
func checkRunning(t *testing.T, env *testenv.Env, world *world, ns, tag string, t0 time.Time, orphans [2]attachment) installed {
	t.Helper()
	pods := waitRollout(t, env, ns, "tether-controller", tag, 2)
	t.Logf("2 pods Ready %s after the install", time.Since(t0).Round(time.Millisecond))
	lead := leader(t, env, ns, pods)
	checkMetrics(t, env, pods, world.ns)
	checkPDB(t, env, ns)
	fixed, held := world.waitOneRepaired(t, orphans[0], orphans[1])
	got := installed{breaker: world.waitBreakerTripped(t, ns), records: world.records(t), held: held}
	checkNoRestarts(t, env, ns, pods)
	t.Logf("leader %s repaired %s, breaker tripped %s after the install", lead, fixed, time.Since(t0).Round(time.Millisecond))
	return got
}

// checkUpgraded: after the upgrade to tag, two Ready replicas of it run,
// one leads, the records and the tripped breaker are the same objects, the
// held orphan is still held, and protection keeps its finalizer.
func checkUpgraded(t *testing.T, env *testenv.Env, world *world, ns, tag string, before installed) {
	t.Helper()
	pods := waitRollout(t, env, ns, "tether-controller", tag, 2)
	leader(t, env, ns, pods)
	checkNoRestarts(t, env, ns, pods)
	world.checkRecordsKept(t, before.records)
	if b := world.waitBreakerTripped(t, ns); b.UID != before.breaker.UID {
		t.Errorf("the breaker record was replaced by the upgrade (uid %s, was %s)", b.UID, before.breaker.UID)
	}
	world.checkStillAttached(t, before.held)
	world.waitProtected(t, "root-vm-a")
}

// releaseFinalizers runs the uninstall's second step, `tether protect -A --release
// --apply`, with the installed build's binary.
func releaseFinalizers(t *testing.T, env *testenv.Env, img image) {
	t.Helper()
	out, err := exec.Command(img.Binary, "--kubeconfig", env.Infra.Kubeconfig, "protect", "-A", "--release", "--apply").CombinedOutput()
	if err != nil {
		t.Fatalf("tether protect -A --release --apply: %v\n%s", err, out)
	}
}

// checkNoRestarts: no container of pods restarted (a failing liveness
// probe, a crash) since they became ready.
func checkNoRestarts(t *testing.T, env *testenv.Env, ns string, pods []corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		got, err := env.Client.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got.Status.ContainerStatuses {
			if c.RestartCount != 0 {
				t.Errorf("pod %s: container %s restarted %d times: %s", p.Name, c.Name, c.RestartCount, podState(got))
			}
		}
	}
}

// checkPDB: the PodDisruptionBudget counts both replicas healthy and lets
// a drain take one of them.
func checkPDB(t *testing.T, env *testenv.Env, ns string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "the PodDisruptionBudget allowing one disruption of two healthy", func() (bool, error) {
		pdb, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), "tether-controller", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := pdb.Status
		return st.CurrentHealthy == 2 && st.DisruptionsAllowed == 1, fmt.Errorf("healthy %d, allowed %d", st.CurrentHealthy, st.DisruptionsAllowed)
	})
}

func waitNoPods(t *testing.T, env *testenv.Env, ns string) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, "no pods left in "+ns, func() (bool, error) {
		list, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(list.Items) == 0, fmt.Errorf("%d pods left", len(list.Items))
	})
}

// checkMetrics: every replica serves /metrics over HTTPS to a token bound
// to tether-metrics-reader, refuses another ServiceAccount's token (403)
// and a request without one (401).
func checkMetrics(t *testing.T, env *testenv.Env, pods []corev1.Pod, ns string) {
	t.Helper()
	reader, stranger := token(t, env, ns, "scraper"), token(t, env, ns, "stranger")
	for i := range pods {
		p := &pods[i]
		if code, body := scrape(t, p, 8443, reader); code != 200 || !strings.Contains(body, "tether_") {
			t.Errorf("%s: the reader's scrape got %d, want 200 with tether_ metrics:\n%.300s", p.Name, code, body)
		}
		if code, _ := scrape(t, p, 8443, stranger); code != 403 {
			t.Errorf("%s: a token without the reader role got %d, want 403", p.Name, code)
		}
		if code, _ := scrape(t, p, 8443, ""); code != 401 {
			t.Errorf("%s: a scrape without a token got %d, want 401", p.Name, code)
		}
	}
}
