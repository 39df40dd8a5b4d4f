package conformance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/realkubevirt"
)

// Under the default gates, the VMI route refuses a VM-owned VMI, and the VM
// route refuses to remove a volume its template lacks.
func TestConformance_refusals(t *testing.T) {
	same(t, both(t, func(t *testing.T, w *kvWorld, ns string) string {
		w.vm(t, ns, "vm")
		ctx := context.Background()
		vmiRoute := virtapi.RemoveVolume(ctx, w.sub, virtapi.VMI, ns, "vm", &kubevirtv1.RemoveVolumeOptions{Name: "absent"})
		vmRoute := virtapi.RemoveVolume(ctx, w.sub, virtapi.VM, ns, "vm", &kubevirtv1.RemoveVolumeOptions{Name: "absent"})
		missing := virtapi.RemoveVolume(ctx, w.sub, virtapi.VMI, ns, "nosuch", &kubevirtv1.RemoveVolumeOptions{Name: "absent"})
		return fmt.Sprintf("VMI route on a VM-owned VMI %s; VM route, volume absent %s; VMI missing %s",
			answer(vmiRoute), answer(vmRoute), answer(missing))
	}))
}

// The VMI CRD has no status subresource: status is written with the object.
func TestConformance_vmiHasNoStatusSubresource(t *testing.T) {
	same(t, both(t, func(t *testing.T, w *kvWorld, ns string) string {
		w.standalone(t, ns, "solo")
		vmi, err := w.vmi(ns, "solo")
		if err != nil {
			t.Fatal(err)
		}
		err = w.c.Status().Update(context.Background(), vmi)
		return "status subresource write: " + answer(err)
	}))
}

// A hot-plug through the VM route attaches through KubeVirt's phases, with
// the attachment pod's UID recorded by the time the volume is Ready, and
// an unplug keeps the entry until virt-handler has unmounted it and the
// attachment pod is gone.
func TestConformance_hotplugAndUnplugLifecycle(t *testing.T) {
	same(t, both(t, func(t *testing.T, w *kvWorld, ns string) string {
		ctx := context.Background()
		w.claim(t, ns, "data")
		w.vm(t, ns, "vm")
		attach := w.hotplugReady(t, ns, "vm", "data")
		s := w.status(ns, "vm", "data")
		uidSet := s.HotplugVolume != nil && s.HotplugVolume.AttachPodUID != ""
		pods := w.attachmentPods(t, ns)
		from := w.resourceVersion(t, ns, "vm")
		if err := virtapi.RemoveVolume(ctx, w.sub, virtapi.VM, ns, "vm", &kubevirtv1.RemoveVolumeOptions{Name: "data"}); err != nil {
			t.Fatal(err)
		}
		detach := w.watchPhases(t, ns, "vm", "data", from, func(s *kubevirtv1.VolumeStatus) bool { return s == nil })
		eventually(t, 30*time.Second, "attachment pod deleted", func() bool { return w.attachmentPods(t, ns) == 0 })
		return fmt.Sprintf("attach ends %s, UID set when Ready %v, attachment pods %d; unplug passes through UnMountedFromPod %v, ends with the entry gone",
			last(attach), uidSet, pods, contains(detach, kubevirtv1.HotplugVolumeUnMounted))
	}))
}

