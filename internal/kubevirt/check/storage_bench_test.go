package check

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

const (
	benchNodes   = 500
	benchVolumes = 10000 // one claim, PV, attachment and running pod each
	benchIdle    = 10000 // pods without claims
)

// storageBenchSnapshot is a cluster the storage checks see as the controller
// does each pass: benchNodes nodes, benchVolumes ReadWriteOnce CSI volumes
// each attached to the node of the pod using it, benchIdle pods without
// claims. One volume in a hundred is attached to a node that is gone, one in
// a hundred is wanted by a second pod on another node (Multi-Attach), and one
// claim in a hundred is stuck terminating under a finished pod.
func storageBenchSnapshot() snapshot.Snapshot {
	var s snapshot.Snapshot
	old := metav1.NewTime(now.Add(-24 * 60 * 60 * 1e9))
	for i := range benchNodes {
		s.Nodes = append(s.Nodes, corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%03d", i), UID: types.UID(fmt.Sprintf("n%d", i)), CreationTimestamp: old},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
	}
	pod := func(ns, name, node, claim string, phase corev1.PodPhase) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), CreationTimestamp: old},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{Phase: phase},
		}
		if claim != "" {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		}
		return p
	}
	for i := range benchVolumes {
		ns, claim, pv := fmt.Sprintf("ns-%d", i%20), fmt.Sprintf("data-%05d", i), fmt.Sprintf("pv-%05d", i)
		node := fmt.Sprintf("node-%03d", i%benchNodes)
		pvc := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim, UID: types.UID("c" + claim), CreationTimestamp: old, Finalizers: []string{snapshot.PVCProtectionFinalizer}},
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
		}
		phase := corev1.PodRunning
		if i%100 == 7 {
			pvc.DeletionTimestamp = &old
			phase = corev1.PodSucceeded
		}
		s.PVCs = append(s.PVCs, pvc)
		s.PVs = append(s.PVs, corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pv, UID: types.UID("p" + pv), CreationTimestamp: old},
			Spec: corev1.PersistentVolumeSpec{
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: claim},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "csi.example.com", VolumeHandle: pv}},
			},
		})
		vaNode := node
		if i%100 == 3 {
			vaNode = "gone-" + node
		}
		s.VolumeAttachments = append(s.VolumeAttachments, storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: "csi-" + pv, UID: types.UID("v" + pv), CreationTimestamp: old},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: vaNode,
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &s.PVs[len(s.PVs)-1].Name}},
			Status: storagev1.VolumeAttachmentStatus{Attached: true},
		})
		s.Pods = append(s.Pods, pod(ns, "app-"+claim, node, claim, phase))
		if i%100 == 5 {
			s.Pods = append(s.Pods, pod(ns, "second-"+claim, fmt.Sprintf("node-%03d", (i+1)%benchNodes), claim, corev1.PodPending))
		}
	}
	for i := range benchIdle {
		s.Pods = append(s.Pods, pod(fmt.Sprintf("ns-%d", i%20), fmt.Sprintf("web-%05d", i), fmt.Sprintf("node-%03d", i%benchNodes), "", corev1.PodRunning))
	}
	return s
}

// BenchmarkStorageChecks is one pass of the controller's storage
// reconciler, decision part: index the snapshot and run the three storage
// checks (the cache reads are not included).
func BenchmarkStorageChecks(b *testing.B) {
	base := storageBenchSnapshot()
	p := DefaultPolicy()
	p.Checks = []string{StaleVolumeAttachment, MultiAttachConflict, BlockedDeletion}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n = len(Run(snapshot.New(base), p, now))
	}
	// Per hundred volumes: two stale attachments (node gone; claim of a
	// finished pod), two pods waiting on a volume held elsewhere (the second
	// pod; the pod whose attachment points at the gone node), one blocked
	// deletion.
	if want := 5 * benchVolumes / 100; n != want {
		b.Fatalf("%d findings, want %d", n, want)
	}
	b.ReportMetric(float64(n), "findings")
}
