package emulator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/testing/emulator/volreq"
)

// The oracles below follow KubeVirt v1.9.0: virt-controller
// pkg/virt-controller/watch/vmi/storage.go and virt-handler
// pkg/virt-handler/vm.go.

func claimIn(name string, phase corev1.PersistentVolumeClaimPhase) claimState {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	pvc.Status.Phase = phase
	return judgeClaim(name, pvc, nil)
}

func attachPod(name string, uid types.UID, ready bool, volumes ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}
	p.Spec.Volumes = []corev1.Volume{{Name: "hotplug-disks", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	for _, v := range volumes {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v},
		}})
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: hotplugApp, Ready: ready}}
	return p
}

func byName(st []virtv1.VolumeStatus) map[string]virtv1.VolumeStatus {
	out := map[string]virtv1.VolumeStatus{}
	for _, s := range st {
		out[s.Name] = s
	}
	return out
}

// storage.go:360-372: without attachment pod the phase follows the PVC.
func TestVolumeStatusWithoutPodFollowsPVC(t *testing.T) {
	vmi := vmiWith(withVolume(volreq.PVCVolume("missing", "missing", true), ""), withVolume(volreq.PVCVolume("pending", "pending", true), ""),
		withVolume(volreq.PVCVolume("bound", "bound", true), ""))
	claims := map[string]claimState{
		"missing": judgeClaim("missing", nil, nil),
		"pending": claimIn("pending", corev1.ClaimPending),
		"bound":   claimIn("bound", corev1.ClaimBound),
	}
	hot := map[string]bool{"missing": true, "pending": true, "bound": true}
	got := byName(volumeStatuses(vmi, hot, nil, nil, claims))
	want := map[string][3]string{
		"missing": {"Pending", "FailedPvcNotFound", "PVC missing not found"},
		"pending": {"Pending", "PVCNotReady", "PVC is in phase ClaimPending"},
		"bound":   {"Bound", "PVCNotReady", "PVC is in phase Bound"},
	}
	for n, w := range want {
		s := got[n]
		if string(s.Phase) != w[0] || s.Reason != w[1] || s.Message != w[2] || s.HotplugVolume == nil || s.HotplugVolume.AttachPodName != "" {
			t.Errorf("%s: %+v, want %v without attachment pod", n, s, w)
		}
	}
}

// storage.go:158-172: a pod names the volume AttachedToNode; its UID only
// once the pod's container is ready; a newer pod that is not ready blanks
// the UID of an already Ready volume, which stays Ready.
func TestVolumeStatusAttachmentPodUIDOnlyWhenReady(t *testing.T) {
	vmi := vmiWith(withVolume(volreq.PVCVolume("a", "a", true), ""))
	claims := map[string]claimState{"a": claimIn("a", corev1.ClaimPending)}
	hot := map[string]bool{"a": true}
	notReady := attachPod("hp-volume-1", "u1", false, "a")
	s := volumeStatuses(vmi, hot, notReady, []*corev1.Pod{notReady}, claims)[0]
	if s.Phase != virtv1.HotplugVolumeAttachedToNode || s.Reason != "SuccessfulCreate" ||
		s.Message != "Created hotplug attachment pod hp-volume-1, for volume a" ||
		s.HotplugVolume.AttachPodName != "hp-volume-1" || s.HotplugVolume.AttachPodUID != "" {
		t.Errorf("pod not ready: %+v %+v", s, s.HotplugVolume)
	}
	vmi.Status.VolumeStatus = []virtv1.VolumeStatus{s}
	ready := attachPod("hp-volume-1", "u1", true, "a")
	if s = volumeStatuses(vmi, hot, ready, []*corev1.Pod{ready}, claims)[0]; s.HotplugVolume.AttachPodUID != "u1" || s.Phase != virtv1.HotplugVolumeAttachedToNode {
		t.Errorf("pod ready: %+v %+v", s, s.HotplugVolume)
	}
	s.Phase, s.Target = virtv1.VolumeReady, "sda"
	vmi.Status.VolumeStatus = []virtv1.VolumeStatus{s}
	newer := attachPod("hp-volume-2", "u2", false, "a")
	if s = volumeStatuses(vmi, hot, newer, []*corev1.Pod{newer, ready}, claims)[0]; s.Phase != virtv1.VolumeReady ||
		s.HotplugVolume.AttachPodName != "hp-volume-2" || s.HotplugVolume.AttachPodUID != "" || s.Target != "sda" {
		t.Errorf("hand-over to a pod not yet ready: %+v %+v", s, s.HotplugVolume)
	}
}

// storage.go:316-339, 344-352: a removed volume keeps its entry while a pod
// holds it (Ready/MountedToPod kept, else Detaching) and loses it with the
// pod; entries are sorted by name.
func TestVolumeStatusRemovedVolumeStaysWhilePodHoldsIt(t *testing.T) {
	hp := func(pod string) *virtv1.HotplugVolumeStatus {
		return &virtv1.HotplugVolumeStatus{AttachPodName: pod, AttachPodUID: "u1"}
	}
	vmi := vmiWith(withVolume(volreq.PVCVolume("root", "root", false), virtv1.DiskBusVirtio),
		withStatus(virtv1.VolumeStatus{Name: "z-ready", Phase: virtv1.VolumeReady, Target: "sda", HotplugVolume: hp("p")}),
		withStatus(virtv1.VolumeStatus{Name: "m-mounted", Phase: virtv1.HotplugVolumeMounted, HotplugVolume: hp("p")}),
		withStatus(virtv1.VolumeStatus{Name: "b-unmounted", Phase: virtv1.HotplugVolumeUnMounted, HotplugVolume: hp("p")}),
		withStatus(virtv1.VolumeStatus{Name: "c-podgone", Phase: virtv1.VolumeReady, HotplugVolume: hp("old")}),
	)
	pod := attachPod("p", "u1", true, "z-ready", "m-mounted", "b-unmounted")
	claims := map[string]claimState{"root": claimIn("root", corev1.ClaimBound)}
	got := volumeStatuses(vmi, map[string]bool{}, nil, []*corev1.Pod{pod}, claims)
	var order []string
	for _, s := range got {
		order = append(order, s.Name)
	}
	if want := []string{"b-unmounted", "m-mounted", "root", "z-ready"}; !equalStrings(order, want) {
		t.Fatalf("entries %v, want %v (sorted; the one whose pod is gone dropped)", order, want)
	}
	m := byName(got)
	if m["z-ready"].Phase != virtv1.VolumeReady || m["m-mounted"].Phase != virtv1.HotplugVolumeMounted ||
		m["b-unmounted"].Phase != virtv1.HotplugVolumeDetaching {
		t.Errorf("phases %s %s %s, want Ready, MountedToPod, Detaching", m["z-ready"].Phase, m["m-mounted"].Phase, m["b-unmounted"].Phase)
	}
	pod.DeletionTimestamp = &metav1.Time{}
	if s := byName(volumeStatuses(vmi, map[string]bool{}, nil, []*corev1.Pod{pod}, claims))["b-unmounted"]; s.Reason != "SuccessfulDelete" ||
		s.Message != "Deleted hotplug attachment pod p, for volume b-unmounted" {
		t.Errorf("terminating pod: %+v", s)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