// With virt-handler down on the VMI's node, an unplug accepted by the API
// never completes: the entry stays Ready and the attachment pod stays.
// Once the handler is back, the unplug completes.
func TestConformance_unplugWithHandlerDown(t *testing.T) {
	same(t, both(t, func(t *testing.T, w *kvWorld, ns string) string {
		ctx := context.Background()
		w.claim(t, ns, "data")
		w.vm(t, ns, "vm")
		w.hotplugReady(t, ns, "vm", "data")
		vmi, _ := w.vmi(ns, "vm")
		node := vmi.Status.NodeName
		w.handler.SetHandlerDown(node, true)
		defer w.handler.SetHandlerDown(node, false)
		if err := virtapi.RemoveVolume(ctx, w.sub, virtapi.VM, ns, "vm", &kubevirtv1.RemoveVolumeOptions{Name: "data"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		s := w.status(ns, "vm", "data")
		stuck := "gone"
		if s != nil {
			stuck = string(s.Phase)
		}
		pods := w.attachmentPods(t, ns)
		from := w.resourceVersion(t, ns, "vm")
		w.handler.SetHandlerDown(node, false)
		w.watchPhases(t, ns, "vm", "data", from, func(s *kubevirtv1.VolumeStatus) bool { return s == nil })
		return fmt.Sprintf("with the handler down the entry is %s and attachment pods %d; with it back the unplug completes", stuck, pods)
	}))
}

// A standalone VMI takes hot-plugs through the VMI route.
func TestConformance_standaloneVMIRoute(t *testing.T) {
	same(t, both(t, func(t *testing.T, w *kvWorld, ns string) string {
		w.claim(t, ns, "data")
		w.standalone(t, ns, "solo")
		from := w.resourceVersion(t, ns, "solo")
		err := virtapi.AddVolume(context.Background(), w.sub, virtapi.VMI, ns, "solo", fixture.AddVolumeOptions("data"))
		phases := w.watchPhases(t, ns, "solo", "data", from, func(s *kubevirtv1.VolumeStatus) bool { return s != nil && s.Phase == kubevirtv1.VolumeReady })
		return fmt.Sprintf("VMI route addvolume %s, ends %s", answer(err), last(phases))
	}))
}

// A volume unplugged and plugged again under the same name while its old
// attachment pod is still in the API (held by a finalizer): KubeVirt v1.9.0
// reads the re-plugged volume's phase from its claim (no pod is current:
// the old one is being deleted) and makes no new attachment pod while the
// old one, which mounts the same volumes, stays (needsHandleHotplug,
// volume-hotplug.go:41-50); once the old pod is gone the volume is Ready on
// a new pod.
func TestConformance_replugWhileOldPodStays(t *testing.T) {
	same(t, both(t, func(t *testing.T, w *kvWorld, ns string) string {
		ctx := context.Background()
		w.claim(t, ns, "data")
		w.standalone(t, ns, "solo")
		from := w.resourceVersion(t, ns, "solo")
		if err := virtapi.AddVolume(ctx, w.sub, virtapi.VMI, ns, "solo", fixture.AddVolumeOptions("data")); err != nil {
			t.Fatal(err)
		}
		w.watchPhases(t, ns, "solo", "data", from, func(s *kubevirtv1.VolumeStatus) bool { return s != nil && s.Phase == kubevirtv1.VolumeReady })
		old := w.status(ns, "solo", "data").HotplugVolume.AttachPodName
		if err := realkubevirt.HoldPod(ctx, w.cs, ns, old, true); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = realkubevirt.HoldPod(context.Background(), w.cs, ns, old, false) })
		if err := virtapi.RemoveVolume(ctx, w.sub, virtapi.VMI, ns, "solo", &kubevirtv1.RemoveVolumeOptions{Name: "data"}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the old pod deleted and data Detaching", func() bool {
			p, err := w.cs.CoreV1().Pods(ns).Get(ctx, old, metav1.GetOptions{})
			s := w.status(ns, "solo", "data")
			return err == nil && p.DeletionTimestamp != nil && s != nil && s.Phase == kubevirtv1.HotplugVolumeDetaching
		})
		if err := virtapi.AddVolume(ctx, w.sub, virtapi.VMI, ns, "solo", fixture.AddVolumeOptions("data")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		held := "gone"
		if s := w.status(ns, "solo", "data"); s != nil {
			held = string(s.Phase)
		}
		pods := w.attachmentPods(t, ns)
		if err := realkubevirt.HoldPod(ctx, w.cs, ns, old, false); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "data Ready on a new pod", func() bool {
			s := w.status(ns, "solo", "data")
			return s != nil && s.Phase == kubevirtv1.VolumeReady && s.HotplugVolume != nil && s.HotplugVolume.AttachPodName != old
		})
		return fmt.Sprintf("while the old pod stays the re-plugged volume is %s with %d new attachment pods; once it is gone, Ready on a new pod", held, pods)
	}))
}

// hotplugReady adds claim to the VM through the VM route and returns the
// phases seen until it is Ready.
func (w *kvWorld) hotplugReady(t *testing.T, ns, vm, claim string) []kubevirtv1.VolumePhase {
	t.Helper()
	from := w.resourceVersion(t, ns, vm)
	if err := virtapi.AddVolume(context.Background(), w.sub, virtapi.VM, ns, vm, fixture.AddVolumeOptions(claim)); err != nil {
		t.Fatal(err)
	}
	return w.watchPhases(t, ns, vm, claim, from, func(s *kubevirtv1.VolumeStatus) bool { return s != nil && s.Phase == kubevirtv1.VolumeReady })
}

// resourceVersion is the VMI's resourceVersion ("" when it cannot be
// read): taken before an action, watchPhases from it sees every status the
// action led to.
func (w *kvWorld) resourceVersion(t *testing.T, ns, name string) string {
	t.Helper()
	vmi, err := w.vmi(ns, name)
	if err != nil {
		return ""
	}
	return vmi.ResourceVersion
}

// watchPhases watches the VMI from resourceVersion from until done says
// the volume's status is where it should end, and returns the distinct
// phases of every version in between ("" for no entry). A watch, not a
// poll: a phase that lasts a few milliseconds is still seen.
func (w *kvWorld) watchPhases(t *testing.T, ns, vmi, vol, from string, done func(*kubevirtv1.VolumeStatus) bool) []kubevirtv1.VolumePhase {
	t.Helper()
	wc, err := client.NewWithWatch(w.env.Config(), client.Options{Scheme: clients.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wi, err := wc.Watch(ctx, &kubevirtv1.VirtualMachineInstanceList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": vmi},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: from}})
	if err != nil {
		t.Fatal(err)
	}
	defer wi.Stop()
	var seen []kubevirtv1.VolumePhase
	for ev := range wi.ResultChan() {
		obj, ok := ev.Object.(*kubevirtv1.VirtualMachineInstance)
		if !ok {
			continue // a bookmark or an error status
		}
		var s *kubevirtv1.VolumeStatus
		if ev.Type != watch.Deleted {
			for i := range obj.Status.VolumeStatus {
				if obj.Status.VolumeStatus[i].Name == vol {
					s = &obj.Status.VolumeStatus[i]
				}
			}
		}
		p := kubevirtv1.VolumePhase("")
		if s != nil {
			p = s.Phase
		}
		if len(seen) == 0 || seen[len(seen)-1] != p {
			seen = append(seen, p)
		}
		if done(s) {
			return seen
		}
	}
	t.Fatalf("volume %s of %s/%s: phases seen %v, never done", vol, ns, vmi, seen)
	return nil
}

func (w *kvWorld) attachmentPods(t *testing.T, ns string) int {
	pods, err := w.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubevirt.io=hotplug-disk"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n
}

func last(ps []kubevirtv1.VolumePhase) string {
	if len(ps) == 0 {
		return "nothing"
	}
	return string(ps[len(ps)-1])
}

func contains(ps []kubevirtv1.VolumePhase, p kubevirtv1.VolumePhase) bool {
	return strings.Contains(fmt.Sprint(ps), string(p))
}
