// Package testenv gives integration tests a running local world (see
// package localenv): one per test package, chosen in TestMain and started
// by the first test that asks for it, with a fresh namespace per test and
// kubectl as a real client.
//
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }
//	func TestX(t *testing.T) { env := testenv.Get(t); ns := env.Namespace(t); ... }
//
// A run of the package's unit tests alone (go test -run TestPure) starts
// no environment. Under `go test -short` none is started and Get skips the
// test.
package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/internal/testing/localenv"
)

// Options choose what the package's environment includes.
type Options = localenv.Options

// Env is the running environment with ready-made clients.
type Env struct {
	*localenv.Env
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
}

var (
	options  Options
	mainRan  bool
	starting sync.Once
	shared   *Env
	startErr error
)

// Main runs the package's tests with an environment of o, started on the
// first Get, and stops it. It exits the process with the tests' result.
func Main(m *testing.M, o Options) {
	flag.Parse()
	options, mainRan = o, true
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

// start starts the package's environment, once.
func start() {
	t0 := time.Now()
	env, err := localenv.Start(context.Background(), options)
	if err != nil {
		startErr = err
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return
	}
	shared = &Env{Env: env, Config: env.Config()}
	shared.Client = kubernetes.NewForConfigOrDie(shared.Config)
	shared.Dynamic = dynamic.NewForConfigOrDie(shared.Config)
	fmt.Fprintf(os.Stderr, "testenv: environment ready in %s\n", time.Since(t0).Round(time.Millisecond))
}

// Get returns the package's environment, starting it on first use; it
// skips under -short and fails the test when the environment could not
// start.
func Get(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	if !mainRan {
		t.Fatal("test environment not set up: call testenv.Main from TestMain")
	}
	starting.Do(start)
	if shared == nil {
		t.Fatalf("test environment did not start: %v", startErr)
	}
	return shared
}

// Namespace creates a namespace for this test, removed at its end.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	name := "t-" + strings.ToLower(rand.String(6))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// Kubectl runs the real kubectl against the environment and returns its
// combined output.
func (e *Env) Kubectl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	cmd := exec.Command(path, append([]string{"--kubeconfig", e.Infra.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Eventually polls cond every 50ms until it returns true or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
}
