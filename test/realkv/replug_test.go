package realkv

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/realkubevirt"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// A volume unplugged and plugged again under the same name while its old
// attachment pod is still in the API, kubevirt/kubevirt#16159 and #17139:
// virt-controller deletes attachment pods with a grace period of 0, so the
// old pod outlives its deletion while anything holds a finalizer on it (or,
// for a moment, in virt-controller's cache); here HoldPod keeps it. Both
// bugs are virt-controller's (pkg/virt-controller/watch/vmi): KubeVirt
// v1.7.0 takes the terminating pod as the volume's current one, so it makes
// no new pod (getActiveAndOldAttachmentPods, volume-hotplug.go:51-66; fixed
// by #16159), and keeps the Detaching phase the unplug left, from which no
// attach step moves on (updateVolumeStatus, storage.go:180-209,
// canMoveToAttachedPhase; fixed by #17139). The VMI route (a standalone VMI;
// HotplugVolumes on v1.7) puts the re-plug straight into the VMI spec;
// v1.9's declarative sync of the VM route defers it until the old status
// entry is gone (pkg/storage/hotplug/hotplug.go:122-147), so there the race
// never reaches virt-controller's status code.
//
// Real virt-controller v1.7.0 leaves the volume Detaching for as long as
// the old pod stays. tether dates the state from the old pod's deletion,
// not its creation: within the grace there is no finding, past it a
// warning that names virt-controller and KubeVirt v1.9.0 as the release to
// upgrade to, and fix --apply changes nothing. Once the old pod is gone,
// v1.7.0 either attaches the volume on a new pod or, losing #17139's race,
// leaves it Detaching on the new pod for good, which tether reports the
// same way, dated from the new pod's creation. The emulated virt-handler
// plays only what virt-handler v1.7.0 does with a Detaching volume in the
// spec: nothing, as it mounts only from Bound, Pending or AttachedToNode
// (canUpdateToMounted, pkg/virt-handler/vm.go:443).
func TestRealV17_replugSameName_staysDetaching(t *testing.T) {
	env := startV17(t, "HotplugVolumes")
	w := newWorldIn(t, env)
	w.claims("pvc-data")
	w.standaloneVMI("solo")
	w.hotplug(virtapi.VMI, "solo", "pvc-data")
	// In use a while: by the first audit below the attachment pod is older
	// than the grace, its deletion is not.
	const grace = 8 * time.Second
	time.Sleep(grace)
	old := w.replugWhileOldPodStays("solo", "pvc-data")

	// virt-controller v1.7.0 makes no new pod and keeps Detaching.
	time.Sleep(2 * time.Second)
	s := w.VolumeStatus("solo", "pvc-data")
	if s == nil || s.Phase != kubevirtv1.HotplugVolumeDetaching || s.HotplugVolume == nil || s.HotplugVolume.AttachPodName != old.Name {
		t.Fatalf("KubeVirt v1.7.0 should keep the re-plugged volume Detaching on the terminating pod %s, status %+v", old.Name, s)
	}
	if pods := w.AttachmentPods("pvc-data"); len(pods) != 1 {
		t.Fatalf("KubeVirt v1.7.0 should make no new attachment pod while %s stays, pods %d", old.Name, len(pods))
	}

	scope := []string{"-n", w.NS, "--stuck-phase-grace", grace.String()}
	deleted := w.pod(old.Name).DeletionTimestamp.Time
	for _, f := range audit(t, env, scope) {
		if f.Check == check.StuckHotplugPhase && time.Since(deleted) < grace {
			t.Fatalf("stuck for %s only (since the old pod's deletion), within the grace %s: %+v", time.Since(deleted).Round(time.Second), grace, f)
		}
	}

	time.Sleep(time.Until(deleted.Add(grace + time.Second)))
	f := only(t, audit(t, env, scope), check.StuckHotplugPhase, "pvc-data")
	if f.Severity != "warning" || f.Object.Name != "solo" || f.Action.Type != "None" {
		t.Fatalf("past the grace: want a report-only warning on VMI solo, got %+v", f)
	}
	for _, want := range []string{"stays Detaching", old.Name, "expected to act next: virt-controller", "lacks upstream fix kubevirt/kubevirt#17139"} {
		if !contains(f.Evidence, want) {
			t.Fatalf("the evidence should say %q: %q", want, f.Evidence)
		}
	}
	if !strings.Contains(f.Action.Remedy, "upgrade KubeVirt to v1.9.0") {
		t.Fatalf("the remedy should name the release to upgrade to: %q", f.Action.Remedy)
	}
	before, err := w.vmi("solo")
	if err != nil {
		t.Fatal(err)
	}
	fixChangesNothing(t, env, scope)
	after, err := w.vmi("solo")
	if err != nil {
		t.Fatal(err)
	}
	if p := w.pod(old.Name); p.UID != old.UID || after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("fix --apply changed the old pod or the VMI")
	}

	// Once the old pod is gone, v1.7.0 makes a new one. Whether the volume
	// then attaches is #17139's race: the status pass after the new pod's
	// creation resets Detaching from the claim only while virt-controller's
	// pod cache does not show the new pod yet; once it does, the volume stays
	// Detaching on the new, running pod for good. Both happen here.
	if err := realkubevirt.HoldPod(context.Background(), env.Client, w.NS, old.Name, false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "pvc-data Ready, or Detaching, on a new running attachment pod", func() (bool, error) {
		s = w.VolumeStatus("solo", "pvc-data")
		return s != nil && s.HotplugVolume != nil && s.HotplugVolume.AttachPodName != old.Name && s.HotplugVolume.AttachPodUID != "" &&
			(s.Phase == kubevirtv1.VolumeReady || s.Phase == kubevirtv1.HotplugVolumeDetaching), nil
	})
	if s.Phase == kubevirtv1.VolumeReady {
		t.Logf("KubeVirt v1.7.0 attached the re-plugged volume on a new pod once the old one was gone")
		return
	}
	current := w.pod(s.HotplugVolume.AttachPodName)
	t.Logf("KubeVirt v1.7.0 left the re-plugged volume Detaching on the new pod %s (#17139)", current.Name)
	time.Sleep(time.Until(current.CreationTimestamp.Add(grace + time.Second)))
	if p := w.Phase("solo", "pvc-data"); p != kubevirtv1.HotplugVolumeDetaching {
		t.Fatalf("#17139's state should last: phase %s", p)
	}
	f = only(t, audit(t, env, scope), check.StuckHotplugPhase, "pvc-data")
	for _, want := range []string{"stays Detaching", "since at least the creation of its attachment pod " + current.Name, "lacks upstream fix kubevirt/kubevirt#17139"} {
		if !contains(f.Evidence, want) {
			t.Fatalf("the evidence should say %q: %q", want, f.Evidence)
		}
	}
	if f.Severity != "warning" || !strings.Contains(f.Action.Remedy, "upgrade KubeVirt to v1.9.0") {
		t.Fatalf("want a warning with the release to upgrade to, got %+v", f)
	}
	fixChangesNothing(t, env, scope)
	if p := w.pod(current.Name); p.UID != current.UID || p.DeletionTimestamp != nil || w.Phase("solo", "pvc-data") != kubevirtv1.HotplugVolumeDetaching {
		t.Fatalf("fix --apply changed the attachment pod or the volume")
	}
}

