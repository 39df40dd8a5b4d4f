// Package install_test installs tether as users do — the image `make image`
// builds, imported into a real node's containerd, and the chart through
// Helm's SDK (or config/default through kubectl) — and checks what only a
// running pod shows: probes, the mounted token, leader election, the HTTPS
// metrics endpoint, a repair on the emulator world, an upgrade and an
// uninstall. Where the host cannot run a real node, every test skips with
// the reason.
package install_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/release"
	"github.com/tether-dev/tether/internal/testing/realnode"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

var unsupported error

func TestMain(m *testing.M) {
	if unsupported = realnode.Supported(); unsupported != nil {
		os.Exit(m.Run())
	}
	testenv.Main(m, testenv.Options{RealNode: true, Tenants: []string{"guest"}})
}

// get returns the world, skipping with one line where no real node can run.
func get(t *testing.T) *testenv.Env {
	t.Helper()
	if unsupported != nil {
		t.Skip(unsupported)
	}
	return testenv.Get(t)
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// image is one build of tether's image, imported into the real node.
type image struct {
	Tag    string // the chart's image.tag
	Binary string // the same build's tether binary for this host
}

var (
	imagesMu sync.Mutex
	images   = map[string]image{}
)

// buildImage builds tether's image as `make image` does (one platform:
// this host's) under version, and imports its tarball into the node once.
func buildImage(t *testing.T, env *testenv.Env, version string) image {
	t.Helper()
	imagesMu.Lock()
	defer imagesMu.Unlock()
	if img, ok := images[version]; ok {
		return img
	}
	// Under the node's directory: the builds live as long as the node,
	// for every test of the package.
	out := filepath.Join(env.Node.Dir, "images", version)
	t0 := time.Now()
	b := release.Build{Root: repoRoot(), Version: version, Commit: strings.Repeat("0", 40), Epoch: 1767225600}
	r, err := release.BuildImage(context.Background(), b, []release.Platform{{OS: "linux", Arch: runtime.GOARCH}}, out, release.DefaultCACerts)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Node.Import(context.Background(), r.Tarball); err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s built and imported in %s", r.Tag, time.Since(t0).Round(time.Millisecond))
	img := image{Tag: version, Binary: filepath.Join(out, "release", "linux_"+runtime.GOARCH, "tether")}
	images[version] = img
	return img
}

// waitRollout waits until the Deployment runs want ready replicas of
// image, all on the real node, and returns its pods.
func waitRollout(t *testing.T, env *testenv.Env, ns, name, image string, want int) []corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var pods []corev1.Pod
	testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("%d ready pods of %s/%s running %s on the real node", want, ns, name, image), func() (bool, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return false, err
		}
		list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				return false, fmt.Errorf("pod %s still terminating", p.Name)
			}
			if p.Spec.NodeName != env.Node.Name || !strings.HasSuffix(p.Spec.Containers[0].Image, ":"+image) {
				return false, fmt.Errorf("pod %s on %q runs %s", p.Name, p.Spec.NodeName, p.Spec.Containers[0].Image)
			}
			if !podReady(&p) {
				return false, fmt.Errorf("pod %s not ready: %s", p.Name, podState(&p))
			}
			pods = append(pods, p)
		}
		return len(pods) == want && rolledOut(d), fmt.Errorf("%d of %d pods ready", len(pods), want)
	})
	return pods
}

func rolledOut(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas &&
		d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podState says why a pod is not ready: its containers' waiting or
// terminated reasons, and restarts.
func podState(p *corev1.Pod) string {
	var parts []string
	for _, c := range p.Status.ContainerStatuses {
		s := fmt.Sprintf("%s restarts=%d", c.Name, c.RestartCount)
		if w := c.State.Waiting; w != nil {
			s += " waiting " + w.Reason + ": " + w.Message
		}
		if tm := c.LastTerminationState.Terminated; tm != nil {
			s += fmt.Sprintf(" last exit %d %s: %s", tm.ExitCode, tm.Reason, tm.Message)
		}
		parts = append(parts, s)
	}
	return string(p.Status.Phase) + " " + strings.Join(parts, "; ")
}

// leader waits until the Lease names exactly one of pods as its holder
// and returns that pod's name.
func leader(t *testing.T, env *testenv.Env, ns string, pods []corev1.Pod) string {
	t.Helper()
	var holder string
	testenv.Eventually(t, 90*time.Second, "one leader among "+fmt.Sprint(names(pods)), func() (bool, error) {
		l, err := env.Client.CoordinationV1().Leases(ns).Get(context.Background(), "tether-controller.tether.dev", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if l.Spec.HolderIdentity == nil {
			return false, fmt.Errorf("lease has no holder")
		}
		var matched []string
		for _, p := range pods {
			if strings.HasPrefix(*l.Spec.HolderIdentity, p.Name+"_") {
				matched = append(matched, p.Name)
			}
		}
		if len(matched) != 1 {
			return false, fmt.Errorf("holder %q matches %v", *l.Spec.HolderIdentity, matched)
		}
		holder = matched[0]
		return true, nil
	})
	return holder
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// token is a bound token of ServiceAccount ns/sa.
func token(t *testing.T, env *testenv.Env, ns, sa string) string {
	t.Helper()
	tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func ptr[T any](v T) *T { return &v }

// scrape GETs https://<pod IP>:<port>/metrics with bearer (none when
// empty) and returns the status code and body.
func scrape(t *testing.T, pod *corev1.Pod, port int, bearer string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The controller's certificate is self-signed (the chart's
		// ServiceMonitor skips verification too); the test checks TLS is spoken.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s:%d/metrics", pod.Status.PodIP, port), nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	// Ready says the health probe server answers; the metrics server
	// starts beside it and may listen a moment later.
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if resp, err = c.Do(req); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("scraping %s: %v", pod.Name, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32*1024)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// serviceAccount creates ns/name.
func serviceAccount(t *testing.T, env *testenv.Env, ns, name string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubectl runs the real kubectl against the world and fails on error.
func kubectl(t *testing.T, env *testenv.Env, args ...string) {
	t.Helper()
	if out, err := env.Kubectl(t, args...); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
