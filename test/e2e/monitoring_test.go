package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/deploy/monitoring"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// syncBuffer is a bytes.Buffer safe to write from a process's output copier
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// scrapeNames GETs a metrics endpoint and returns its samples by name
// (label set and value, as printed); nil when it does not answer yet.
func scrapeNames(url string) map[string][]string {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	out := map[string][]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		out[name] = append(out[name], strings.TrimPrefix(line, name))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return out
}

// The alerts and the dashboard use only metrics that a running controller
// exports. The world is driven so that every one of them has a series: a
// tripped breaker holds an orphan (blocked, breaker 1), the reset lets it be
// detached (an action, a grace-to-action delay, breaker 0), the tenant is
// watched, a claim a VM uses is deleted (a postponed deletion), and a claim
// outside the scope keeps tether's finalizer (stranded).
func TestMonitoring_everyMetricUsedIsExported(t *testing.T) {
	env := testenv.Get(t)
	env.InstallController(t)
	used, err := monitoring.UsedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	create := func(objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			o.SetUID("")
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	ns, tenantKC := seed(t, env)
	// Outside the controller's scope: a stopped VM's claim that keeps
	// tether's finalizer, left from an earlier, wider scope.
	other := env.Namespace(t)
	stranded := fixture.PVC("kept", fixture.InNamespace(other))
	stranded.Finalizers = []string{inuse.Finalizer}
	create(fixture.VM("keeper", fixture.WithVolume("disk", fixture.PVC("kept")), fixture.InNamespace(other)), stranded)
	// After the controller stops (cleanups run last first): the uninstall
	// path releases every tether finalizer, so the namespaces can go.
	t.Cleanup(func() {
		for _, n := range []string{ns, other} {
			if r := tether(t, env, "tether", "protect", "-n", n, "--release", "--apply"); r.Code != 0 {
				t.Errorf("releasing the finalizers of %s: code %d\n%s%s", n, r.Code, r.Stdout, r.Stderr)
			}
		}
	})
	if err := findingrecord.TripBreaker(ctx, c, ns, time.Now(), "tripped by the test"); err != nil {
		t.Fatal(err)
	}

	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: tether.dev/v1alpha1
kind: ControllerConfig
checks:
  OrphanHotplugVolume: {enabled: true, gracePeriod: 0s}
scope:
  namespaces: [%s]
tenants:
  - {name: guest, kubeconfig: %s, namespace: %s}
protection:
  enabled: true
`, ns, tenantKC, ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	runCtx, stop := context.WithCancel(ctx)
	cmd := exec.CommandContext(runCtx, filepath.Join(binDir, "tether"), "controller", "--config", cfg,
		"--metrics-bind-address", addr, "--metrics-secure=false", "--allow-second-controller")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Infra.Kubeconfig, "POD_NAMESPACE="+ns)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.String())
		}
	})
	url := "http://" + addr + "/metrics"
	// Every name any scrape showed: a series that exists only while there
	// is something to report (the oldest open finding) counts once seen.
	seen := map[string]bool{}
	scrape := func() map[string][]string {
		got := scrapeNames(url)
		for name := range got {
			seen[name] = true
		}
		return got
	}
	value := func(name, labels string) func() (bool, error) {
		return func() (bool, error) {
			for _, s := range scrape()[name] {
				if s == labels {
					return true, nil
				}
			}
			return false, nil
		}
	}

	orphan := func(reason string) {
		t.Helper()
		testenv.Eventually(t, 60*time.Second, "the orphan's record "+reason, func() (bool, error) {
			var list v1alpha1.FindingList
			if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCheck: "OrphanHotplugVolume"}); err != nil {
				return false, err
			}
			for _, f := range list.Items {
				if f.Spec.Volume == "pvc-orphan" && f.Status.Reason == reason {
					return true, nil
				}
			}
			return false, nil
		})
	}
	orphan("BlastRadiusExceeded")
	testenv.Eventually(t, 30*time.Second, "tether_blast_radius_tripped 1 from the breaker record", value("tether_blast_radius_tripped", " 1"))
	testenv.Eventually(t, 30*time.Second, "the blocked orphan as the oldest open finding", func() (bool, error) {
		for _, s := range scrape()["tether_findings_oldest_timestamp_seconds"] {
			if strings.HasPrefix(s, `{check="OrphanHotplugVolume",phase="Blocked",severity="warning"} `) {
				return true, nil
			}
		}
		return false, nil
	})
	if r := tether(t, env, "tether", "controller", "reset-breaker", "-n", ns); r.Code != 0 {
		t.Fatalf("reset-breaker: code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	orphan("Applied")
	testenv.Eventually(t, 30*time.Second, "tether_blast_radius_tripped 0 after the reset", value("tether_blast_radius_tripped", " 0"))

	// A claim a stopped VM uses gets the finalizer; its deletion waits.
	create(fixture.PVC("held", fixture.InNamespace(ns)), fixture.VM("holder", fixture.WithVolume("disk", fixture.PVC("held")), fixture.InNamespace(ns)))
	testenv.Eventually(t, 30*time.Second, "the held claim protected", func() (bool, error) {
		out, err := env.Kubectl(t, "get", "pvc", "-n", ns, "held", "-o", "jsonpath={.metadata.finalizers}")
		return strings.Contains(out, inuse.Finalizer), err
	})
	if out, err := env.Kubectl(t, "delete", "pvc", "-n", ns, "held", "--wait=false"); err != nil {
		t.Fatalf("deleting the held claim: %v\n%s", err, out)
	}
	testenv.Eventually(t, 30*time.Second, "the postponed deletion counted", value("tether_protection_deleting", `{kind="PersistentVolumeClaim",state="postponed"} 1`))
	testenv.Eventually(t, 30*time.Second, `tether_tenant_up{tenant="guest"} 1`, value("tether_tenant_up", `{tenant="guest"} 1`))

	// The error names what is missing, for the timeout's message.
	testenv.Eventually(t, 30*time.Second, "every metric the alerts and the dashboard use", func() (bool, error) {
		scrape()
		var missing []string
		for name, where := range used {
			if !seen[name] {
				missing = append(missing, name+" (used by "+where+")")
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			return false, fmt.Errorf("not exported by the controller: %s", strings.Join(missing, ", "))
		}
		return true, nil
	})
}
