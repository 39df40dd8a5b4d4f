package realhandler

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/kvtest"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// handlerDown stops real virt-handler until the test ends.
func (w *world) handlerDown() {
	w.t.Helper()
	if err := w.env.Handler.SetDown(context.Background(), true); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		if err := w.env.Handler.SetDown(context.Background(), false); err != nil {
			w.t.Errorf("restarting virt-handler: %v", err)
		}
	})
}

// attachmentPods are the namespace's attachment pods that mount vol.
func (w *world) attachmentPods(vol string) []corev1.Pod {
	w.t.Helper()
	var list corev1.PodList
	if err := w.c.List(context.Background(), &list, client.InNamespace(w.ns), client.MatchingLabels{"kubevirt.io": "hotplug-disk"}); err != nil {
		w.t.Fatal(err)
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
		return !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vol })
	})
}

// The fault realkv plays with the emulated handler
// (TestReal_stuckUnplug_handlerDown_namesTheHandler), made real: an unplug
// while real virt-handler is gone from the VMI's node. KubeVirt keeps the
// volume Ready and its attachment pod (nobody unmounts it); tether reports
// StuckHotplugPhase naming that node's virt-handler, offers no deletion of
// the live VMI's attachment pod, and fix --apply changes nothing. Once
// virt-handler is back the unplug completes and the finding is gone.
func TestReal_unplugWhileTheRealHandlerIsDown(t *testing.T) {
	w := newWorld(t)
	w.claims("data")
	w.bareVMI("g", w.env.Node.Name)
	w.addVolume(virtapi.VMI, "g", "data")
	w.waitPhase("g", "data", kubevirtv1.VolumeReady)
	pods := w.attachmentPods("data")
	if len(pods) != 1 {
		t.Fatalf("want one attachment pod of data, got %d", len(pods))
	}
	w.handlerDown()
	w.removeVolume(virtapi.VMI, "g", "data")
	time.Sleep(5 * time.Second)
	if p := w.phase("g", "data"); p != kubevirtv1.VolumeReady {
		t.Fatalf("with virt-handler down the unplugged volume stays Ready on real KubeVirt; phase %q", p)
	}
	if now := w.attachmentPods("data"); len(now) != 1 || now[0].UID != pods[0].UID || now[0].DeletionTimestamp != nil {
		t.Fatalf("with virt-handler down the attachment pod %s stays", pods[0].Name)
	}

	scope := []string{"-n", w.ns}
	fs := kvtest.Audit(t, binDir, w.env, append([]string{"--stuck-phase-grace", "1s"}, scope...))
	f := kvtest.Only(t, fs, check.StuckHotplugPhase, "data")
	if f.Action.Type != "None" || f.Action.BlockedBy != string(check.WaitsForKubeVirt) {
		t.Fatalf("want a report-only finding held by %s, got %+v", check.WaitsForKubeVirt, f)
	}
	if !slices.ContainsFunc(f.Evidence, func(e string) bool { return strings.Contains(e, "virt-handler on node "+w.env.Node.Name) }) {
		t.Fatalf("the evidence should name virt-handler on node %s: %q", w.env.Node.Name, f.Evidence)
	}
	for _, g := range fs {
		if g.Action.Type == string(check.DeleteAttachmentPod) {
			t.Fatalf("a finding offers to delete the live VMI's attachment pod: %+v", g)
		}
	}
	r := tether(t, w.env, append([]string{"fix", "--apply", "--stuck-phase-grace", "1s"}, scope...)...)
	if r.Code > 1 || strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply acted while virt-handler was down: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	if err := w.env.Handler.SetDown(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the unplug completes with virt-handler back", func() (bool, error) {
		return w.phase("g", "data") == "", nil
	})
}
