package plan

import (
	"fmt"
	"time"

	"github.com/tether-dev/tether/internal/drift"
)

// Sightings remember when each finding was first seen: the first-sighting
// stage. A one-shot run keeps them in memory (Memory); the controller keeps
// them in its durable Finding records, so that a restart does not reset the
// grace period.
type Sightings interface {
	// FirstSeen is when the finding id was first seen, if it was.
	FirstSeen(id string) (time.Time, bool)
}

// Memory is the first-sighting store of a one-shot run.
type Memory map[string]time.Time

// FirstSeen implements Sightings.
func (m Memory) FirstSeen(id string) (time.Time, bool) {
	t, ok := m[id]
	return t, ok
}

// Sighted records that id was seen at t, unless it was seen before.
func (m Memory) Sighted(id string, t time.Time) {
	if _, ok := m[id]; !ok {
		m[id] = t
	}
}

// FirstSighting holds every finding whose action would otherwise be safe
// until it was first seen at least its grace before now, and says in its
// evidence how long ago it was first seen (and that command, the fix
// command, observes twice). A finding whose grace is zero needs one
// sighting and is left as it is. It returns fs, changed in place.
func FirstSighting(fs []drift.Finding, seen Sightings, graceOf func(drift.Finding) time.Duration, now time.Time, command string) []drift.Finding {
	for i := range fs {
		f := &fs[i]
		grace := graceOf(*f)
		if !f.Action.Safe || grace <= 0 {
			continue
		}
		first, ok := seen.FirstSeen(f.ID)
		switch {
		case ok && !first.After(now.Add(-grace)):
			f.Evidence = append(f.Evidence, fmt.Sprintf("first seen %s ago (grace %s)", now.Sub(first).Round(time.Second), grace))
		case ok:
			f.Block(drift.NotSeenTwice, fmt.Sprintf("first seen %s ago: not yet the grace period (%s) apart", now.Sub(first).Round(time.Second), grace))
		default:
			f.Block(drift.NotSeenTwice, fmt.Sprintf("seen once: acted on only when seen again at least %s later (%s observes twice, that far apart)", grace, command))
		}
	}
	return fs
}

// Every is the grace of a platform whose findings all need to be seen
// twice d apart.
func Every(d time.Duration) func(drift.Finding) time.Duration {
	return func(drift.Finding) time.Duration { return d }
}
