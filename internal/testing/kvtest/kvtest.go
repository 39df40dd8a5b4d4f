// Package kvtest holds what the end-to-end suites on real KubeVirt share:
// running tether's binary against a world, reading its audit, and the
// tenant cluster's evidence for a test's namespace.
package kvtest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/testing/cmdtest"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// Finding is the part of `tether audit -o json`'s findings the suites read.
type Finding struct {
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

// Tether runs the binary built into binDir against env's infra cluster.
func Tether(t *testing.T, binDir string, env *testenv.Env, args ...string) cmdtest.Result {
	t.Helper()
	return cmdtest.Run(t, binDir, env.Infra.Kubeconfig, 3*time.Minute, "tether", args...)
}

// Audit runs `tether audit -o json` with scope and returns its findings.
func Audit(t *testing.T, binDir string, env *testenv.Env, scope []string) []Finding {
	t.Helper()
	r := Tether(t, binDir, env, append([]string{"audit", "-o", "json"}, scope...)...)
	if r.Code > 1 {
		t.Fatalf("audit: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	var rep struct{ Findings []Finding }
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("audit -o json: %v\n%s", err, r.Stdout)
	}
	return rep.Findings
}

// Only returns the one finding of check for volume, failing otherwise.
func Only(t *testing.T, fs []Finding, check, volume string) Finding {
	t.Helper()
	var got []Finding
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

// Tenant makes the tenant cluster "guest"'s evidence for infra namespace
// ns: its node (the VM or VMI vm) and a tenant PV for each claim, attached
// nowhere, so that a hot-plug of those claims is wanted by no tenant. It
// returns the scope flags of tether's commands for it.
func Tenant(t *testing.T, env *testenv.Env, ns, vm string, claims ...string) []string {
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

// TenantWants makes the tenant cluster "guest" want claim on the node of
// Tenant's evidence: a tenant PV for it and the external-attacher's record
// of its publish to the VM or VMI vm, attached.
func TenantWants(t *testing.T, env *testenv.Env, ns, vm, claim string) {
	t.Helper()
	tc, err := clients.New(env.Tenants["guest"].Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pv := fixture.PV("tpv-"+claim+"-"+ns, claim)
	va := fixture.VolumeAttachment("va-"+claim+"-"+ns, "worker-"+ns, pv.Name, fixture.Attached(), fixture.AttachedToID(ns+"/"+vm))
	for _, o := range []client.Object{pv, va} {
		o.SetUID("")
		if err := tc.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		var cur storagev1.VolumeAttachment
		if tc.Get(context.Background(), client.ObjectKeyFromObject(va), &cur) == nil {
			cur.Finalizers = nil
			_ = tc.Update(context.Background(), &cur)
			_ = tc.Delete(context.Background(), &cur)
		}
		_ = tc.Delete(context.Background(), pv)
	})
	va.Status.Attached = true
	if err := tc.Status().Update(ctx, va); err != nil {
		t.Fatal(err)
	}
}
