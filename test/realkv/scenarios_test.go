package realkv

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/kvtest"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// world is one test's namespace on real KubeVirt with clients.
type world struct{ *kvtest.World }

func newWorld(t *testing.T) *world { return newWorldIn(t, testenv.Get(t)) }

// newWorldIn makes the test's world in env: claims of 1Gi, phases awaited
// up to a minute.
func newWorldIn(t *testing.T, env *testenv.Env) *world {
	return &world{kvtest.NewWorld(t, env, "1Gi", 60*time.Second)}
}

func (w *world) claims(names ...string) { w.Claims(corev1.ReadWriteOnce, names...) }

// sharedClaims are ReadWriteMany, as a live migration needs
// (virt-handler's checkVolumesForMigration).
func (w *world) sharedClaims(names ...string) { w.Claims(corev1.ReadWriteMany, names...) }

func spec() kubevirtv1.VirtualMachineInstanceSpec {
	guest := resource.MustParse("64Mi")
	return kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: &guest}}}
}

// standaloneVMI creates a VMI without a VM (it passes virt-api's webhooks)
// and waits until it runs.
func (w *world) standaloneVMI(name string) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS}, Spec: spec()}
	if err := w.C.Create(context.Background(), vmi); err != nil {
		w.T.Fatal(err)
	}
	w.running(name)
}

// vm creates a running VM without volumes and waits for its VMI.
func (w *world) vm(name string) {
	strategy := kubevirtv1.RunStrategyAlways
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &strategy,
			Template:    &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: spec()},
		},
	}
	if err := w.C.Create(context.Background(), vm); err != nil {
		w.T.Fatal(err)
	}
	w.running(name)
}

func (w *world) running(name string) {
	testenv.Eventually(w.T, 90*time.Second, "VMI "+name+" running", func() (bool, error) {
		vmi, err := w.vmi(name)
		return err == nil && vmi.Status.Phase == kubevirtv1.Running, err
	})
}

func (w *world) vmi(name string) (*kubevirtv1.VirtualMachineInstance, error) {
	var vmi kubevirtv1.VirtualMachineInstance
	err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: name}, &vmi)
	return &vmi, err
}

// hotplug adds claim through virt-api's subresource on the given route
// and waits until it is Ready.
func (w *world) hotplug(kind virtapi.Kind, name, claim string) {
	w.addVolume(kind, name, claim)
	w.WaitPhase(name, claim, kubevirtv1.VolumeReady)
}

// addVolume adds claim through virt-api's subresource on the given route.
func (w *world) addVolume(kind virtapi.Kind, name, claim string) {
	w.T.Helper()
	w.AddVolumeWith(kind, name, fixture.AddVolumeOptions(claim))
}

func (w *world) removeFromVM(name, claim string) { w.RemoveVolume(virtapi.VM, name, claim) }

