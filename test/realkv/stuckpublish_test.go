package realkv

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/realkubevirt"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// pendingClaim makes a claim no provisioner serves: it stays Pending, and
// real virt-controller keeps a hot-plug of it in phase Pending
// ("PVCNotReady"), never Ready: a publish that waits for it times out.
func (w *world) pendingClaim(name string) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS, Annotations: map[string]string{realkubevirt.NoProvisionAnnotation: "true"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := w.C.Create(context.Background(), pvc); err != nil {
		w.T.Fatal(err)
	}
}

// publishTimedOut is what the driver's ControllerPublishVolume leaves when
// its wait for Ready times out: the VM-level addvolume done, the VM spec
// listing the hot-plug, the VMI status holding it in a phase short of
// Ready.
func (w *world) publishTimedOut(vm, claim string) {
	sub, err := virtapi.NewSubresourceClient(w.Env.Config)
	if err != nil {
		w.T.Fatal(err)
	}
	if err := virtapi.AddVolume(context.Background(), sub, virtapi.VM, w.NS, vm, fixture.AddVolumeOptions(claim)); err != nil {
		w.T.Fatalf("addvolume %s: %v", claim, err)
	}
	testenv.Eventually(w.T, 60*time.Second, "hot-plug "+claim+" in the VMI status", func() (bool, error) {
		return w.Phase(vm, claim) != "", nil
	})
	// The attachment pod cannot be scheduled while the claim is Pending:
	// the hot-plug never turns Ready.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if p := w.Phase(vm, claim); p == kubevirtv1.VolumeReady {
			w.T.Fatalf("hot-plug %s of a Pending claim became Ready", claim)
		}
	}
}

// vmLists says whether VM name's spec lists volume.
func (w *world) vmLists(name, volume string) bool {
	var vm kubevirtv1.VirtualMachine
	if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: name}, &vm); err != nil {
		w.T.Fatal(err)
	}
	return snapshot.TemplateVolume(&vm, volume) != nil
}

// tenantWantsAgain makes the tenant attach the volume to the VM's node
// again (the external-attacher's retry of the publish): a VolumeAttachment
// not attached yet. It returns a func that deletes it.
func tenantWantsAgain(t *testing.T, env *testenv.Env, ns, vm, claim string) func() {
	t.Helper()
	tc, err := clients.New(env.Tenants["guest"].Config)
	if err != nil {
		t.Fatal(err)
	}
	va := fixture.VolumeAttachment("va-retry-"+ns, "worker-"+ns, "tpv-"+claim+"-"+ns, fixture.AttachedToID(ns+"/"+vm))
	va.SetUID("")
	if err := tc.Create(context.Background(), va); err != nil {
		t.Fatal(err)
	}
	gone := func() {
		var cur storagev1.VolumeAttachment
		if tc.Get(context.Background(), client.ObjectKeyFromObject(va), &cur) == nil {
			cur.Finalizers = nil
			_ = tc.Update(context.Background(), &cur)
			_ = tc.Delete(context.Background(), &cur)
		}
	}
	t.Cleanup(gone)
	return gone
}

// A publish that timed out after addvolume (cozystack #2634), on real
// virt-api and virt-controller: the VM spec keeps the hot-plug, the VMI
// holds it Pending, and no tenant VolumeAttachment wants it. tether audit
// reports it held NotSeenTwice; tether fix sees it twice --stuck-publish-
// grace apart and removes it from the VM spec through the VM-level
// removevolume, after which real KubeVirt drops it from the VMI. A plan
// reviewed before the tenant wanted the volume again changes nothing, and
// the act's live re-check refuses a finding made before the tenant came
// back.
func TestReal_stuckPublish_removedOnlyWhenSeenTwiceAndUnwanted(t *testing.T) {
	stuckPublish(t, testenv.Get(t))
}

