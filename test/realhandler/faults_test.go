package realhandler

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/kvtest"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// handlerDown stops real virt-handler until the test ends.
func (w *world) handlerDown() {
	w.T.Helper()
	if err := w.Env.Handler.SetDown(context.Background(), true); err != nil {
		w.T.Fatal(err)
	}
	w.T.Cleanup(func() {
		if err := w.Env.Handler.SetDown(context.Background(), false); err != nil {
			w.T.Errorf("restarting virt-handler: %v", err)
		}
	})
}

// fixAppliesNothing runs tether fix --apply with args and fails the test
// when it applied anything (why says what it must not act on).
func (w *world) fixAppliesNothing(args []string, why string) {
	w.T.Helper()
	r := tether(w.T, w.Env, append([]string{"fix", "--apply"}, args...)...)
	if r.Code > 1 || strings.Contains(r.Stdout, "Applied") {
		w.T.Fatalf("fix --apply acted %s: exit %d\n%s%s", why, r.Code, r.Stdout, r.Stderr)
	}
}

// noSafeAction fails the test when a finding offers a safe action.
func noSafeAction(t *testing.T, fs []kvtest.Finding, why string) {
	t.Helper()
	for _, f := range fs {
		if f.Action.Safe {
			t.Fatalf("a finding offers a safe action %s: %+v", why, f)
		}
	}
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
	w.bareVMI("g", w.Env.Node.Name)
	w.addVolume(virtapi.VMI, "g", "data")
	w.WaitPhase("g", "data", kubevirtv1.VolumeReady)
	pods := w.AttachmentPods("data")
	if len(pods) != 1 {
		t.Fatalf("want one attachment pod of data, got %d", len(pods))
	}
	w.handlerDown()
	w.RemoveVolume(virtapi.VMI, "g", "data")
	time.Sleep(5 * time.Second)
	if p := w.Phase("g", "data"); p != kubevirtv1.VolumeReady {
		t.Fatalf("with virt-handler down the unplugged volume stays Ready on real KubeVirt; phase %q", p)
	}
	if now := w.AttachmentPods("data"); len(now) != 1 || now[0].UID != pods[0].UID || now[0].DeletionTimestamp != nil {
		t.Fatalf("with virt-handler down the attachment pod %s stays", pods[0].Name)
	}

	scope := []string{"-n", w.NS}
	fs := kvtest.Audit(t, binDir, w.Env, append([]string{"--stuck-phase-grace", "1s"}, scope...))
	f := kvtest.Only(t, fs, check.StuckHotplugPhase, "data")
	if f.Action.Type != "None" || f.Action.BlockedBy != string(check.WaitsForKubeVirt) {
		t.Fatalf("want a report-only finding held by %s, got %+v", check.WaitsForKubeVirt, f)
	}
	if !slices.ContainsFunc(f.Evidence, func(e string) bool { return strings.Contains(e, "virt-handler on node "+w.Env.Node.Name) }) {
		t.Fatalf("the evidence should name virt-handler on node %s: %q", w.Env.Node.Name, f.Evidence)
	}
	for _, g := range fs {
		if g.Action.Type == string(check.DeleteAttachmentPod) {
			t.Fatalf("a finding offers to delete the live VMI's attachment pod: %+v", g)
		}
	}
	w.fixAppliesNothing(append([]string{"--stuck-phase-grace", "1s"}, scope...), "while virt-handler was down")

	if err := w.Env.Handler.SetDown(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the unplug completes with virt-handler back", func() (bool, error) {
		return w.Phase("g", "data") == "", nil
	})
}

