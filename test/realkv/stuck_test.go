package realkv

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// An unplug with virt-handler down on the VMI's node: real virt-controller
// takes the volume out of the VMI spec (the declarative sync of the VM's
// removevolume) but keeps its status entry, Ready, and its attachment pod
// until virt-handler has unmounted it (storage.go keeps the status while
// the pod exists; volume-hotplug.go volumeReadyForPodDelete refuses to
// delete the pod of a Ready volume). tether reports StuckHotplugPhase with
// that node's virt-handler as the component expected to act, offers no
// deletion of the live VMI's attachment pod, and fix --apply changes
// nothing. Once the handler is back, the unplug completes and the finding
// is gone.
func TestReal_stuckUnplug_handlerDown_namesTheHandler(t *testing.T) {
	w := newWorld(t)
	w.claims("pvc-data")
	w.vm("guest")
	w.hotplug(virtapi.VM, "guest", "pvc-data")
	vmi, err := w.vmi("guest")
	if err != nil {
		t.Fatal(err)
	}
	node := vmi.Status.NodeName
	w.Env.Real.SetHandlerDown(node, true)
	t.Cleanup(func() { w.Env.Real.SetHandlerDown(node, false) })

	w.removeFromVM("guest", "pvc-data")
	testenv.Eventually(t, 30*time.Second, "virt-controller takes pvc-data out of the VMI spec", func() (bool, error) {
		vmi, err := w.vmi("guest")
		return err == nil && !hasVolume(vmi.Spec.Volumes, "pvc-data"), err
	})
	pod := w.attachmentPod("pvc-data")
	// Long enough for a running virt-handler to have unmounted it (one step
	// per 100 ms pass) and virt-controller to have deleted the pod.
	time.Sleep(3 * time.Second)
	if p := w.Phase("guest", "pvc-data"); p != kubevirtv1.VolumeReady {
		t.Fatalf("setup: with the handler down the unplugged volume should stay Ready, phase %q", p)
	}
	if now := w.attachmentPod("pvc-data"); now.UID != pod.UID || now.DeletionTimestamp != nil {
		t.Fatalf("setup: the attachment pod %s should stay, not being deleted", pod.Name)
	}

	scope := []string{"-n", w.NS}
	fs := audit(t, w.Env, append([]string{"--stuck-phase-grace", "1s"}, scope...))
	f := only(t, fs, check.StuckHotplugPhase, "pvc-data")
	if f.Object.Kind != "VirtualMachineInstance" || f.Object.Name != "guest" || f.Action.Type != "None" || f.Action.BlockedBy != string(check.WaitsForKubeVirt) {
		t.Fatalf("want a report-only finding on VMI guest held by %s, got %+v", check.WaitsForKubeVirt, f)
	}
	if !contains(f.Evidence, "expected to act next: virt-handler on node "+node) {
		t.Fatalf("the evidence should name virt-handler on node %s: %q", node, f.Evidence)
	}
	if !contains(f.Evidence, "stays Ready") || !strings.Contains(f.Action.Remedy, "virt-handler on node "+node) ||
		!strings.Contains(f.Action.Remedy, "do not delete the attachment pods") {
		t.Fatalf("the finding should say the volume stays Ready, where to look and not to delete the pod: %q, remedy %q", f.Evidence, f.Action.Remedy)
	}
	for _, g := range fs {
		if g.Action.Type == string(check.DeleteAttachmentPod) || strings.Contains(g.Action.Remedy, "kubectl delete pod "+pod.Name) {
			t.Fatalf("a finding offers to delete attachment pod %s of the live VMI: %+v", pod.Name, g)
		}
	}

	fixChangesNothing(t, w.Env, scope)
	if now := w.attachmentPod("pvc-data"); now.UID != pod.UID || now.DeletionTimestamp != nil {
		t.Fatalf("fix --apply touched the attachment pod %s", pod.Name)
	}
	if p := w.Phase("guest", "pvc-data"); p != kubevirtv1.VolumeReady {
		t.Fatalf("the volume status changed after fix --apply: phase %q", p)
	}

	w.Env.Real.SetHandlerDown(node, false)
	testenv.Eventually(t, 60*time.Second, "the unplug completes with the handler back", func() (bool, error) {
		return w.Phase("guest", "pvc-data") == "", nil
	})
	for _, g := range audit(t, w.Env, append([]string{"--stuck-phase-grace", "1s"}, scope...)) {
		if g.Check == check.StuckHotplugPhase {
			t.Fatalf("a finding is left after the unplug completed: %+v", g)
		}
	}
}

func hasVolume(vols []kubevirtv1.Volume, name string) bool {
	for _, v := range vols {
		if v.Name == name {
			return true
		}
	}
	return false
}

// attachmentPod is the one hot-plug attachment pod of the namespace that
// mounts volume vol.
func (w *world) attachmentPod(vol string) *corev1.Pod {
	w.T.Helper()
	pods := w.AttachmentPods(vol)
	if len(pods) != 1 {
		w.T.Fatalf("want one attachment pod of %s, got %d", vol, len(pods))
	}
	return &pods[0]
}