// The same on KubeVirt v1.7 (HotplugVolumes on, as the VM-level addvolume
// needs there).
func TestRealV17_stuckPublish_removedOnlyWhenSeenTwiceAndUnwanted(t *testing.T) {
	stuckPublish(t, startV17(t, "HotplugVolumes"))
}

func stuckPublish(t *testing.T, env *testenv.Env) {
	w := newWorldIn(t, env)
	w.pendingClaim("dv-stuck")
	w.vm("infra")
	w.publishTimedOut("infra", "dv-stuck")
	scope := tenant(t, w.Env, w.NS, "infra", "dv-stuck")
	grace := []string{"--stuck-publish-grace", "2s"}

	f := only(t, audit(t, w.Env, scope), check.StuckPublish, "dv-stuck")
	if f.Action.Type != string(check.VMRemoveVolume) || f.Action.Safe || f.Action.BlockedBy != string(drift.NotSeenTwice) ||
		!contains(f.Evidence, `lists hot-plug "dv-stuck" in phase`) || !contains(f.Evidence, "neither a VolumeAttachment nor the kubelet") {
		t.Fatalf("audit (one sighting): want VMRemoveVolume held NotSeenTwice with the VMI's and the tenant's word, got %+v", f)
	}

	// A plan seen twice, then the tenant wants the volume again.
	r := tether(t, w.Env, append(append([]string{"fix", "-o", "json"}, grace...), scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, `"planned": true`) || !strings.Contains(r.Stderr, "observing again in 2s") {
		t.Fatalf("fix -o json: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(r.Stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Items []struct {
			Finding drift.Finding `json:"finding"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &plan); err != nil || len(plan.Items) != 1 {
		t.Fatalf("plan: %v\n%s", err, r.Stdout)
	}
	stale := plan.Items[0].Finding
	wanted := tenantWantsAgain(t, w.Env, w.NS, "infra", "dv-stuck")
	r = tether(t, w.Env, append([]string{"fix", "--apply", "--plan", planFile}, scope...)...)
	if r.Code != 1 || !strings.Contains(r.Stdout, "changed-since-plan") || strings.Contains(r.Stdout, "Applied") || !w.vmLists("infra", "dv-stuck") {
		t.Fatalf("fix --apply --plan with the tenant attaching again: exit %d, VM lists it %v\n%s%s", r.Code, w.vmLists("infra", "dv-stuck"), r.Stdout, r.Stderr)
	}

	// The act's own live re-check, given the finding made before.
	p := check.DefaultPolicy()
	p.Scope.Namespaces = []string{w.NS}
	ex, err := act.NewExecutor(w.Env.Config, p, observe.Options{Namespace: w.NS,
		Tenants: []observe.TenantSource{{Name: "guest", Namespace: w.NS, Config: w.Env.Tenants["guest"].Config}}})
	if err != nil {
		t.Fatal(err)
	}
	stale.Action.Safe, stale.Action.BlockedBy = true, ""
	res := ex.Apply(context.Background(), stale, act.Evidence{})
	if res.Outcome != drift.Refused || !strings.Contains(res.Message, "live re-check") || !w.vmLists("infra", "dv-stuck") {
		t.Fatalf("act on a finding the tenant contradicts now: %+v; VM lists it %v", res, w.vmLists("infra", "dv-stuck"))
	}

	// Unwanted again: fix observes twice and removes it.
	wanted()
	r = tether(t, w.Env, append(append([]string{"fix", "--apply"}, grace...), scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if w.vmLists("infra", "dv-stuck") {
		t.Fatal("fix reported Applied, but the VM spec still lists dv-stuck")
	}
	testenv.Eventually(t, 60*time.Second, "dv-stuck gone from the VMI", func() (bool, error) {
		return w.Phase("infra", "dv-stuck") == "", nil
	})
	var claim corev1.PersistentVolumeClaim
	if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: "dv-stuck"}, &claim); err != nil || claim.DeletionTimestamp != nil {
		t.Fatalf("the claim itself must stay: %v", err)
	}
}
