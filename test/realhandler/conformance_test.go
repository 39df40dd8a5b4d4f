package realhandler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/kvtest"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// transitions records, from a watch of one VMI, each change of one
// volume's status: its phase and reason, "-" once the entry is gone.
type transitions struct {
	mu   sync.Mutex
	seen []string
}

func (r *transitions) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 || r.seen[len(r.seen)-1] != s {
		r.seen = append(r.seen, s)
	}
}

func (r *transitions) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// record watches VMI name and records volume vol's transitions until the
// test ends.
func (w *world) record(name, vol string) *transitions {
	ctx, cancel := context.WithCancel(context.Background())
	w.T.Cleanup(cancel)
	r := &transitions{}
	watch, err := w.Env.Dynamic.Resource(vmiGVR).Namespace(w.NS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		w.T.Fatal(err)
	}
	go func() {
		defer watch.Stop()
		for ev := range watch.ResultChan() {
			u, ok := ev.Object.(interface{ UnstructuredContent() map[string]any })
			if !ok {
				continue
			}
			var vmi kubevirtv1.VirtualMachineInstance
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &vmi) != nil {
				continue
			}
			state := "-"
			for _, s := range vmi.Status.VolumeStatus {
				if s.Name == vol {
					state = string(s.Phase) + "/" + s.Reason
				}
			}
			if state != "-" || len(r.list()) > 0 {
				r.add(state)
			}
		}
	}()
	return r
}

// bareVMI starts a standalone VMI without a guest OS on node (the real
// node or a kwok node of the emulated handler) and waits until it runs.
func (w *world) bareVMI(name, node string) {
	no := false
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS}, Spec: kubevirtv1.VirtualMachineInstanceSpec{
		NodeSelector: map[string]string{"kubernetes.io/hostname": node},
		Domain: kubevirtv1.DomainSpec{
			Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
			Devices:   kubevirtv1.Devices{AutoattachPodInterface: &no},
		},
	}}
	if err := w.C.Create(context.Background(), vmi); err != nil {
		w.T.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		switch w.vmi(name).Status.Phase {
		case kubevirtv1.Running:
			return
		case kubevirtv1.Failed:
			w.T.Fatalf("VMI %s failed\n%s", name, podLogs(w.Env, w.NS, "virt-launcher-"+name))
		}
		time.Sleep(500 * time.Millisecond)
	}
	w.T.Fatalf("VMI %s did not run on %s: %+v\n%s", name, node, w.vmi(name).Status, w.pods())
}

