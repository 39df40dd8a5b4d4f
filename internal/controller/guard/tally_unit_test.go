package guard

import (
	"fmt"
	"math/rand/v2"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// vmiWith is a VMI ns/name with hot hot-plugged volumes and cold other
// volume statuses.
func vmiWith(ns, name string, hot, cold int) *kubevirtv1.VirtualMachineInstance {
	v := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for i := 0; i < hot; i++ {
		v.Status.VolumeStatus = append(v.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: fmt.Sprintf("hp%d", i), HotplugVolume: &kubevirtv1.HotplugVolumeStatus{}})
	}
	for i := 0; i < cold; i++ {
		v.Status.VolumeStatus = append(v.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: fmt.Sprintf("disk%d", i)})
	}
	return v
}

// The tally counts what a walk of the informer's store counts (the
// oracle: the live VMIs, each counted from scratch), after every event of
// 2,000 random histories of adds, updates and deletes, with what informers
// really deliver: adds of VMIs already counted (a relist), updates whose
// old object is stale, deletions as tombstones and deletions of VMIs never
// seen, and objects of other types.
func TestTallyCountsWhatAWalkCounts(t *testing.T) {
	namespaces := []string{"a", "b", "c"}
	applies := func(ns string) bool { return ns != "b" }
	for seed := uint64(0); seed < 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 49))
		tally := NewTally()
		live := map[string]*kubevirtv1.VirtualMachineInstance{}
		random := func() *kubevirtv1.VirtualMachineInstance {
			return vmiWith(namespaces[r.IntN(len(namespaces))], fmt.Sprintf("vm-%d", r.IntN(8)), r.IntN(4), r.IntN(2))
		}
		for step := 0; step < 40; step++ {
			v := random()
			key := v.Namespace + "/" + v.Name
			switch r.IntN(6) {
			case 0, 1:
				tally.OnAdd(v, r.IntN(2) == 0)
				live[key] = v
			case 2:
				tally.OnUpdate(random(), v) // the old object need not be the one counted
				live[key] = v
			case 3:
				tally.OnDelete(v) // counted or never seen
				delete(live, key)
			case 4:
				tally.OnDelete(toolscache.DeletedFinalStateUnknown{Key: key, Obj: v})
				delete(live, key)
			case 5:
				tally.OnAdd(&kubevirtv1.VirtualMachine{ObjectMeta: v.ObjectMeta}, false) // not a VMI: nothing
			}
			wantHot := 0
			for _, lv := range live {
				for _, vs := range lv.Status.VolumeStatus {
					if applies(lv.Namespace) && vs.HotplugVolume != nil {
						wantHot++
					}
				}
			}
			if got := tally.VMIs(); got != len(live) {
				t.Fatalf("seed %d step %d: the tally counts %d VMIs, a walk %d", seed, step, got, len(live))
			}
			if got := tally.Hotplugs(applies); got != wantHot {
				t.Fatalf("seed %d step %d: the tally counts %d hot-plugs, a walk %d", seed, step, got, wantHot)
			}
		}
	}
}
