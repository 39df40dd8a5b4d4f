package snapshot

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

func sameMemory(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestCompactInternsWhatObjectsRepeat: two compact VMIs decoded apart
// (every string their own copy) share one copy of their namespace, owner
// apiVersion and kind, label keys, node name and phases, and keep their
// values equal.
func TestCompactInternsWhatObjectsRepeat(t *testing.T) {
	decoded := func() *kubevirtv1.VirtualMachineInstance {
		vmi := fullVMI()
		// Fresh copies of every string, as a decoder makes them.
		vmi.Namespace = strings.Clone(vmi.Namespace)
		vmi.OwnerReferences[0].APIVersion = strings.Clone(vmi.OwnerReferences[0].APIVersion)
		vmi.OwnerReferences[0].Kind = strings.Clone(vmi.OwnerReferences[0].Kind)
		vmi.Labels = map[string]string{strings.Clone("cluster"): "c1"}
		vmi.Status.NodeName = strings.Clone(vmi.Status.NodeName)
		vmi.Status.Phase = kubevirtv1.VirtualMachineInstancePhase(strings.Clone(string(vmi.Status.Phase)))
		vmi.Status.VolumeStatus[0].Phase = kubevirtv1.VolumePhase(strings.Clone(string(vmi.Status.VolumeStatus[0].Phase)))
		return vmi
	}
	a, b := Compact(decoded()).(*CompactVMI), Compact(decoded()).(*CompactVMI)
	for what, pair := range map[string][2]string{
		"namespace":          {a.Namespace, b.Namespace},
		"owner apiVersion":   {a.OwnerReferences[0].APIVersion, b.OwnerReferences[0].APIVersion},
		"owner kind":         {a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		"label key":          {a.labels[0].key, b.labels[0].key},
		"node":               {a.nodeName, b.nodeName},
		"phase":              {string(a.phase), string(b.phase)},
		"volume phase":       {string(a.volumeStatus[0].phase), string(b.volumeStatus[0].phase)},
		"an active pod node": {a.activePods[0].node, b.activePods[0].node},
	} {
		if pair[0] != pair[1] || !sameMemory(pair[0], pair[1]) {
			t.Errorf("%s: %q and %q are not one interned string", what, pair[0], pair[1])
		}
	}
	if !reflect.DeepEqual(Expand(a), Lean(fullVMI())) {
		t.Error("interning changed a value")
	}
}

// TestInternTableIsBounded: past its bound the table keeps strings as they
// come, and adds nothing.
func TestInternTableIsBounded(t *testing.T) {
	table := &internTable{max: 2}
	x, y := table.of("x"), table.of("y")
	if z := strings.Clone("z"); !sameMemory(table.of(z), z) || len(table.m) != 2 {
		t.Errorf("a full table added %q (%d entries)", z, len(table.m))
	}
	if again := strings.Clone("x"); table.of(again) != x || !sameMemory(table.of(again), x) || !sameMemory(table.of("y"), y) {
		t.Error("a full table no longer gives its strings")
	}
	if table.of("") != "" {
		t.Error("the empty string changed")
	}
}
