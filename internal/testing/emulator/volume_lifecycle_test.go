package emulator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/emulator"
)

// vmiRecorder keeps every version of one VMI that a watch delivers, so a
// test sees each phase however briefly it lasted.
type vmiRecorder struct {
	mu   sync.Mutex
	seen []virtv1.VirtualMachineInstance
	stop context.CancelFunc
}

func (e *testEnv) record(t *testing.T, ns, name string) *vmiRecorder {
	t.Helper()
	scheme, err := emulator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(e.cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &virtv1.VirtualMachineInstanceList{}, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &vmiRecorder{stop: cancel}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if vmi, ok := ev.Object.(*virtv1.VirtualMachineInstance); ok {
				r.mu.Lock()
				r.seen = append(r.seen, *vmi.DeepCopy())
				r.mu.Unlock()
			}
		}
	}()
	t.Cleanup(cancel)
	return r
}

// phases lists the VMI phases seen, without repeats.
func (r *vmiRecorder) phases() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, v := range r.seen {
		if p := string(v.Status.Phase); len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}

// volumeSteps lists the states of one volume's status entry, without
// repeats: "phase[+pod][+uid][+target]", "-" once the entry is gone.
func (r *vmiRecorder) volumeSteps(volume string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, v := range r.seen {
		step := "-"
		for _, s := range v.Status.VolumeStatus {
			if s.Name != volume {
				continue
			}
			step = string(s.Phase)
			if s.HotplugVolume != nil && s.HotplugVolume.AttachPodName != "" {
				step += "+pod"
			}
			if s.HotplugVolume != nil && s.HotplugVolume.AttachPodUID != "" {
				step += "+uid"
			}
			if s.Target != "" {
				step += "+target"
			}
		}
		if len(out) == 0 || out[len(out)-1] != step {
			out = append(out, step)
		}
	}
	return out
}

// addVolume and removeVolume call the VM route and fail the test on error.
func (e *testEnv) addVolume(t *testing.T, ns, vm, name, claim string) {
	t.Helper()
	if err := virtapi.AddVolume(context.Background(), e.sub, virtapi.VM, ns, vm, addOpts(name, claim)); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) removeVolume(t *testing.T, ns, vm, name string) {
	t.Helper()
	if err := virtapi.RemoveVolume(context.Background(), e.sub, virtapi.VM, ns, vm, &virtv1.RemoveVolumeOptions{Name: name}); err != nil {
		t.Fatal(err)
	}
}

// vmWithHotplug starts VM vm1 with a PVC per claim and hot-plugs the first
// one (volume named like its claim); it returns the attachment pod.
func (e *testEnv) vmWithHotplug(t *testing.T, ns string, claims ...string) *corev1.Pod {
	t.Helper()
	e.vm(t, ns, "vm1")
	for _, c := range claims {
		e.pvc(t, ns, c)
	}
	e.runningVMI(t, ns, "vm1")
	e.addVolume(t, ns, "vm1", claims[0], claims[0])
	_, pod := e.attached(t, ns, "vm1", claims[0], claims[0])
	return pod
}

// inOrder reports whether want occurs in got as a subsequence.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// The VMI phases of KubeVirt v1.9.0: virt-controller sets Pending,
// Scheduling and Scheduled (pkg/virt-controller/watch/vmi/lifecycle.go),
// virt-handler Running (pkg/virt-handler/vm.go).
func TestVMIGoesThroughKubeVirtsPhases(t *testing.T) {
	e := needEnv(t)
	ns := e.namespace(t)
	rec := e.record(t, ns, "vm1")
	e.vm(t, ns, "vm1")
	e.runningVMI(t, ns, "vm1")
	time.Sleep(100 * time.Millisecond)
	if got, want := rec.phases(), []string{"", "Pending", "Scheduling", "Scheduled", "Running"}; !inOrder(got, want) || got[len(got)-1] != "Running" {
		t.Errorf("VMI phases %v, want %v in that order", got, want)
	}
}

