package observe_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
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
		createPaused(t, admin, fixture.VM(fmt.Sprintf("vm-%d", i), fixture.InNamespace(ns)))
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
	createPaused(t, admin, fixture.VM("vm-k", fixture.InNamespace(ns)), fixture.AttachmentPod("hp-volume-k", fixture.InNamespace(ns)),
		fixture.UserPod("app", fixture.InNamespace(ns)))
	var counter clients.Counter
	c, err := clients.New(counter.Wrap(env.Config))
	if err != nil {
		t.Fatal(err)
	}
	kinds := check.Reads([]string{check.OrphanHotplugVolume, check.OrphanAttachmentPod})
	part, err := observe.Observe(ctx, c, observe.Options{Namespace: ns, PageSize: 1, Kinds: kinds, Lean: true})
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
	// Lean: the objects hold only what decisions read.
	if len(whole.AttachmentPods[0].Spec.Containers) != 1 || len(part.AttachmentPods[0].Spec.Containers) != 0 || part.AttachmentPods[0].ManagedFields != nil {
		t.Errorf("a lean read keeps a pod's containers or managedFields: %+v", part.AttachmentPods[0])
	}
	if part.FeatureGates.Known != whole.FeatureGates.Known || !part.FeatureGates.Known {
		t.Error("the KubeVirt CR must be read for the hot-plug checks")
	}
}

// The page reader reads the VMIs and VMs the client reads, page after
// page, with what decisions read of them (the disks marked shareable
// among them); and the server's refusal stays a refusal (forbidden) that
// the caller can tell apart.
func TestObserve_pageReaderReadsWhatTheClientReads(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	admin, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	createHotplugged(t, admin, ns, "vm-p", 5)
	var counter clients.Counter
	pages, err := observe.NewPageReader(counter.Wrap(env.Config))
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{1, 2, 4, 500} {
		viaClient, err := observe.Observe(ctx, admin, observe.Options{Namespace: ns, PageSize: size})
		if err != nil {
			t.Fatal(err)
		}
		viaPages, err := observe.Observe(ctx, admin, observe.Options{Namespace: ns, PageSize: size, Pages: pages})
		if err != nil {
			t.Fatal(err)
		}
		if len(viaPages.VMIs) != 5 || len(viaPages.VMs) != 5 {
			t.Fatalf("page size %d: read %d VMIs and %d VMs, want 5 each", size, len(viaPages.VMIs), len(viaPages.VMs))
		}
		// What the page reader reads is the client's object made lean.
		for i := range viaClient.VMIs {
			a, b := snapshot.Lean(&viaClient.VMIs[i]), &viaPages.VMIs[i]
			if !apiequality.Semantic.DeepEqual(a, b) {
				t.Fatalf("page size %d: VMI differs:\nclient %+v\npages  %+v", size, a, b)
			}
		}
		for i := range viaClient.VMs {
			a, b := snapshot.Lean(&viaClient.VMs[i]), &viaPages.VMs[i]
			if !apiequality.Semantic.DeepEqual(a, b) {
				t.Fatalf("page size %d: VM differs:\nclient %+v\npages  %+v", size, a, b)
			}
		}
	}
	// Pages of 1, 2, 4 and 500 of 5 VMIs and 5 VMs, read by the page reader.
	by := counter.By()
	if n := by["GET /apis/kubevirt.io/v1/namespaces/"+ns+"/virtualmachineinstances"]; n != 5+3+2+1 {
		t.Errorf("the page reader read %d VMI pages, want 11: %v", n, by)
	}
	// A user with no rights, the client an admin's: the page reader's
	// answer is the API's refusal.
	nobody, err := env.Infra.UserConfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	denied, err := observe.NewPageReader(nobody)
	if err != nil {
		t.Fatal(err)
	}
	_, err = observe.Observe(ctx, admin, observe.Options{Namespace: ns, Pages: denied, Kinds: snapshot.KindVMIs})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want a forbidden error, got %v", err)
	}
}

// createHotplugged creates n paused VMs named prefix0, prefix1, ... in ns
// with their VMIs, each with a hot-plug in the VM spec and one only in the
// VMI; every other one has a disk marked shareable, which SharedClaim
// reads.
func createHotplugged(t *testing.T, c client.Client, ns, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		vm := fixture.VM(name, fixture.InNamespace(ns), fixture.WithVolume("hp", fixture.PVC("hp"), fixture.Hotpluggable()))
		vmi := fixture.VMI(name, fixture.InNamespace(ns), fixture.OwnedBy(vm), fixture.WithHotplug("hp"), fixture.WithHotplug("only"))
		if i%2 == 0 {
			yes := true
			for _, spec := range []*kubevirtv1.VirtualMachineInstanceSpec{&vm.Spec.Template.Spec, &vmi.Spec} {
				disks := spec.Domain.Devices.Disks
				if len(disks) == 0 {
					t.Fatal("the fixture has no disk")
				}
				disks[len(disks)-1].Shareable = &yes
			}
		}
		createPaused(t, c, vm)
		createPaused(t, c, vmi)
	}
}

// createPaused creates objs as built, without their fixture UIDs, and
// paused, so that the emulator leaves them as written (the VMI's status
// too, which is written with the object).
func createPaused(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		o.SetUID("")
		o.SetAnnotations(map[string]string{emulator.PausedAnnotation: "true"})
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}