// The same on KubeVirt v1.9.0, which carries both fixes: virt-controller
// no longer takes the terminating pod as the current one, so the
// re-plugged volume's status reads the claim's phase, Bound, instead of the
// inherited Detaching (updateVolumeStatus, storage.go:150-189). It still
// makes no new pod while the old one stays: needsHandleHotplug
// (volume-hotplug.go:41-50, unchanged on KubeVirt's main branch) counts a
// terminating pod that mounts the same volumes as the current one and
// skips handleHotplugVolumes. Past a short grace tether reports that wait,
// names the finalizer that keeps the old pod, and says that v1.9.0 carries
// #16159 (so no upgrade is offered); fix --apply changes nothing. Once the
// old pod is gone the volume is Ready on a new pod and tether has nothing
// to report.
func TestReal_replugSameName_waitsBoundThenCompletes(t *testing.T) {
	w := newWorld(t)
	w.claims("pvc-data")
	w.standaloneVMI("solo")
	w.hotplug(virtapi.VMI, "solo", "pvc-data")
	old := w.replugWhileOldPodStays("solo", "pvc-data")
	scope := []string{"-n", w.NS, "--stuck-phase-grace", "1s"}

	testenv.Eventually(t, 30*time.Second, "pvc-data Bound while "+old.Name+" stays", func() (bool, error) {
		return w.Phase("solo", "pvc-data") == kubevirtv1.VolumeBound, nil
	})
	time.Sleep(2 * time.Second)
	if p := w.Phase("solo", "pvc-data"); p != kubevirtv1.VolumeBound || len(w.AttachmentPods("pvc-data")) != 1 {
		t.Fatalf("while %s stays, KubeVirt v1.9.0 should keep pvc-data Bound and make no new pod: phase %s", old.Name, p)
	}
	f := only(t, audit(t, w.Env, scope), check.StuckHotplugPhase, "pvc-data")
	for _, want := range []string{"failure mode " + check.FixDyingAttachPod, "kept by finalizers " + realkubevirt.PodHold,
		"v1.9.0 carries upstream fix kubevirt/kubevirt#16159"} {
		if !contains(f.Evidence, want) {
			t.Fatalf("the evidence should say %q: %q", want, f.Evidence)
		}
	}
	if f.Action.Type != "None" || strings.Contains(f.Action.Remedy, "upgrade") {
		t.Fatalf("want a report-only finding that offers no upgrade, got %+v", f.Action)
	}
	before, err := w.vmi("solo")
	if err != nil {
		t.Fatal(err)
	}
	fixChangesNothing(t, w.Env, scope)
	if after, err := w.vmi("solo"); err != nil || after.ResourceVersion != before.ResourceVersion || w.pod(old.Name).UID != old.UID {
		t.Fatalf("fix --apply changed the VMI or the old pod: %v", err)
	}

	if err := realkubevirt.HoldPod(context.Background(), w.Env.Client, w.NS, old.Name, false); err != nil {
		t.Fatal(err)
	}
	w.WaitPhase("solo", "pvc-data", kubevirtv1.VolumeReady)
	if s := w.VolumeStatus("solo", "pvc-data"); s.HotplugVolume.AttachPodName == old.Name {
		t.Fatalf("Ready on the old pod %s", old.Name)
	}
	noFinding(t, audit(t, w.Env, scope), "pvc-data")
}

