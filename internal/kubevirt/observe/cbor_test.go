package observe_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/localenv"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// On a real API server that serves custom resources in CBOR (its alpha
// feature gate on), the page reader asked for CBOR gets CBOR, page after
// page, and reads the very snapshot it reads in JSON; on a server without
// the gate (the shared test world) the same reader gets JSON and reads
// what it reads without asking.
func TestObserve_cborReadsWhatJSONReads(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	ctx := context.Background()
	env, err := localenv.Start(ctx, localenv.Options{APIServerArgs: []string{"--feature-gates=CBORServingAndStorage=true"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	admin, err := clients.New(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	createHotplugged(t, admin, ns, "vm-c", 5)
	read := func(cbor bool, size int64) (*snapshot.Snapshot, map[string]exchange) {
		t.Helper()
		cfg, got := recordingWire(env.Config())
		pages, err := observe.NewPageReader(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pages.CBOR = cbor
		s, err := observe.Observe(ctx, admin, observe.Options{Namespace: ns, PageSize: size, Pages: pages, Kinds: observe.VMIKinds})
		if err != nil {
			t.Fatal(err)
		}
		return s, got()
	}
	for _, size := range []int64{2, 500} {
		viaJSON, _ := read(false, size)
		viaCBOR, seen := read(true, size)
		for _, path := range []string{"/apis/kubevirt.io/v1/namespaces/" + ns + "/virtualmachineinstances", "/apis/kubevirt.io/v1/namespaces/" + ns + "/virtualmachines"} {
			if x := seen[path]; !strings.HasPrefix(x.contentType, "application/cbor") {
				t.Errorf("page size %d: %s asked %q, answered %q: want CBOR", size, path, x.accept, x.contentType)
			}
		}
		if len(viaCBOR.VMIs) != 5 || len(viaCBOR.VMs) != 5 {
			t.Fatalf("page size %d: read %d VMIs and %d VMs in CBOR, want 5 each", size, len(viaCBOR.VMIs), len(viaCBOR.VMs))
		}
		if !reflect.DeepEqual(viaCBOR.VMIs, viaJSON.VMIs) || !reflect.DeepEqual(viaCBOR.VMs, viaJSON.VMs) {
			t.Fatalf("page size %d: the CBOR read differs from the JSON read:\nCBOR %+v\nJSON %+v", size, viaCBOR.VMIs, viaJSON.VMIs)
		}
	}
}

// A server without CBOR (the default) answers a reader that asks for it in
// JSON, which it reads as if it had not asked.
func TestObserve_cborFallsBackToJSON(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	admin, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	vm := fixture.VM("vm-f", fixture.InNamespace(ns), fixture.WithVolume("hp", fixture.PVC("hp"), fixture.Hotpluggable()))
	createPaused(t, admin, vm, fixture.VMI("vm-f", fixture.InNamespace(ns), fixture.OwnedBy(vm), fixture.WithHotplug("hp")))
	var snaps []*snapshot.Snapshot
	for _, cbor := range []bool{false, true} {
		cfg, got := recordingWire(env.Config)
		pages, err := observe.NewPageReader(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pages.CBOR = cbor
		s, err := observe.Observe(ctx, admin, observe.Options{Namespace: ns, Pages: pages, Kinds: observe.VMIKinds})
		if err != nil {
			t.Fatal(err)
		}
		x := got()["/apis/kubevirt.io/v1/namespaces/"+ns+"/virtualmachineinstances"]
		if !strings.HasPrefix(x.contentType, "application/json") || (cbor && !strings.HasPrefix(x.accept, "application/cbor")) {
			t.Errorf("CBOR asked %v: asked %q, answered %q; want JSON answers", cbor, x.accept, x.contentType)
		}
		snaps = append(snaps, s)
	}
	if len(snaps[1].VMIs) != 1 || !reflect.DeepEqual(snaps[0].VMIs, snaps[1].VMIs) || !reflect.DeepEqual(snaps[0].VMs, snaps[1].VMs) {
		t.Fatalf("asking for CBOR on a server without it changed the read:\n%+v\n%+v", snaps[0].VMIs, snaps[1].VMIs)
	}
}
