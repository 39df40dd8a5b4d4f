package observe_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/observe"
	"github.com/tether-dev/tether/internal/testing/emulator"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// Seven VMs read with page size 2: every VM arrives, in four LIST pages, and
// no object is fetched one by one.
func TestObserve_paginatesOneListPerKind(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	admin, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 7; i++ {
		vm := fixture.VM(fmt.Sprintf("vm-%d", i), fixture.InNamespace(ns))
		vm.UID = ""
		vm.Annotations = map[string]string{emulator.PausedAnnotation: "true"}
		if err := admin.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	var counter clients.Counter
	c, err := clients.New(counter.Wrap(env.Config))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := observe.Observe(ctx, c, observe.Options{Namespace: ns, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.VMs) != 7 {
		t.Fatalf("want 7 VMs, got %d", len(snap.VMs))
	}
	seen := map[string]bool{}
	for _, vm := range snap.VMs {
		if seen[vm.Name] {
			t.Fatalf("VM %s read twice", vm.Name)
		}
		seen[vm.Name] = true
	}
	if !snap.FeatureGates.Known {
		t.Error("feature gates should be known: the emulator installs the KubeVirt CR")
	}
	for path, n := range counter.By() {
		if strings.HasSuffix(path, "/virtualmachines") && n != 4 {
			t.Errorf("%s: want 4 pages, got %d", path, n)
		}
		if strings.Contains(path, "/virtualmachines/") {
			t.Errorf("per-object request %s", path)
		}
	}
}

// A tenant that does not answer is recorded as unreachable, with the reason,
// within the tenant timeout; the infra read still succeeds.
func TestObserve_tenantDown_unknownNotError(t *testing.T) {
	env := testenv.Get(t)
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dead := rest.CopyConfig(env.Tenants["guest"].Config)
	dead.Host = "https://127.0.0.1:1"
	t0 := time.Now()
	snap, err := observe.Observe(context.Background(), c, observe.Options{
		Namespace:     env.Namespace(t),
		TenantTimeout: 3 * time.Second,
		Tenants: []observe.TenantSource{
			{Name: "down", Config: dead},
			{Name: "up", Config: env.Tenants["guest"].Config},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(t0) > 10*time.Second {
		t.Errorf("took %s", time.Since(t0))
	}
	if len(snap.Tenants) != 2 || snap.Tenants[0].Reachable || snap.Tenants[0].Error == "" || !snap.Tenants[1].Reachable {
		t.Fatalf("want down unreachable with a reason and up reachable, got %+v", snap.Tenants)
	}
}