// pods describes the namespace's pods, for a failure message.
func (w *world) pods() string {
	var pods corev1.PodList
	if err := w.C.List(context.Background(), &pods, client.InNamespace(w.NS)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s node=%q phase=%s\n", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, "  container %s ready=%v restarts=%d", c.Name, c.Ready, c.RestartCount)
			if s := c.State.Waiting; s != nil {
				fmt.Fprintf(&b, " waiting %s: %s", s.Reason, s.Message)
			}
			if s := c.State.Terminated; s != nil {
				fmt.Fprintf(&b, " terminated %d %s: %s", s.ExitCode, s.Reason, s.Message)
			}
			if s := c.LastTerminationState.Terminated; s != nil {
				fmt.Fprintf(&b, " last exit %d %s: %s", s.ExitCode, s.Reason, s.Message)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// handlerPhases are the volume phases virt-handler writes
// (updateHotplugVolumeStatus and updateVolumeStatusesFromDomain in
// pkg/virt-handler/vm.go); virt-controller writes the others (Pending,
// Bound, AttachedToNode, Detaching), and the entry's removal, from the
// attachment pod's lifecycle, which kwok and a kubelet time differently.
var handlerPhases = map[kubevirtv1.VolumePhase]bool{
	kubevirtv1.HotplugVolumeMounted: true, kubevirtv1.VolumeReady: true, kubevirtv1.HotplugVolumeUnMounted: true,
}

// handlerWrites keeps the transitions into a phase virt-handler writes.
func handlerWrites(seen []string) []string {
	var out []string
	for _, s := range seen {
		phase, _, _ := strings.Cut(s, "/")
		if handlerPhases[kubevirtv1.VolumePhase(phase)] {
			out = append(out, s)
		}
	}
	return out
}

// sides runs one sequence on a VMI of the real handler and one of the
// emulated handler (on a kwok node), each with a claim of its own, and
// returns the transitions each recorded.
func (w *world) sides(sequence func(vmi, claim string)) (real, emu []string) {
	w.claims("c-real", "c-emu")
	runs := map[string]*transitions{}
	for _, side := range []struct{ vmi, node, claim string }{
		{"real", w.Env.Node.Name, "c-real"},
		{"emu", w.Env.Real.Nodes()[0], "c-emu"},
	} {
		w.bareVMI(side.vmi, side.node)
		runs[side.vmi] = w.record(side.vmi, side.claim)
		sequence(side.vmi, side.claim)
		time.Sleep(time.Second)
	}
	real, emu = runs["real"].list(), runs["emu"].list()
	w.T.Logf("real virt-handler: %s", strings.Join(real, " → "))
	w.T.Logf("emulated:          %s", strings.Join(emu, " → "))
	return real, emu
}

// sameHandlerWrites fails the test when the two sides' handler-written
// transitions differ.
func sameHandlerWrites(t *testing.T, real, emu []string) {
	t.Helper()
	if r, e := handlerWrites(real), handlerWrites(emu); !slices.Equal(r, e) {
		t.Errorf("the emulated handler writes other volume phases than the real one:\nreal %v\nemu  %v", r, e)
	}
}

// The emulated virt-handler (package virthandler, the fast world of every
// other suite) against real virt-handler v1.9, on the same sequences in one
// world: the volume-status transitions the handler writes for a hot-plug
// added and removed must be the same. Those virt-controller writes differ
// with the attachment pod's lifecycle (listed in docs/development.md).
func TestConformance_emulatedHandler_addAndRemove(t *testing.T) {
	w := newWorld(t)
	real, emu := w.sides(func(vmi, claim string) {
		w.addVolume(virtapi.VMI, vmi, claim)
		w.WaitPhase(vmi, claim, kubevirtv1.VolumeReady)
		w.RemoveVolume(virtapi.VMI, vmi, claim)
		w.WaitPhase(vmi, claim, "")
	})
	sameHandlerWrites(t, real, emu)
}

// An operator deletes the attachment pod of a Ready hot-plug of a running
// VMI. Whatever real KubeVirt does, the emulated handler must write the
// same phases.
func TestConformance_emulatedHandler_attachmentPodDeleted(t *testing.T) {
	w := newWorld(t)
	real, emu := w.sides(func(vmi, claim string) {
		w.addVolume(virtapi.VMI, vmi, claim)
		w.WaitPhase(vmi, claim, kubevirtv1.VolumeReady)
		for _, p := range w.AttachmentPods(claim) {
			if err := w.C.Delete(context.Background(), &p); err != nil {
				w.T.Fatal(err)
			}
		}
		time.Sleep(20 * time.Second)
		w.T.Logf("%s: %d attachment pods of %s 20 s after the deletion, volume phase %q", vmi, len(w.AttachmentPods(claim)), claim, w.Phase(vmi, claim))
	})
	sameHandlerWrites(t, real, emu)
	// KubeVirt has made new pods and the volumes are Ready: tether offers
	// nothing to do on either side.
	noSafeAction(t, kvtest.Audit(t, binDir, w.Env, []string{"-n", w.NS}), "after KubeVirt replaced a deleted attachment pod")
}

// A hot-plug added while the VMI's virt-handler is down, then the handler
// back: both sides stay in the phase virt-controller wrote while nobody
// mounts, and write the same phases once the handler returns.
func TestConformance_emulatedHandler_attachWhileHandlerDown(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	whileDown := map[string]kubevirtv1.VolumePhase{}
	real, emu := w.sides(func(vmi, claim string) {
		down := func(d bool) {
			if vmi == "real" {
				if err := w.Env.Handler.SetDown(ctx, d); err != nil {
					w.T.Fatal(err)
				}
				return
			}
			w.Env.Real.SetHandlerDown(w.Env.Real.Nodes()[0], d)
		}
		down(true)
		w.addVolume(virtapi.VMI, vmi, claim)
		testenv.Eventually(w.T, 2*time.Minute, "the attachment pod of "+claim+" running", func() (bool, error) {
			pods := w.AttachmentPods(claim)
			return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning, nil
		})
		time.Sleep(5 * time.Second)
		whileDown[vmi] = w.Phase(vmi, claim)
		down(false)
		w.WaitPhase(vmi, claim, kubevirtv1.VolumeReady)
	})
	if whileDown["real"] != kubevirtv1.HotplugVolumeAttachedToNode || whileDown["emu"] != whileDown["real"] {
		t.Errorf("with the handler down: real %q, emulated %q; want both AttachedToNode", whileDown["real"], whileDown["emu"])
	}
	sameHandlerWrites(t, real, emu)
}

// bareVM is a running VM of bareVMI's spec on node.
func (w *world) bareVM(name, node string) {
	no, always := false, kubevirtv1.RunStrategyAlways
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS}, Spec: kubevirtv1.VirtualMachineSpec{
		RunStrategy: &always,
		Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			Domain: kubevirtv1.DomainSpec{
				Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
				Devices:   kubevirtv1.Devices{AutoattachPodInterface: &no},
			},
		}},
	}}
	if err := w.C.Create(context.Background(), vm); err != nil {
		w.T.Fatal(err)
	}
	w.waitRunning(name)
}