// A hot-plug added while real virt-handler is gone from the VMI's node:
// virt-controller makes the attachment pod and the kubelet runs it, but
// nobody mounts the volume, which stays AttachedToNode. tether reports
// StuckHotplugPhase naming that node's virt-handler (it reported nothing
// before it knew this state), offers no action, and fix --apply changes
// nothing. Once virt-handler is back it mounts the volume, libvirt
// attaches it, the guest says so, and the finding is gone.
func TestReal_attachWhileTheRealHandlerIsDown(t *testing.T) {
	w := newWorld(t)
	w.claims("data")
	w.guest("g")
	w.handlerDown()
	w.addVolume(virtapi.VMI, "g", "data")
	testenv.Eventually(t, 2*time.Minute, "the attachment pod of data running", func() (bool, error) {
		pods := w.AttachmentPods("data")
		return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning, nil
	})
	time.Sleep(3 * time.Second)
	if p := w.Phase("g", "data"); p != kubevirtv1.HotplugVolumeAttachedToNode {
		t.Fatalf("with virt-handler down a new hot-plug stays AttachedToNode on real KubeVirt; phase %q", p)
	}

	scope := []string{"-n", w.NS, "--stuck-phase-grace", "1s"}
	fs := kvtest.Audit(t, binDir, w.Env, scope)
	f := kvtest.Only(t, fs, check.StuckHotplugPhase, "data")
	if f.Action.Type != "None" || f.Action.Safe || f.Action.BlockedBy != string(check.WaitsForKubeVirt) || f.Severity != "warning" {
		t.Fatalf("want a report-only warning held by %s, got %+v", check.WaitsForKubeVirt, f)
	}
	for _, want := range []string{"stays AttachedToNode", "expected to act next: virt-handler on node " + w.Env.Node.Name} {
		if !slices.ContainsFunc(f.Evidence, func(e string) bool { return strings.Contains(e, want) }) {
			t.Fatalf("the evidence should say %q: %q", want, f.Evidence)
		}
	}
	noSafeAction(t, fs, "while the hot-plug attaches")
	w.fixAppliesNothing(scope, "while virt-handler was down")

	if err := w.Env.Handler.SetDown(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	w.WaitPhase("g", "data", kubevirtv1.VolumeReady)
	w.waitConsole("g", time.Minute, `TETHER-DISK-ADDED name=sd\w+ serial=data `)
	for _, g := range kvtest.Audit(t, binDir, w.Env, scope) {
		if g.Check == check.StuckHotplugPhase {
			t.Fatalf("the finding stays after the mount: %+v", g)
		}
	}
}

// launcherPIDs are the host PIDs of the virt-launcher-monitor processes of
// the VMI of that UID (the node's PID namespace is a child of the host's).
func launcherPIDs(uid types.UID) []int {
	var pids []int
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range files {
		b, err := os.ReadFile(f)
		args := strings.Split(string(b), "\x00")
		if err != nil || !strings.HasSuffix(args[0], "virt-launcher-monitor") || !strings.Contains(string(b), string(uid)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// The launcher of a running guest with a Ready hot-plug is killed (the
// compute container's first process, SIGKILL). KubeVirt marks the VMI
// Failed and deletes its attachment pod; the Failed VMI's status still
// lists the hot-plug Ready, naming the deleted pod. A final VMI holds no
// disk: tether reports nothing and acts on nothing, and the claim is free
// for the next guest, whose guest sees the disk.
func TestReal_launcherKilled_aFinalVMIHoldsNothing(t *testing.T) {
	w := newWorld(t)
	w.claims("data")
	w.guest("g")
	w.addVolume(virtapi.VMI, "g", "data")
	w.WaitPhase("g", "data", kubevirtv1.VolumeReady)
	pids := launcherPIDs(w.vmi("g").UID)
	if len(pids) != 1 {
		t.Fatalf("want the one virt-launcher-monitor of g, found %v", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Minute, "VMI g Failed and its attachment pod gone", func() (bool, error) {
		return w.vmi("g").Status.Phase == kubevirtv1.Failed && len(w.AttachmentPods("data")) == 0, nil
	})
	if p := w.Phase("g", "data"); p != kubevirtv1.VolumeReady {
		t.Logf("the Failed VMI's status lists data in phase %q", p)
	}
	scope := []string{"-n", w.NS, "--stuck-phase-grace", "1s"}
	if fs := kvtest.Audit(t, binDir, w.Env, scope); len(fs) != 0 {
		t.Fatalf("a Failed VMI's last status is no drift; got %+v", fs)
	}
	w.fixAppliesNothing(scope, "on a world with nothing to fix")
	w.guest("g2")
	w.addVolume(virtapi.VMI, "g2", "data")
	w.WaitPhase("g2", "data", kubevirtv1.VolumeReady)
	w.waitConsole("g2", time.Minute, `TETHER-DISK-ADDED name=sd\w+ serial=data `)
}

// The claim of a Ready hot-plug is deleted under the running guest. The
// kubelet's pvc-protection finalizer keeps it while pods use it: it stays
// Terminating, the guest keeps the disk. tether reports the reference
// (DanglingVolumeReference, held by DeletionPostponed: a claim that still
// exists is never dangling) with a remedy that keeps the data or lets the
// deletion finish, and never removes the disk itself. When the operator
// runs the remedy's removevolume, the guest sees the disk go and the claim
// is gone.
func TestReal_claimDeletedUnderARunningGuest(t *testing.T) {
	w := newWorld(t)
	w.claims("data")
	w.guest("g")
	w.addVolume(virtapi.VMI, "g", "data")
	w.WaitPhase("g", "data", kubevirtv1.VolumeReady)
	w.waitConsole("g", time.Minute, `TETHER-DISK-ADDED name=sd\w+ serial=data `)
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: w.NS}}
	if err := w.C.Delete(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := w.C.Get(context.Background(), client.ObjectKeyFromObject(claim), claim); err != nil || claim.DeletionTimestamp == nil {
		t.Fatalf("the claim in use should stay Terminating: %v %+v", err, claim.ObjectMeta)
	}

	scope := []string{"-n", w.NS, "--blocked-deletion-grace", "1s"}
	fs := kvtest.Audit(t, binDir, w.Env, scope)
	f := kvtest.Only(t, fs, check.DanglingVolumeReference, "data")
	if f.Action.Safe || f.Action.BlockedBy != "DeletionPostponed" || !strings.Contains(f.Action.Remedy, "removevolume") || !strings.Contains(f.Action.Remedy, "Retain") {
		t.Fatalf("want a held DanglingVolumeReference whose remedy keeps the data or removes the reference, got %+v", f)
	}
	noSafeAction(t, fs, "on the disk of a running guest")
	w.fixAppliesNothing(scope, "on a claim being deleted under a guest")
	time.Sleep(3 * time.Second)
	if removed(w.console("g"), "data") || w.Phase("g", "data") != kubevirtv1.VolumeReady {
		t.Fatalf("the guest lost its disk:\n%s", w.console("g"))
	}

	w.RemoveVolume(virtapi.VMI, "g", "data")
	w.waitConsole("g", 2*time.Minute, `TETHER-DISK-REMOVED name=sd\w+ serial=data`)
	testenv.Eventually(t, 2*time.Minute, "the claim gone once nothing uses it", func() (bool, error) {
		err := w.C.Get(context.Background(), client.ObjectKeyFromObject(claim), &corev1.PersistentVolumeClaim{})
		return apierrors.IsNotFound(err), nil
	})
}

// A VMI-only hot-plug whose claim cannot bind yet (it names a volume that
// does not exist): virt-controller writes AttachedToNode at once, but the
// attachment pod stays Pending, unscheduled. The tenant wants nothing of
// it, so tether calls it an orphan, but one still attaching: not safe
// (VolumeNotReady); nothing is stuck (the pod does not run) and fix
// --apply leaves it.
func TestReal_pendingHotplug_neverRemoved(t *testing.T) {
	w := newWorld(t)
	w.guest("g")
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: w.NS}, Spec: corev1.PersistentVolumeClaimSpec{
		VolumeName:  "not-there-yet-" + w.NS,
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
	}}
	if err := w.C.Create(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	w.addVolume(virtapi.VMI, "g", "late")
	testenv.Eventually(t, time.Minute, "the attachment pod of late made", func() (bool, error) {
		return len(w.AttachmentPods("late")) == 1, nil
	})
	time.Sleep(5 * time.Second)
	if pods := w.AttachmentPods("late"); pods[0].Status.Phase != corev1.PodPending {
		t.Fatalf("the attachment pod of an unbound claim should stay Pending, is %s", pods[0].Status.Phase)
	}
	scope := append(kvtest.Tenant(t, w.Env, w.NS, "g", "late"), "--stuck-phase-grace", "1s")
	fs := kvtest.Audit(t, binDir, w.Env, scope)
	f := kvtest.Only(t, fs, check.OrphanHotplugVolume, "late")
	if f.Action.Safe || f.Action.BlockedBy != "VolumeNotReady" {
		t.Fatalf("an orphan still attaching must not be safe to remove: %+v", f)
	}
	for _, g := range fs {
		if g.Check == check.StuckHotplugPhase {
			t.Fatalf("a hot-plug whose pod does not run is not stuck on virt-handler: %+v", g)
		}
	}
	w.fixAppliesNothing(scope, "on a hot-plug still attaching")
	if p := w.Phase("g", "late"); p == "" {
		t.Fatal("the pending hot-plug is gone from the VMI")
	}
}
