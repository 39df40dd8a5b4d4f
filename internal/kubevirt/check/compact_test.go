package check

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// TestCompactObjectsDecideAlike: the controller's caches hold VMs and VMIs
// compact (snapshot.Compact) and hand out what Expand makes of them. Over
// the random, cluttered worlds of TestLeanObjectsDecideAlike, each VM and
// VMI expanded from its compact form must equal its lean form
// (reflect.DeepEqual), and the checks must find the same on the expanded
// world as on the whole one.
func TestCompactObjectsDecideAlike(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 7))
	n := 2000
	if testing.Short() {
		n = 400
	}
	for i := 0; i < n; i++ {
		data := leanInput(rng)
		world, p, now := leanWorld(data)
		clutter(world, rand.New(rand.NewPCG(uint64(i), 17)))
		lean := leaned(world)
		expanded := *lean
		expanded.VMs = throughCompact(t, world.VMs, lean.VMs)
		expanded.VMIs = throughCompact(t, world.VMIs, lean.VMIs)
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
// each of which must equal its lean counterpart in lean.
func throughCompact[T any, P interface {
	*T
	DeepCopyInto(*T)
}](t *testing.T, whole, lean []T) []T {
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
		if !reflect.DeepEqual(&out[i], &lean[i]) {
			t.Fatalf("expanded from compact:\n%#v\nlean:\n%#v", &out[i], &lean[i])
		}
	}
	return out
}
