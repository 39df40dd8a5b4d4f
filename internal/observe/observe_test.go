package observe_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/check"
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

// Observe with the hot-plug checks' kinds lists only those: VMIs, VMs, the
// attachment pods by their label (not every pod), DataVolumes and the
// KubeVirt CR; no claims, Nodes, VolumeAttachments, PVs or CSIDrivers.
// What it reads of those kinds is what a read of every kind gives.
func TestObserve_readsOnlyTheKindsAsked(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	admin, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	vm := fixture.VM("vm-k", fixture.InNamespace(ns))
	vm.UID = ""
	vm.Annotations = map[string]string{emulator.PausedAnnotation: "true"}
	hp := fixture.AttachmentPod("hp-volume-k", fixture.InNamespace(ns))
	user := fixture.UserPod("app", fixture.InNamespace(ns))
	for _, o := range []client.Object{vm, hp, user} {
		o.SetUID("")
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var counter clients.Counter
	c, err := clients.New(counter.Wrap(env.Config))
	if err != nil {
		t.Fatal(err)
	}
	kinds := check.Reads([]string{check.OrphanHotplugVolume, check.OrphanAttachmentPod})
	part, err := observe.Observe(ctx, c, observe.Options{Namespace: ns, PageSize: 1, Kinds: kinds})
	if err != nil {
		t.Fatal(err)
	}
	for key := range counter.By() {
		for _, never := range []string{"/persistentvolumeclaims", "/nodes", "/volumeattachments", "/persistentvolumes", "/csidrivers"} {
			if strings.HasSuffix(key, never) {
				t.Errorf("listed %s, which no hot-plug check reads", key)
			}
		}
	}
	whole, err := observe.Observe(ctx, c, observe.Options{Namespace: ns, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Pods) != 2 || len(part.Pods) != 0 {
		t.Fatalf("pods: whole read %d (want 2), hot-plug read %d (want none: the attachment pods alone)", len(whole.Pods), len(part.Pods))
	}
	only := whole.Only(kinds)
	for _, c := range []struct {
		what        string
		part, whole int
	}{{"VMs", len(part.VMs), len(only.VMs)}, {"attachment pods", len(part.AttachmentPods), len(only.AttachmentPods)}} {
		if c.part != c.whole || c.whole != 1 {
			t.Errorf("%s: read %d, a whole read has %d (want 1)", c.what, c.part, c.whole)
		}
	}
	if part.FeatureGates.Known != whole.FeatureGates.Known || !part.FeatureGates.Known {
		t.Error("the KubeVirt CR must be read for the hot-plug checks")
	}
}
