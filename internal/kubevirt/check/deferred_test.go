package check

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/plan"
)

// TestDeferredWordsAreRunsWords: RunDeferred decides what Run decides, and
// the words it defers, written when asked for (after the first-sighting
// stage has blocked and added its evidence, as `tether audit` does), are
// Run's, byte for byte, over the random cluttered worlds of
// TestLeanObjectsDecideAlike. Before they are written, the deferred
// findings hold no words.
func TestDeferredWordsAreRunsWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 9))
	n := 4000
	if testing.Short() {
		n = 800
	}
	deferred, words, blocked := map[string]int{}, 0, 0
	sight := func(fs []drift.Finding) []drift.Finding {
		return plan.FirstSighting(fs, plan.Memory{}, plan.Every(time.Minute), now, "tether fix")
	}
	for i := 0; i < n; i++ {
		data := leanInput(rng)
		world, p, now := leanWorld(data)
		clutter(world, rand.New(rand.NewPCG(uint64(i), 19)))
		s := snapshot.New(*world)
		want := findingsJSON(t, sight(Run(s, p, now)))
		fs := sight(RunDeferred(s, p, now))
		for j := range fs {
			f := &fs[j]
			if !f.Deferred() {
				words++
				continue
			}
			deferred[f.Check]++
			if len(f.Evidence) > 0 {
				blocked++ // evidence the first-sighting stage added
			}
			if f.Message != "" || f.Action.Remedy != "" {
				t.Fatalf("input %x: a deferred finding holds words: %+v", data, *f)
			}
			if c := f.Written(); !f.Deferred() || c.Deferred() {
				t.Fatalf("input %x: Written wrote into the finding, or left the copy deferred", data)
			}
		}
		drift.WriteAll(fs)
		if got := findingsJSON(t, fs); !bytes.Equal(got, want) {
			t.Fatalf("input %x: the deferred findings, written, differ from Run's\nRun:      %s\ndeferred: %s", data, want, got)
		}
	}
	if deferred[OrphanHotplugVolume] == 0 || deferred[DanglingVolumeReference] == 0 || words == 0 || blocked == 0 {
		t.Errorf("deferred %v (%d with evidence added before their words), with words %d: the comparison proves little", deferred, blocked, words)
	}
	t.Logf("deferred %v (%d with evidence added before their words); %d findings of other checks kept their words", deferred, blocked, words)
}