func noFinding(t *testing.T, fs []finding, volume string) {
	t.Helper()
	for _, f := range fs {
		if f.Volume == volume {
			t.Fatalf("a finding on %s: %+v", volume, f)
		}
	}
}

// replugWhileOldPodStays holds the volume's attachment pod (HoldPod),
// unplugs the volume through the VMI route, waits until virt-controller
// has deleted that pod and set the volume Detaching, and plugs it again
// under the same name. It returns the old pod.
func (w *world) replugWhileOldPodStays(vmi, vol string) *corev1.Pod {
	w.T.Helper()
	ctx := context.Background()
	old := w.attachmentPod(vol)
	if err := realkubevirt.HoldPod(ctx, w.Env.Client, w.NS, old.Name, true); err != nil {
		w.T.Fatal(err)
	}
	w.T.Cleanup(func() { _ = realkubevirt.HoldPod(context.Background(), w.Env.Client, w.NS, old.Name, false) })
	w.RemoveVolume(virtapi.VMI, vmi, vol)
	testenv.Eventually(w.T, 30*time.Second, "the unplug deletes "+old.Name+" and leaves "+vol+" Detaching", func() (bool, error) {
		return w.pod(old.Name).DeletionTimestamp != nil && w.Phase(vmi, vol) == kubevirtv1.HotplugVolumeDetaching, nil
	})
	w.addVolume(virtapi.VMI, vmi, vol)
	testenv.Eventually(w.T, 30*time.Second, vol+" back in the VMI spec", func() (bool, error) {
		v, err := w.vmi(vmi)
		return err == nil && hasVolume(v.Spec.Volumes, vol), err
	})
	return old
}

func (w *world) pod(name string) *corev1.Pod {
	w.T.Helper()
	var p corev1.Pod
	if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: name}, &p); err != nil {
		w.T.Fatalf("pod %s: %v", name, err)
	}
	return &p
}
