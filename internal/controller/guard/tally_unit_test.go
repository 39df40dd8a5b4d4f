package guard

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

func tallyVMI(ns, name string, hot, other int) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for i := range hot {
		vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: fmt.Sprintf("hp%d", i), HotplugVolume: &kubevirtv1.HotplugVolumeStatus{}})
	}
	for i := range other {
		vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: fmt.Sprintf("disk%d", i)})
	}
	return vmi
}

// The tally the informer's events keep counts what a walk of the cache
// counted (the guard's count before it): over random adds, updates,
// deletes and tombstones, the VMIs and each tenant's hot-plugs are the
// walk's.
func TestTally_countsAsAWalkOfTheCache(t *testing.T) {
	r := rand.New(rand.NewPCG(49, 5))
	tally := NewTally()
	cache := map[string]*kubevirtv1.VirtualMachineInstance{}
	tenants := map[string]func(string) bool{
		"a":   func(ns string) bool { return ns == "ns-1" || ns == "ns-2" },
		"all": func(string) bool { return true },
		"x":   func(ns string) bool { return strings.HasSuffix(ns, "3") },
	}
	for step := range 5000 {
		key := fmt.Sprintf("ns-%d/vmi-%d", r.IntN(4), r.IntN(40))
		ns, name, _ := strings.Cut(key, "/")
		old, held := cache[key]
		switch op := r.IntN(10); {
		case op < 6:
			vmi := tallyVMI(ns, name, r.IntN(5), r.IntN(3))
			if held {
				tally.OnUpdate(old, vmi)
			} else {
				tally.OnAdd(vmi, false)
			}
			cache[key] = vmi
		case op < 8 && held:
			tally.OnDelete(old)
			delete(cache, key)
		case held:
			tally.OnDelete(toolscache.DeletedFinalStateUnknown{Key: key, Obj: old})
			delete(cache, key)
		}
		if tally.VMIs() != len(cache) {
			t.Fatalf("step %d: tally %d VMIs, the cache %d", step, tally.VMIs(), len(cache))
		}
		for name, applies := range tenants {
			walk := 0
			for _, vmi := range cache {
				if applies(vmi.Namespace) {
					walk += hotplugs(vmi)
				}
			}
			if got := tally.Hotplugs(applies); got != walk {
				t.Fatalf("step %d: tenant %s: tally %d hot-plugs, a walk %d", step, name, got, walk)
			}
		}
	}
}

// A look costs the namespaces, not the VMIs: at 10,000 VMIs in 50
// namespaces, side by side, the walk the guard made (every VMI of the
// compact cache expanded, as a List from it expands them, and its
// hot-plugs counted) and a look at the tally.
func BenchmarkGuardLook(b *testing.B) {
	const n = 10000
	tally := NewTally()
	var compact []any
	for i := range n {
		vmi := tallyVMI(fmt.Sprintf("ns-%d", i%50), fmt.Sprintf("vmi-%d", i), 4, 1)
		tally.OnAdd(vmi, false)
		compact = append(compact, snapshot.Compact(snapshot.Lean(vmi)))
	}
	applies := func(ns string) bool { return ns < "ns-3" }
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hot := 0
			for _, c := range compact {
				if vmi := snapshot.Expand(c).(*kubevirtv1.VirtualMachineInstance); applies(vmi.Namespace) {
					hot += hotplugs(vmi)
				}
			}
			_ = hot
		}
	})
	b.Run("tally", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = tally.VMIs()
			_ = tally.Hotplugs(applies)
		}
	})
}
