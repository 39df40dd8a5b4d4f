package check

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// TestCompactObjectsDecideAlike: the controller's caches hold VMs and VMIs
// compact (snapshot.Compact) and hand out what Expand makes of them, of
// which the controller's snapshots hold what the checks read (VMOf,
// VMIOf). Over the random, cluttered worlds of
// TestLeanObjectsDecideAlike, each VM and VMI as read, expanded from its
// compact form, must equal its lean form (reflect.DeepEqual), what the
// checks read of it must equal what they read of the object as read, and
// the checks must find the same on the expanded world as on the world.
func TestCompactObjectsDecideAlike(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 7))
	n := 2000
	if testing.Short() {
		n = 400
	}
	for i := 0; i < n; i++ {
		data := leanInput(rng)
		world, p, now := leanWorld(data)
		vms, vmis := clutter(world, rand.New(rand.NewPCG(uint64(i), 17)))
		expanded := *leaned(world)
		expanded.VMs = snapshot.VMsOf(throughCompact(t, vms)...)
		expanded.VMIs = snapshot.VMIsOf(throughCompact(t, vmis)...)
		if !reflect.DeepEqual(expanded.VMs, world.VMs) || !reflect.DeepEqual(expanded.VMIs, world.VMIs) {
			t.Fatalf("input %x: what the checks read of the VMs and VMIs differs once they went through their compact form", data)
		}
		full := findingsJSON(t, Run(snapshot.New(*world), p, now))
		if got := findingsJSON(t, Run(snapshot.New(expanded), p, now)); !bytes.Equal(full, got) {
			t.Fatalf("input %x: the findings differ once the objects went through their compact form\nwhole objects: %s\nexpanded:      %s", data, full, got)
		}
		if why := controllerReadsDiffer(world, &expanded); why != "" {
			t.Fatalf("input %x: %s", data, why)
		}
	}
}

// throughCompact returns copies of whole made compact and expanded again,
// each of which must equal the lean form of its original.
func throughCompact[T any, P interface {
	*T
	DeepCopyInto(*T)
}](t *testing.T, whole []T) []T {
	t.Helper()
	if whole == nil {
		return nil
	}
	out := make([]T, len(whole))
	for i := range whole {
		var cp T
		P(&whole[i]).DeepCopyInto(&cp)
		c := snapshot.Compact(P(&cp))
		switch c.(type) {
		case *snapshot.CompactVM, *snapshot.CompactVMI:
		default:
			t.Fatalf("Compact kept a %T", c)
		}
		out[i] = *snapshot.Expand(c).(P)
		var lean T
		P(&whole[i]).DeepCopyInto(&lean)
		snapshot.Lean(P(&lean))
		if !reflect.DeepEqual(&out[i], &lean) {
			t.Fatalf("expanded from compact:\n%#v\nlean:\n%#v", &out[i], &lean)
		}
	}
	return out
}
