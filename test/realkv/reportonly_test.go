package realkv

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// vmWithClaim creates a VM whose template mounts claim as disk "data",
// with the given run strategy.
func (w *world) vmWithClaim(name, claim string, run kubevirtv1.VirtualMachineRunStrategy) {
	s := spec()
	s.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "data", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}}
	s.Volumes = []kubevirtv1.Volume{{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS},
		Spec:       kubevirtv1.VirtualMachineSpec{RunStrategy: &run, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: s}},
	}
	if err := w.C.Create(context.Background(), vm); err != nil {
		w.T.Fatal(err)
	}
}

// generation is the VM's metadata.generation: it moves with every spec
// change.
func (w *world) generation(name string) int64 {
	var vm kubevirtv1.VirtualMachine
	if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: name}, &vm); err != nil {
		w.T.Fatal(err)
	}
	return vm.Generation
}

// fixChangesNothing runs `tether fix --apply` and fails when it applied
// anything.
func fixChangesNothing(t *testing.T, env *testenv.Env, scope []string) {
	t.Helper()
	r := tether(t, env, append([]string{"fix", "--apply"}, scope...)...)
	if r.Code > 1 || strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply acted on a report-only finding: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// One ReadWriteOnce claim in the specs of two VMs (harvester #9761): the
// second VM is a copy of the first, made while the first runs, and left
// stopped. Real virt-api admits both VMs; tether reports the claim with the
// VM that holds it and the VM that waits for it, and fix --apply touches
// neither VM nor the claim.
func TestReal_sharedClaim_namesHolderAndWaiter(t *testing.T) {
	w := newWorld(t)
	w.claims("pvc-one")
	w.vmWithClaim("holder", "pvc-one", kubevirtv1.RunStrategyAlways)
	w.running("holder")
	w.vmWithClaim("waiter", "pvc-one", kubevirtv1.RunStrategyHalted)

	f := only(t, audit(t, w.Env, []string{"-n", w.NS}), check.SharedClaimConflict, "pvc-one")
	if f.Severity != "warning" || f.Object.Kind != "PersistentVolumeClaim" || f.Action.Type != "None" {
		t.Fatalf("want a report-only warning on the claim, got %+v", f)
	}
	if !contains(f.Evidence, "held by VM holder: VMI holder is Running") || !contains(f.Evidence, "waited for by VM waiter") {
		t.Fatalf("the evidence should name holder and waiter: %q", f.Evidence)
	}
	w.sharedClaimUntouched("pvc-one", "holder", "waiter")
	if _, err := w.vmi("waiter"); err == nil {
		t.Fatalf("the waiter was started")
	}
}

// The copy started too: real virt-api and virt-controller start it, as
// neither checks the claim's access modes. ReadWriteOnce binds a node, not
// a pod: only a second node's attach would fail (there is no attach-detach
// controller here), and on one node two guests write to one filesystem.
// tether reports both as holding it, and fix --apply stops neither.
func TestReal_sharedClaim_bothStartedBothHoldIt(t *testing.T) {
	w := newWorld(t)
	w.claims("pvc-one")
	w.vmWithClaim("first", "pvc-one", kubevirtv1.RunStrategyAlways)
	w.running("first")
	w.vmWithClaim("copy", "pvc-one", kubevirtv1.RunStrategyAlways)
	w.running("copy")

	f := only(t, audit(t, w.Env, []string{"-n", w.NS}), check.SharedClaimConflict, "pvc-one")
	if f.Severity != "warning" || f.Action.Type != "None" {
		t.Fatalf("want a report-only warning on the claim, got %+v", f)
	}
	if !contains(f.Evidence, "held by VM first: VMI first is Running") || !contains(f.Evidence, "held by VM copy: VMI copy is Running") {
		t.Fatalf("the evidence should name both VMs as holders: %q", f.Evidence)
	}
	w.sharedClaimUntouched("pvc-one", "first", "copy")
}

// sharedClaimUntouched runs fix --apply and checks that it changed
// neither the claim nor the VMs' specs, and stopped no running VMI.
func (w *world) sharedClaimUntouched(claim string, vms ...string) {
	t := w.T
	t.Helper()
	gens := map[string]int64{}
	running := map[string]bool{}
	for _, n := range vms {
		gens[n] = w.generation(n)
		vmi, err := w.vmi(n)
		running[n] = err == nil && vmi.Status.Phase == kubevirtv1.Running
	}
	var before, after corev1.PersistentVolumeClaim
	key := client.ObjectKey{Namespace: w.NS, Name: claim}
	if err := w.C.Get(context.Background(), key, &before); err != nil {
		t.Fatal(err)
	}
	fixChangesNothing(t, w.Env, []string{"-n", w.NS})
	if err := w.C.Get(context.Background(), key, &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("fix --apply changed claim %s", claim)
	}
	for _, n := range vms {
		if w.generation(n) != gens[n] {
			t.Fatalf("fix --apply changed VM %s's spec", n)
		}
		if vmi, err := w.vmi(n); running[n] && (err != nil || vmi.Status.Phase != kubevirtv1.Running) {
			t.Fatalf("VMI %s no longer runs after fix --apply: %v", n, err)
		}
	}
}

// A phantom attach as it arises (harvester #10588, cozystack #2659): the
// driver publishes a volume by hot-plugging it on the VM (virt-api's
// addvolume) and the tenant's VolumeAttachment is marked attached; then the
// hot-plug is removed behind the driver's back (removevolume on the VM) and
// the tenant's VolumeAttachment keeps saying attached. Read as tether reads
// it (observe with the tenant), PhantomAttach holds the finding as info
// under the default grace and makes it critical past a short one; fix
// --apply leaves the VolumeAttachment and the VM alone.
func TestReal_phantomAttach_tenantAttachedHotplugGone(t *testing.T) {
	w := newWorld(t)
	w.claims("pvc-ghost")
	w.vm("infra")
	w.hotplug(virtapi.VM, "infra", "pvc-ghost")
	scope := tenant(t, w.Env, w.NS, "infra", "pvc-ghost")

	// The external-attacher's record of the publish: attached, with its
	// finalizer and the node ID the driver reported.
	tc, err := clients.New(w.Env.Tenants["guest"].Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	va := fixture.VolumeAttachment("va-ghost-"+w.NS, "worker-"+w.NS, "tpv-pvc-ghost-"+w.NS, fixture.Attached(), fixture.AttachedToID(w.NS+"/infra"))
	va.SetUID("")
	if err := tc.Create(ctx, va); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var cur storagev1.VolumeAttachment
		if tc.Get(context.Background(), client.ObjectKeyFromObject(va), &cur) == nil {
			cur.Finalizers = nil
			_ = tc.Update(context.Background(), &cur)
			_ = tc.Delete(context.Background(), &cur)
		}
	})
	va.Status.Attached = true
	if err := tc.Status().Update(ctx, va); err != nil {
		t.Fatal(err)
	}

	// The removal behind the driver's back.
	w.removeFromVM("infra", "pvc-ghost")
	testenv.Eventually(t, 60*time.Second, "hot-plug gone from the VMI", func() (bool, error) {
		return w.Phase("infra", "pvc-ghost") == "", nil
	})
	// The short grace below (1s) must have passed since the attachment
	// (creation times have whole seconds).
	time.Sleep(time.Until(va.CreationTimestamp.Add(3 * time.Second)))

	ic, err := clients.New(w.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := observe.Observe(ctx, ic, observe.Options{Namespace: w.NS,
		Tenants: []observe.TenantSource{{Name: "guest", Namespace: w.NS, Config: w.Env.Tenants["guest"].Config}}})
	if err != nil {
		t.Fatal(err)
	}
	if tn := snap.Tenants[0]; !tn.Reachable || tn.DriverMissing {
		t.Fatalf("tenant read: reachable %v (%s), driver missing %v", tn.Reachable, tn.Error, tn.DriverMissing)
	}
	phantom := func(p check.Policy) drift.Finding {
		t.Helper()
		p.Scope.Namespaces = []string{w.NS}
		p.Checks = []string{check.PhantomAttach}
		var got []drift.Finding
		for _, f := range check.Run(snap, p, time.Now()) {
			if f.Check == check.PhantomAttach && f.Volume == "pvc-ghost" {
				got = append(got, f)
			}
		}
		if len(got) != 1 {
			t.Fatalf("want one PhantomAttach finding for pvc-ghost, got %+v", got)
		}
		return got[0]
	}
	held := phantom(check.DefaultPolicy())
	if held.Severity != drift.SeverityInfo || held.Action.BlockedBy != check.TenantAttachTooRecent {
		t.Fatalf("within the default grace: want info, TenantAttachTooRecent, got %+v", held)
	}
	p := check.DefaultPolicy()
	p.TenantAttachGrace = time.Second
	f := phantom(p)
	if f.Severity != drift.SeverityCritical || f.Action.Type != drift.None || f.Action.BlockedBy != check.HotplugMissing ||
		f.Object.Kind != "VirtualMachineInstance" || f.Object.Name != "infra" {
		t.Fatalf("past the grace: want a critical report-only finding on VMI infra, got %+v", f)
	}
	if !contains(f.Evidence, va.Name) {
		t.Fatalf("the evidence should name the VolumeAttachment %s: %q", va.Name, f.Evidence)
	}

	var vaBefore storagev1.VolumeAttachment
	if err := tc.Get(ctx, client.ObjectKeyFromObject(va), &vaBefore); err != nil {
		t.Fatal(err)
	}
	gen := w.generation("infra")
	fixChangesNothing(t, w.Env, scope)
	var vaAfter storagev1.VolumeAttachment
	if err := tc.Get(ctx, client.ObjectKeyFromObject(va), &vaAfter); err != nil {
		t.Fatal(err)
	}
	if vaAfter.ResourceVersion != vaBefore.ResourceVersion || !vaAfter.Status.Attached {
		t.Fatalf("fix --apply touched the tenant VolumeAttachment")
	}
	if w.generation("infra") != gen {
		t.Fatalf("fix --apply changed the VM spec")
	}
}