// Add then remove one hot-plug volume and check every step of
// status.volumeStatus against KubeVirt v1.9.0: storage.go:137-192 (pod
// name, then UID once ready, AttachedToNode), virt-handler vm.go:497-531
// (MountedToPod, Ready with target; out of the domain, UnMountedFromPod),
// storage.go:316-352 and volume-hotplug.go:77-117 (entry and pod kept until
// unmounted).
func TestHotplugVolumeLifecycle(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.vm(t, ns, "vm1")
	e.pvc(t, ns, "data1")
	e.runningVMI(t, ns, "vm1")
	rec := e.record(t, ns, "vm1")
	e.addVolume(t, ns, "vm1", "data1", "data1")
	_, pod := e.attached(t, ns, "vm1", "data1", "data1")
	want := []string{"-", "Pending", "AttachedToNode+pod", "AttachedToNode+pod+uid", "MountedToPod+pod+uid", "Ready+pod+uid+target"}
	if got := rec.volumeSteps("data1"); !slices.Equal(got, want) {
		t.Errorf("add: volume steps %v, want %v", got, want)
	}
	vmi := e.getVMI(t, ns, "vm1")
	if st := hotplugStatus(vmi, "data1"); st.Reason != "VolumeReady" || st.Message != "Successfully attach hotplugged volume data1 to VM" {
		t.Errorf("ready status %+v", st)
	}
	if !slices.IsSortedFunc(vmi.Status.VolumeStatus, func(a, b virtv1.VolumeStatus) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("volume statuses not sorted by name: %+v", vmi.Status.VolumeStatus)
	}

	rec2 := e.record(t, ns, "vm1")
	var podGoneAfter []string
	e.removeVolume(t, ns, "vm1", "data1")
	eventually(t, 5*time.Second, func() error {
		err := e.cl.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("attachment pod %s still there: %v", pod.Name, err)
		}
		podGoneAfter = rec2.volumeSteps("data1")
		return nil
	})
	e.detached(t, ns, "vm1", "data1")
	if !inOrder(podGoneAfter, []string{"Ready+pod+uid+target", "Ready+pod+uid", "UnMountedFromPod+pod+uid"}) {
		t.Errorf("attachment pod deleted after %v, want it kept until UnMountedFromPod", podGoneAfter)
	}
	if got := rec2.volumeSteps("data1"); got[len(got)-1] != "-" {
		t.Errorf("remove: volume steps %v, want the entry gone at the end", got)
	}
}

// volume-hotplug.go:192-195 (KubeVirt v1.9.0): a hot-plug volume whose PVC
// is missing is a sync error before any attachment pod is created or
// deleted, so it freezes hot-plug work for the whole VMI.
func TestMissingPVCFreezesAttachmentPods(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	pod := e.vmWithHotplug(t, ns, "data1", "data2")
	e.addVolume(t, ns, "vm1", "late", "late-claim")
	e.addVolume(t, ns, "vm1", "data2", "data2")
	e.removeVolume(t, ns, "vm1", "data1")
	eventually(t, 3*time.Second, func() error {
		st := hotplugStatus(e.getVMI(t, ns, "vm1"), "late")
		if st == nil || st.Reason != "FailedPvcNotFound" {
			return fmt.Errorf("late: %+v", st)
		}
		return nil
	})
	consistently(t, 500*time.Millisecond, func() error {
		pods := e.attachmentPods(t, ns)
		if len(pods) != 1 || pods[0].Name != pod.Name {
			return fmt.Errorf("attachment pods changed while a PVC is missing: %d pods", len(pods))
		}
		vmi := e.getVMI(t, ns, "vm1")
		if st := hotplugStatus(vmi, "data2"); st == nil || st.Phase != virtv1.VolumePending || st.HotplugVolume.AttachPodName != "" {
			return fmt.Errorf("data2 attached while a PVC is missing: %+v", st)
		}
		if st := hotplugStatus(vmi, "data1"); st == nil {
			return fmt.Errorf("data1 status gone while its attachment pod is kept")
		}
		return nil
	})
	e.pvc(t, ns, "late-claim")
	e.attached(t, ns, "vm1", "late", "late-claim")
	e.attached(t, ns, "vm1", "data2", "data2")
	e.detached(t, ns, "vm1", "data1")
	eventually(t, 3*time.Second, func() error {
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("old attachment pod still there: %v", err)
		}
		return nil
	})
}

// lifecycle.go:78-84 (KubeVirt v1.9.0): a final VMI's attachment pods are
// deleted.
func TestFinalVMILosesItsAttachmentPods(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.pvc(t, ns, "data1")
	vmi := &virtv1.VirtualMachineInstance{}
	vmi.Namespace, vmi.Name = ns, "solo"
	if err := e.cl.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	e.runningVMI(t, ns, "solo")
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VMI, ns, "solo", addOpts("data1", "data1")); err != nil {
		t.Fatal(err)
	}
	e.attached(t, ns, "solo", "data1", "data1")
	// The VMI has no status subresource: its status is written with the object.
	eventually(t, 3*time.Second, func() error {
		vmi = e.getVMI(t, ns, "solo")
		vmi.Status.Phase = virtv1.Succeeded
		return e.cl.Update(ctx, vmi)
	})
	eventually(t, 3*time.Second, func() error {
		for _, p := range e.attachmentPods(t, ns) {
			if p.DeletionTimestamp == nil {
				return fmt.Errorf("attachment pod %s of a final VMI still there", p.Name)
			}
		}
		return nil
	})
	if got := e.getVMI(t, ns, "solo").Status.Phase; got != virtv1.Succeeded {
		t.Errorf("phase %q after a whole-object write, want Succeeded", got)
	}
}
