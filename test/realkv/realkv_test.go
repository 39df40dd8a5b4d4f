// Package realkv runs tether's binary end to end against real KubeVirt:
// virt-api and virt-controller v1.9.0 built from KubeVirt's module, its
// admission webhooks, its declarative hot-plug sync and its volume
// lifecycle (see internal/testing/realkubevirt). The oracles are what
// KubeVirt documents and does, never tether's own code.
package realkv

import (
	"os"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/testing/cmdtest"
	"github.com/tether-dev/tether/internal/testing/kvtest"
	"github.com/tether-dev/tether/internal/testing/localenv"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := cmdtest.Build()
	if err != nil {
		panic(err)
	}
	binDir = dir
	defer os.RemoveAll(dir)
	testenv.Main(m, testenv.Options{KubeVirt: localenv.KubeVirtReal, Tenants: []string{"guest"}})
}

func tether(t *testing.T, env *testenv.Env, args ...string) cmdtest.Result {
	t.Helper()
	return kvtest.Tether(t, binDir, env, args...)
}

type finding = kvtest.Finding

func audit(t *testing.T, env *testenv.Env, scope []string) []finding {
	t.Helper()
	return kvtest.Audit(t, binDir, env, scope)
}

func only(t *testing.T, fs []finding, check, volume string) finding {
	t.Helper()
	return kvtest.Only(t, fs, check, volume)
}

// tenant: see kvtest.Tenant.
func tenant(t *testing.T, env *testenv.Env, ns, vm string, claims ...string) []string {
	t.Helper()
	return kvtest.Tenant(t, env, ns, vm, claims...)
}

func contains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
