package install_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// world is a namespace of the emulator world where the installed
// controller works.
type world struct {
	env *testenv.Env
	ns  string
	c   client.Client
	sub rest.Interface
}

func newWorld(t *testing.T, env *testenv.Env) *world {
	t.Helper()
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := virtapi.NewSubresourceClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Emulator.SetFeatureGates(context.Background(), "HotplugVolumes"); err != nil {
		t.Fatal(err)
	}
	return &world{env: env, ns: env.Namespace(t), c: c, sub: sub}
}

// seededWorld is a new namespace with two orphans (VMs vm-a and vm-b, each
// with a VMI-only hot-plug named prefix+"a" or "b") and two
// ServiceAccounts: "scraper", which the installation lets read metrics,
// and "stranger", which it does not.
func seededWorld(t *testing.T, env *testenv.Env, prefix string) (*world, [2]attachment) {
	t.Helper()
	w := newWorld(t, env)
	orphans := [2]attachment{{"vm-a", prefix + "a"}, {"vm-b", prefix + "b"}}
	for _, o := range orphans {
		w.orphan(t, o.vmi, o.volume)
	}
	serviceAccount(t, env, w.ns, "scraper")
	serviceAccount(t, env, w.ns, "stranger")
	return w, orphans
}

// orphan makes a running VM whose VMI has a VMI-only hot-plug volume: what
// nothing wants, OrphanHotplugVolume's finding.
func (w *world) orphan(t *testing.T, vm, volume string) {
	t.Helper()
	ctx := context.Background()
	// The VM's own disk: what protection keeps its finalizer on.
	root := fixture.PVC("root-"+vm, fixture.InNamespace(w.ns))
	root.UID = ""
	if err := w.c.Create(ctx, root); err != nil {
		t.Fatal(err)
	}
	obj := fixture.VM(vm, fixture.Running(), fixture.InNamespace(w.ns), fixture.WithVolume("root", root))
	obj.UID = ""
	if err := w.c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	w.env.WaitVMI(t, w.ns, vm, "running", func(v *kubevirtv1.VirtualMachineInstance) bool { return v.Status.Phase == kubevirtv1.Running })
	pvc := fixture.PVC(volume, fixture.InNamespace(w.ns))
	pvc.UID = ""
	if err := w.c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := virtapi.AddVolume(ctx, w.sub, virtapi.VMI, w.ns, vm, fixture.AddVolumeOptions(volume)); err != nil {
		t.Fatal(err)
	}
	w.env.WaitVMI(t, w.ns, vm, volume+" hot-plugged", func(v *kubevirtv1.VirtualMachineInstance) bool { return hotplugged(v, volume) })
}

func hotplugged(v *kubevirtv1.VirtualMachineInstance, volume string) bool {
	return slices.ContainsFunc(v.Status.VolumeStatus, func(s kubevirtv1.VolumeStatus) bool {
		return s.Name == volume && s.HotplugVolume != nil
	})
}

// inSpec: the VMI still asks for the volume (removevolume takes it out).
func inSpec(v *kubevirtv1.VirtualMachineInstance, volume string) bool {
	return slices.ContainsFunc(v.Spec.Volumes, func(s kubevirtv1.Volume) bool { return s.Name == volume })
}

// attachment is one seeded VMI/volume pair.
type attachment struct{ vmi, volume string }

func (a attachment) String() string { return a.vmi + "/" + a.volume }

// waitOneRepaired waits until the controller has removed exactly one of the
// two orphans (the blast radius allows one action) and returns it and the
// other.
func (w *world) waitOneRepaired(t *testing.T, a, b attachment) (fixed, held attachment) {
	t.Helper()
	testenv.Eventually(t, 3*time.Minute, "one of the orphans repaired", func() (bool, error) {
		goneA, goneB := !w.attached(t, a), !w.attached(t, b)
		switch {
		case goneA && goneB:
			t.Fatalf("both orphans were removed with a blast radius of one action")
		case goneA:
			fixed, held = a, b
		case goneB:
			fixed, held = b, a
		default:
			return false, fmt.Errorf("both still attached")
		}
		return true, nil
	})
	return fixed, held
}

