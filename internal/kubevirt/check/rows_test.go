package check

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// Every row is complete, its page exists, and what the check finds agrees
// with the row: over generated worlds, each finding is about one of the
// row's subjects and proposes one of the row's actions (or none). A row
// that forgets an action or a subject fails here, not in the field.
func TestRowsAreCompleteAndTrue(t *testing.T) {
	rows := All()
	byName := map[string]Check{}
	for _, c := range rows {
		if why := c.Incomplete(); why != "" {
			t.Errorf("row %s: %s", c.Name, why)
		}
		if c.Run == nil || c.Reads == 0 {
			t.Errorf("row %s: no Run or no Reads", c.Name)
		}
		if len(c.Actions) > 0 && (c.Events.Applied == "" || c.Events.Failed == "") {
			t.Errorf("row %s proposes actions but names no Event reasons", c.Name)
		}
		if _, err := os.Stat(filepath.Join("..", "..", "..", c.Page)); err != nil {
			t.Errorf("row %s: page %s: %v", c.Name, c.Page, err)
		}
		byName[c.Name] = c
	}
	seen := map[string]bool{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		b := make([]byte, 64+r.IntN(512))
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		g := &gen{b: b}
		s, p, now := g.build()
		p.Checks = nil
		found := Run(s, p, now)
		// The storage worlds of the VolumeAttachment fuzz test too.
		items, vp := vaWorld(b[:2])
		found = append(found, Run(fixture.Snapshot(items...), vp, now)...)
		// The worlds of the tenant attach checks.
		found = append(found, Run(fixture.Snapshot(tenantAttachGen(b)...), DefaultPolicy(), now)...)
		for _, f := range found {
			c, ok := byName[f.Check]
			if !ok {
				t.Fatalf("finding of check %s, which has no row", f.Check)
			}
			seen[f.Check] = true
			if !slices.Contains(c.Subjects, f.Object.Kind) {
				t.Fatalf("%s found a %s, not among its row's subjects %v", f.Check, f.Object.Kind, c.Subjects)
			}
			if f.Action.Type != drift.None && !slices.Contains(c.Actions, f.Action.Type) {
				t.Fatalf("%s proposed %s, not among its row's actions %v", f.Check, f.Action.Type, c.Actions)
			}
		}
	}
	for _, name := range []string{OrphanHotplugVolume, DanglingVolumeReference, StaleVolumeAttachment, PhantomAttach, StuckPublish, AttachAlreadyPresent} {
		if !seen[name] {
			t.Errorf("the generated worlds never made a %s finding: the test does not reach it", name)
		}
	}
}

// The controller's checks are the rows that name a loop.
func TestInLoop(t *testing.T) {
	if got := InLoop(); !slices.Equal(got, []string{OrphanHotplugVolume, StaleVolumeAttachment, MultiAttachConflict, BlockedDeletion, PhantomAttach, StuckPublish, AttachAlreadyPresent}) {
		t.Fatalf("controller checks %v", got)
	}
	if got := InLoop(LoopStorage); !slices.Equal(got, []string{StaleVolumeAttachment, MultiAttachConflict, BlockedDeletion}) {
		t.Fatalf("storage checks %v", got)
	}
}
