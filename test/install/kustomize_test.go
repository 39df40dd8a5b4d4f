package install_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKustomize_applyUpgradeUninstall_onARealNode: config/default applied
// with kubectl (an overlay that sets the built image, the real node,
// protection's grants and a configuration that acts) behaves as the chart
// does: two Ready replicas, one leader, HTTPS metrics for the reader role
// only, one orphan repaired and the breaker stopping the second; the
// upgrade (config/crd first, then the overlay with the second build) keeps
// records and breaker; the documented uninstall leaves no finalizer.
func TestKustomize_applyUpgradeUninstall_onARealNode(t *testing.T) {
	env := get(t)
	ctx := context.Background()
	world, orphans := seededWorld(t, env, "kz-")
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tether-metrics-reader-" + world.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tether-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: world.ns}},
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.RbacV1().ClusterRoleBindings().Delete(ctx, crb.Name, metav1.DeleteOptions{}) })
	const ns = "tether-system"
	overlay := func(v string) string { return filepath.Join("testdata", "kustomize", v) }

	v1 := buildImage(t, env, firstBuild)
	t0 := time.Now()
	kubectl(t, env, "apply", "-k", overlay("v1"))
	// Its cluster-wide objects carry the chart's names: leave none behind
	// for the next test, also when this one fails.
	t.Cleanup(func() {
		_, _ = env.Kubectl(t, "delete", "-k", overlay("v2"), "--ignore-not-found", "--wait=true", "--timeout=2m")
	})
	before := checkRunning(t, env, world, ns, v1.Tag, t0, orphans)

	// Upgrade: config/crd first, then everything with the second build.
	v2 := buildImage(t, env, secondBuild)
	kubectl(t, env, "apply", "--server-side", "-k", filepath.Join(repoRoot(), "config", "crd"))
	kubectl(t, env, "apply", "-k", overlay("v2"))
	checkUpgraded(t, env, world, ns, v2.Tag, before)

	// Uninstall as docs/operations.md says: stop the controller, release
	// the finalizers; the rest (and the records) last.
	kubectl(t, env, "-n", ns, "delete", "deployment", "tether-controller")
	waitNoPods(t, env, ns)
	releaseFinalizers(t, env, v2)
	world.checkNoFinalizers(t)
	kubectl(t, env, "delete", "-k", overlay("v2"), "--ignore-not-found", "--wait=true", "--timeout=2m")
}