// waitRunning waits until VMI name runs.
func (w *world) waitRunning(name string) {
	w.T.Helper()
	testenv.Eventually(w.T, 3*time.Minute, "VMI "+name+" Running", func() (bool, error) {
		var v kubevirtv1.VirtualMachineInstance
		err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: name}, &v)
		return err == nil && v.Status.Phase == kubevirtv1.Running, client.IgnoreNotFound(err)
	})
}

// A VM with a persisted hot-plug stopped and started again: the new VMI
// gets the volume from the VM spec, and both handlers write the same
// phases for it. (The guest-less VM: a kernel-boot VMI started with a
// hot-plug in its spec never starts on v1.9.0, see docs/development.md.)
func TestConformance_emulatedHandler_vmStopStart(t *testing.T) {
	w := newWorld(t)
	w.claims("c-real", "c-emu")
	runs := map[string]*transitions{}
	for _, side := range []struct{ vm, node, claim string }{
		{"real", w.Env.Node.Name, "c-real"},
		{"emu", w.Env.Real.Nodes()[0], "c-emu"},
	} {
		w.bareVM(side.vm, side.node)
		runs[side.vm] = w.record(side.vm, side.claim)
		w.addVolume(virtapi.VM, side.vm, side.claim)
		w.WaitPhase(side.vm, side.claim, kubevirtv1.VolumeReady)
		w.SetRunStrategy(side.vm, kubevirtv1.RunStrategyHalted)
		testenv.Eventually(t, 3*time.Minute, "the VMI of "+side.vm+" gone", func() (bool, error) {
			err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: side.vm}, &kubevirtv1.VirtualMachineInstance{})
			return err != nil, client.IgnoreNotFound(err)
		})
		w.SetRunStrategy(side.vm, kubevirtv1.RunStrategyAlways)
		w.waitRunning(side.vm)
		w.WaitPhase(side.vm, side.claim, kubevirtv1.VolumeReady)
		time.Sleep(time.Second)
	}
	real, emu := runs["real"].list(), runs["emu"].list()
	t.Logf("real virt-handler: %s", strings.Join(real, " → "))
	t.Logf("emulated:          %s", strings.Join(emu, " → "))
	sameHandlerWrites(t, real, emu)
}
