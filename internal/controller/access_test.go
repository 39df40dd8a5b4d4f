package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// bindAccount creates a ServiceAccount in ns bound to each ClusterRole, and
// returns a client configuration that impersonates it.
func bindAccount(t *testing.T, env *testenv.Env, ns string, clusterRoles ...string) *rest.Config {
	t.Helper()
	return bindAccountNamed(t, env, ns, "tether-under-test", clusterRoles...)
}

// bindAccountNamed is bindAccount with the account's name; an empty role
// name binds nothing.
func bindAccountNamed(t *testing.T, env *testenv.Env, ns, name string, clusterRoles ...string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, cr := range clusterRoles {
		if cr != "" {
			bindClusterRole(t, env, ns, name, cr)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa.Name}
	return cfg
}

// bindClusterRole binds the ClusterRole cr to the ServiceAccount ns/name
// until the test ends.
func bindClusterRole(t *testing.T, env *testenv.Env, ns, name, cr string) {
	t.Helper()
	ctx := context.Background()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name + "-" + cr},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.RbacV1().ClusterRoleBindings().Delete(ctx, crb.Name, metav1.DeleteOptions{}) })
}

// Protection enabled on an account with config/rbac but not
// config/rbac/protection: the controller refuses to start and names the
// overlay and what it lacks; with the overlay bound it starts.
func TestController_protectionWithoutItsRBAC_refusesToStart(t *testing.T) {
	w := newWorld(t)
	w.env.InstallController(t, "rbac/protection")
	cfg := config.Default()
	cfg.Scope.Namespaces = []string{w.ns}
	cfg.Protection.Enabled = true
	o := controller.Options{Config: &cfg, Log: testr.New(t), SkipNameValidation: true}

	o.RestConfig = bindAccount(t, w.env, w.ns, "tether-controller")
	_, err := controller.New(o)
	if err == nil {
		t.Fatal("the controller started with protection on and no right to patch what it protects")
	}
	for _, want := range []string{"config/rbac/protection", "patch persistentvolumeclaims in namespace " + w.ns,
		"patch controllerrevisions.apps in namespace " + w.ns, "get namespaces in namespace " + w.ns} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	other := w.env.Namespace(t)
	o.RestConfig = bindAccount(t, w.env, other, "tether-controller", "tether-controller-protection")
	testenv.Eventually(t, 10*time.Second, "the controller to start once the overlay is bound", func() (bool, error) {
		_, err := controller.New(o)
		return err == nil, err
	})
}

// Without a storage check, the controller's pod cache holds only hot-plug
// attachment pods (RBAC cannot narrow pods by label; the cache does), the
// namespace checks' too; with one, every pod in scope.
func TestController_podCacheHoldsOnlyAttachmentPods(t *testing.T) {
	w := newWorld(t)
	for name, labels := range map[string]map[string]string{"attach": {"kubevirt.io": "hotplug-disk"}, "app": {"app": "web"}} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
		}
		if _, err := w.env.Client.CoreV1().Pods(w.ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		cfg  func() *config.Config
		want []string
	}{
		{"hot-plug only -> attachment pods", func() *config.Config { return w.cfg(time.Hour) }, []string{"attach"}},
		{"the namespace checks, which read attachment pods -> attachment pods", func() *config.Config {
			c := w.cfg(time.Hour)
			for _, name := range check.InLoop(check.LoopNamespace) {
				c.Checks[name] = config.CheckConfig{Enabled: true}
			}
			return c
		}, []string{"attach"}},
		{"a storage check -> every pod", func() *config.Config {
			c := w.cfg(time.Hour)
			c.Checks[check.BlockedDeletion] = config.CheckConfig{Enabled: true}
			return c
		}, []string{"app", "attach"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mgr, err := controller.New(controller.Options{RestConfig: saConfig(w.env), Config: tc.cfg(), Log: testr.New(t), SkipNameValidation: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = mgr.Start(ctx) }()
			defer func() { cancel(); <-done }()
			if !mgr.GetCache().WaitForCacheSync(ctx) {
				t.Fatal("caches did not sync")
			}
			var pods corev1.PodList
			if err := mgr.GetClient().List(ctx, &pods, client.InNamespace(w.ns)); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pods.Items {
				got = append(got, p.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("the pod cache holds %v, want %v", got, tc.want)
			}
		})
	}
}

// AccessOf, asked by an admin about the controller's account, answers as
// the controller's own start-up check does: with protection enabled and
// only config/rbac bound, it names protection's missing grants (required,
// with the overlay as the fix) and the API server's SubjectAccessReview
// agrees that the account may not patch claims; with the overlay bound,
// nothing is missing.
func TestAccessOf_namesWhatTheControllersAccountLacks(t *testing.T) {
	w := newWorld(t)
	w.env.InstallController(t, "rbac/protection")
	cfg := config.Default()
	cfg.Scope.Namespaces = []string{w.ns}
	cfg.Protection.Enabled = true
	user := "system:serviceaccount:" + w.ns + ":tether-under-test"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + w.ns, "system:authenticated"}

	bindAccount(t, w.env, w.ns, "tether-controller")
	var denials []controller.Denial
	testenv.Eventually(t, 10*time.Second, "the binding to count", func() (bool, error) {
		ds, asked, err := controller.AccessOf(context.Background(), w.env.Client, &cfg, "tether-system", user, groups)
		denials = ds
		return err == nil && asked > 10 && !slices.ContainsFunc(ds, func(d controller.Denial) bool { return d.Feature != "protection" }), err
	})
	var patchClaims bool
	for _, d := range denials {
		if d.Optional || !strings.Contains(d.Fix, "config/rbac/protection") {
			t.Errorf("protection's grants are required and fixed by its overlay: %+v", d)
		}
		patchClaims = patchClaims || (d.Grant == "patch persistentvolumeclaims" && d.Namespace == w.ns)
	}
	if !patchClaims {
		t.Errorf("want patch persistentvolumeclaims in %s among %+v", w.ns, denials)
	}

	bindClusterRole(t, w.env, w.ns, "tether-under-test", "tether-controller-protection")
	testenv.Eventually(t, 10*time.Second, "nothing missing once the overlay is bound", func() (bool, error) {
		ds, _, err := controller.AccessOf(context.Background(), w.env.Client, &cfg, "tether-system", user, groups)
		return err == nil && len(ds) == 0, err
	})
}
