package testenv

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/config/crd"
	"github.com/tether-dev/tether/internal/controller"
)

// ControllerUser is the controller's ServiceAccount, as config/rbac binds it.
const ControllerUser = "system:serviceaccount:tether-system:tether-controller"

var installed sync.Map // kustomize dir -> error

// InstallController puts what `tether controller` needs into the cluster,
// once per package: the Finding CRD, the tether-system namespace and
// config/rbac, plus each extra kustomize directory under config/ (e.g.
// "rbac/storage-remediation").
func (e *Env) InstallController(t testing.TB, extra ...string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	configDir := filepath.Join(filepath.Dir(file), "..", "..", "..", "config")
	first := true
	for _, dir := range append([]string{"rbac"}, extra...) {
		v, _ := installed.LoadOrStore(dir, new(sync.Once))
		once := v.(*sync.Once)
		var failed string
		once.Do(func() {
			if first {
				if err := crd.Install(context.Background(), e.Config); err != nil {
					failed = "installing the Finding CRD: " + err.Error()
					return
				}
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tether-system"}}
				if _, err := e.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					failed = "creating tether-system: " + err.Error()
					return
				}
			}
			if out, err := e.Kubectl(t, "apply", "-k", filepath.Join(configDir, dir)); err != nil {
				failed = "applying config/" + dir + ": " + err.Error() + "\n" + out
			}
		})
		first = false
		if failed != "" {
			t.Fatal(failed)
		}
	}
}

// AsController returns a client configuration that acts as the controller's
// ServiceAccount, so that the real authorizer checks config/rbac.
func (e *Env) AsController() *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: ControllerUser}
	return cfg
}

// RunController starts `tether controller` with o until the returned stop is
// called or the test ends; a controller that stops with an error fails the
// test.
func RunController(t testing.TB, o controller.Options) (stop func()) {
	t.Helper()
	mgr, err := controller.New(o)
	if err != nil {
		t.Fatalf("controller.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("controller stopped: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}