func (w *world) attached(t *testing.T, a attachment) bool {
	t.Helper()
	v := w.env.VMI(w.ns, a.vmi)
	if v == nil {
		t.Fatalf("VMI %s/%s is gone", w.ns, a.vmi)
	}
	return inSpec(v, a.volume)
}

// checkStillAttached: the held orphan is untouched.
func (w *world) checkStillAttached(t *testing.T, a attachment) {
	t.Helper()
	if !w.attached(t, a) {
		t.Errorf("%s was removed although the breaker was tripped", a)
	}
}

// waitBreakerTripped waits for the breaker record in the controller's
// namespace to say tripped, and returns it.
func (w *world) waitBreakerTripped(t *testing.T, ns string) *v1alpha1.Finding {
	t.Helper()
	var rec v1alpha1.Finding
	testenv.Eventually(t, 2*time.Minute, "the breaker tripped in "+ns, func() (bool, error) {
		if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: findingrecord.BreakerName}, &rec); err != nil {
			return false, err
		}
		return rec.Status.Phase == v1alpha1.PhaseBlocked && rec.Status.Reason == findingrecord.BreakerTripped,
			fmt.Errorf("breaker %s %s", rec.Status.Phase, rec.Status.Reason)
	})
	return &rec
}

// records are the world's Finding records by name, with their UIDs and
// first-observed times.
func (w *world) records(t *testing.T) map[string]v1alpha1.Finding {
	t.Helper()
	var list v1alpha1.FindingList
	if err := w.c.List(context.Background(), &list, client.InNamespace(w.ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]v1alpha1.Finding{}
	for _, f := range list.Items {
		out[f.Name] = f
	}
	if len(out) == 0 {
		t.Fatalf("no Finding records in %s", w.ns)
	}
	return out
}

// checkRecordsKept: every record before is still there, the same object
// with the same first sighting.
func (w *world) checkRecordsKept(t *testing.T, before map[string]v1alpha1.Finding) {
	t.Helper()
	after := w.records(t)
	for name, b := range before {
		a, ok := after[name]
		switch {
		case !ok:
			t.Errorf("record %s/%s is gone after the upgrade", w.ns, name)
		case a.UID != b.UID:
			t.Errorf("record %s/%s was replaced by the upgrade", w.ns, name)
		case !a.Status.FirstObserved.Equal(b.Status.FirstObserved):
			t.Errorf("record %s/%s: first observed %v, was %v", w.ns, name, a.Status.FirstObserved, b.Status.FirstObserved)
		}
	}
}

// waitProtected waits until protection has put its finalizer on the PVC.
func (w *world) waitProtected(t *testing.T, pvc string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "tether.dev/in-use on "+pvc, func() (bool, error) {
		var p corev1.PersistentVolumeClaim
		if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: w.ns, Name: pvc}, &p); err != nil {
			return false, err
		}
		return slices.Contains(p.Finalizers, "tether.dev/in-use"), fmt.Errorf("finalizers %v", p.Finalizers)
	})
}

// checkNoFinalizers: no PVC and no record of the world carries a tether
// finalizer.
func (w *world) checkNoFinalizers(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var pvcs corev1.PersistentVolumeClaimList
	if err := w.c.List(ctx, &pvcs, client.InNamespace(w.ns)); err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, p := range pvcs.Items {
		for _, f := range p.Finalizers {
			if strings.Contains(f, "tether.dev") {
				found = append(found, "PVC "+p.Name+": "+f)
			}
		}
	}
	var recs v1alpha1.FindingList
	if err := w.c.List(ctx, &recs); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs.Items {
		if len(r.Finalizers) > 0 {
			found = append(found, "Finding "+r.Namespace+"/"+r.Name+": "+strings.Join(r.Finalizers, ","))
		}
	}
	if len(found) > 0 {
		t.Errorf("finalizers left after the uninstall:\n%s", strings.Join(found, "\n"))
	}
}
