// Package realkv runs tether's binary end to end against real KubeVirt:
// virt-api and virt-controller v1.9.0 built from KubeVirt's module, its
// admission webhooks, its declarative hot-plug sync and its volume
// lifecycle (see internal/testing/realkubevirt). The oracles are what
// KubeVirt documents and does, never tether's own code.
package realkv

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/testing/cmdtest"
	"github.com/tether-dev/tether/internal/testing/fixture"
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
	return cmdtest.Run(t, binDir, env.Infra.Kubeconfig, 3*time.Minute, "tether", args...)
}

type finding struct {
	Check    string   `json:"check"`
	Severity string   `json:"severity"`
	Volume   string   `json:"volume"`
	Evidence []string `json:"evidence"`
	Object   struct{ Kind, Name string }
	Action   struct {
		Type      string `json:"type"`
		Safe      bool   `json:"safe"`
		BlockedBy string `json:"blockedBy"`
		Remedy    string `json:"remedy"`
	} `json:"action"`
}

func audit(t *testing.T, env *testenv.Env, scope []string) []finding {
	t.Helper()
	r := tether(t, env, append([]string{"audit", "-o", "json"}, scope...)...)
	if r.Code > 1 {
		t.Fatalf("audit: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	var rep struct{ Findings []finding }
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("audit -o json: %v\n%s", err, r.Stdout)
	}
	return rep.Findings
}

func only(t *testing.T, fs []finding, check, volume string) finding {
	t.Helper()
	var got []finding
	for _, f := range fs {
		if f.Check == check && f.Volume == volume {
			got = append(got, f)
		}
	}
	if len(got) != 1 {
		t.Fatalf("want one %s finding for %s, got %d in %+v", check, volume, len(got), fs)
	}
	return got[0]
}

// tenant makes the tenant cluster's evidence for infra namespace ns: its
// node (the VM or VMI vm) and a tenant PV for each claim, attached nowhere,
// so that a hot-plug of those claims is wanted by no tenant.
func tenant(t *testing.T, env *testenv.Env, ns, vm string, claims ...string) []string {
	t.Helper()
	tc, err := clients.New(env.Tenants["guest"].Config)
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{fixture.TenantNodeObject("worker-"+ns, ns, vm), fixture.CSIDriver("csi.kubevirt.io", true)}
	for _, c := range claims {
		objs = append(objs, fixture.PV("tpv-"+c+"-"+ns, c))
	}
	for _, o := range objs {
		o.SetUID("")
		if err := tc.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if _, shared := o.(*storagev1.CSIDriver); !shared {
			t.Cleanup(func() { _ = tc.Delete(context.Background(), o) })
		}
	}
	return []string{"-n", ns, "--tenant", "guest=" + env.Tenants["guest"].Kubeconfig + ":" + ns}
}

func contains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
