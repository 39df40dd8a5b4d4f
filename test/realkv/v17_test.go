package realkv

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/localenv"
	"github.com/tether-dev/tether/internal/testing/realkubevirt"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// startV17 starts a second world with real KubeVirt v1.7 for one test.
func startV17(t *testing.T, gates ...string) *testenv.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	le, err := localenv.Start(context.Background(), localenv.Options{
		KubeVirt: localenv.KubeVirtReal, KubeVirtLine: realkubevirt.LineV17,
		FeatureGates: gates, Tenants: []string{"guest"},
	})
	if err != nil {
		t.Fatalf("KubeVirt v1.7 world: %v", err)
	}
	t.Cleanup(le.Stop)
	env := &testenv.Env{Env: le, Config: le.Config()}
	env.Client = kubernetes.NewForConfigOrDie(env.Config)
	env.Dynamic = dynamic.NewForConfigOrDie(env.Config)
	return env
}

// On KubeVirt v1.7 with HotplugVolumes listed (both hot-plug gates are
// Alpha there, pkg/virt-config/featuregate/active.go), virt-controller runs
// no declarative sync: a hot-plug made through the VMI route of a VM-owned
// VMI stays until the VM restarts, and the VMI route can remove it. With
// tenant evidence that nobody wants it, it is an orphan tether removes.
func TestRealV17_vmOwnedVMIOnlyHotplug_isAnOrphanTetherRemoves(t *testing.T) {
	env := startV17(t, "HotplugVolumes")
	w := newWorldIn(t, env)
	w.claims("pvc-orphan")
	w.vm("owned")
	w.hotplug(virtapi.VMI, "owned", "pvc-orphan")
	scope := tenant(t, env, w.NS, "owned", "pvc-orphan")

	f := only(t, audit(t, env, scope), "OrphanHotplugVolume", "pvc-orphan")
	if !f.Action.Safe || f.Action.Type != "VMIRemoveVolume" {
		t.Fatalf("v1.7 with HotplugVolumes: want a safe VMIRemoveVolume, got action %+v", f.Action)
	}
	r := tether(t, env, append([]string{"fix", "--apply"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if p := w.Phase("owned", "pvc-orphan"); p != "" {
		t.Fatalf("the orphan is still in the VMI status after Applied: phase %q", p)
	}
}
