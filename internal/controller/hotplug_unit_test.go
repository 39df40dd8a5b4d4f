package controller

import (
	"testing"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// The hot-plug loop decides as the audit does only if its gatherer reads
// every kind its checks read, and a change of each wakes the loop: the rows
// of LoopHotplug read within observe.VMIKinds, and every kind of it has a
// watch (the VMIs' own by For, the rest in watches).
func TestHotplugLoop_readsAndWatchesWhatItsRowsRead(t *testing.T) {
	if reads := check.Reads(check.InLoop(check.LoopHotplug)); reads&^observe.VMIKinds != 0 {
		t.Errorf("the hot-plug loop's checks read %s; its gatherer reads only %s", reads&^observe.VMIKinds, observe.VMIKinds)
	}
	r := &HotplugReconciler{}
	for k := snapshot.Kinds(1); k != 0 && k <= observe.VMIKinds; k <<= 1 {
		if observe.VMIKinds&k != 0 && len(r.watches(k)) != 1 {
			t.Errorf("the hot-plug loop reads %s but watches it %d times", k, len(r.watches(k)))
		}
	}
}