// A standalone VMI's hot-plug that no tenant wants is an orphan tether
// removes through the VMI route (the only route for a VMI without a VM,
// under either gate), and the removal completes through KubeVirt's real
// unplug lifecycle.
func TestReal_standaloneVMIOrphan_removedThroughTheVMIRoute(t *testing.T) {
	w := newWorld(t)
	w.claims("pvc-orphan")
	w.standaloneVMI("solo")
	w.hotplug(virtapi.VMI, "solo", "pvc-orphan")
	scope := tenant(t, w.Env, w.NS, "solo", "pvc-orphan")

	f := only(t, audit(t, w.Env, scope), "OrphanHotplugVolume", "pvc-orphan")
	if !f.Action.Safe || f.Action.Type != "VMIRemoveVolume" {
		t.Fatalf("standalone VMI orphan: want a safe VMIRemoveVolume, got %+v", f)
	}
	r := tether(t, w.Env, append([]string{"fix", "--apply"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// KubeVirt's own record: the entry and the attachment pod are gone.
	testenv.Eventually(t, 60*time.Second, "volume status entry gone", func() (bool, error) {
		return w.Phase("solo", "pvc-orphan") == "", nil
	})
	if fs := audit(t, w.Env, scope); len(fs) != 0 {
		t.Fatalf("audit after fix: %+v", fs)
	}
}

// Under KubeVirt 1.9's default gates (DeclarativeHotplugVolumes on,
// HotplugVolumes off) a VM-owned VMI's hot-plug that the VM spec lacks
// persists only while virt-controller does not sync it, here because the
// VM's updateVolumesStrategy is Migration (pkg/storage/hotplug/hotplug.go).
// No API call could remove it (VMI route 400, VM route 409): tether must
// report it with that diagnosis and never act.
func TestReal_declarativeSyncStopped_reportedNeverActedOn(t *testing.T) {
	w := newWorld(t)
	w.claims("pvc-stuck")
	w.vm("owned")
	w.hotplug(virtapi.VM, "owned", "pvc-stuck")
	w.PatchVM("owned", `{"spec":{"updateVolumesStrategy":"Migration"}}`)
	w.removeFromVM("owned", "pvc-stuck")
	// The VM spec no longer lists it; the VMI keeps it (no sync).
	time.Sleep(3 * time.Second)
	if p := w.Phase("owned", "pvc-stuck"); p != kubevirtv1.VolumeReady {
		t.Fatalf("setup: the VMI should keep the hot-plug while the sync is off, phase %q", p)
	}
	scope := tenant(t, w.Env, w.NS, "owned", "pvc-stuck")

	f := only(t, audit(t, w.Env, scope), "OrphanHotplugVolume", "pvc-stuck")
	if f.Action.Safe || f.Action.BlockedBy != "DeclarativeSync" {
		t.Fatalf("want a DeclarativeSync-held finding, got %+v", f)
	}
	if !contains(f.Evidence, "updateVolumesStrategy") {
		t.Fatalf("the diagnosis should name updateVolumesStrategy: %q", f.Evidence)
	}
	r := tether(t, w.Env, append([]string{"fix", "--apply"}, scope...)...)
	if strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix acted on a held finding: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if p := w.Phase("owned", "pvc-stuck"); p != kubevirtv1.VolumeReady {
		t.Fatalf("the hot-plug changed after fix: phase %q", p)
	}
}

// A hot-plug whose claim does not exist stalls all hot-plug work of the
// VMI in virt-controller (volume-hotplug.go): the volume stays Pending,
// and a second, valid hot-plug added afterwards never attaches.
// tether reports the dangling reference as critical.
func TestReal_missingHotplugClaim_isCriticalAndFreezesTheVMI(t *testing.T) {
	w := newWorld(t)
	w.claims("pvc-late")
	w.vm("frozen")
	sub, err := virtapi.NewSubresourceClient(w.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"pvc-missing", "pvc-late"} {
		if err := virtapi.AddVolume(context.Background(), sub, virtapi.VM, w.NS, "frozen", fixture.AddVolumeOptions(c)); err != nil {
			t.Fatalf("addvolume %s: %v", c, err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "both volumes in the VMI status", func() (bool, error) {
		return w.Phase("frozen", "pvc-missing") != "" && w.Phase("frozen", "pvc-late") != "", nil
	})
	time.Sleep(3 * time.Second)
	if p := w.Phase("frozen", "pvc-late"); p == kubevirtv1.VolumeReady {
		t.Fatalf("KubeVirt attached pvc-late although a missing claim should freeze the VMI's hot-plugs")
	}
	scope := []string{"-n", w.NS}
	fs := audit(t, w.Env, scope)
	critical := false
	for _, f := range fs {
		critical = critical || (f.Check == "DanglingVolumeReference" && f.Volume == "pvc-missing" && f.Severity == "critical")
	}
	if !critical {
		t.Fatalf("a missing hot-plug claim on a running VMI should be a critical DanglingVolumeReference, got %+v", fs)
	}
}
