package check

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// Property: the indexed lookup of a PV's users on a node finds exactly the
// pods that testing every pod on the node with podUsesPV finds, also when
// claimRefs and volumeNames disagree, a pod names a claim twice, or pods use
// ephemeral volumes. Missing a user would make an attachment look unneeded.
func TestPodsUsingPVOnNode_matchesBruteForce(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		pick := func(prefix string, n int) string { return fmt.Sprintf("%s%d", prefix, r.IntN(n)) }
		var s snapshot.Snapshot
		keys := map[snapshot.Key]bool{}
		for range r.IntN(6) {
			k := snapshot.Key{Namespace: pick("ns", 2), Name: pick("c", 3)}
			if keys[k] {
				continue // a claim's namespace/name is unique in a cluster
			}
			keys[k] = true
			s.PVCs = append(s.PVCs, corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name},
				Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pick("pv", 3)},
			})
		}
		for range r.IntN(12) {
			p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pick("ns", 2), Name: pick("p", 8)}, Spec: corev1.PodSpec{NodeName: pick("n", 2)}}
			for range r.IntN(3) {
				if r.IntN(4) == 0 {
					p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: pick("v", 2), VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
				} else {
					p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "x", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pick("c", 3)}}})
				}
			}
			s.Pods = append(s.Pods, p)
		}
		ix := snapshot.New(s).Index()
		for _, pvName := range []string{"pv0", "pv1", "pv2", ""} {
			var pv *corev1.PersistentVolume
			if r.IntN(3) > 0 {
				pv = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}}
				if r.IntN(4) > 0 {
					pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: pick("ns", 2), Name: pick("c", 3)}
				}
			}
			for _, node := range []string{"n0", "n1"} {
				var want []string
				for _, pod := range ix.PodsOnNode(node) {
					if podUsesPV(ix, pod, pvName, pv) {
						want = append(want, pod.Namespace+"/"+pod.Name)
					}
				}
				var got []string
				for _, pod := range podsUsingPVOnNode(ix, node, pvName, pv) {
					got = append(got, pod.Namespace+"/"+pod.Name)
				}
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d, pv %q, node %s: indexed %v, brute force %v", seed, pvName, node, got, want)
				}
			}
		}
	}
}
