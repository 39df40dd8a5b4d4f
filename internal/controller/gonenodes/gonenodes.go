// Package gonenodes is the controller's memory of since when the Nodes
// that VolumeAttachments refer to have been missing.
package gonenodes

import (
	"maps"
	"sync"
	"time"

	storagev1 "k8s.io/api/storage/v1"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// Nodes is the controller's knowledge of since when Nodes that
// VolumeAttachments refer to have been missing. It lives in memory and is
// made durable through the StaleVolumeAttachment records
// (status.nodeGoneSince), from which it is seeded once after a start.
//
// It errs on the side of a shorter time: a node is counted from the first
// pass that saw it missing; a node seen again, in a pass or in any Node
// event between passes, is forgotten; a record counts only for the time its
// writer watched the node missing, and not across a gap in observation
// longer than findingrecord.MaxBlindGap. What no one can see is a Node that comes
// and goes while no controller runs, or between two LISTs of an informer
// re-list: the gap bound limits that window.
type Nodes struct {
	since  map[string]time.Time
	seeded bool

	mu      sync.Mutex
	touched map[string]bool // Nodes seen in events since the last pass
}

// Touch records that Node name was seen (created or updated) in an event.
func (g *Nodes) Touch(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.touched == nil {
		g.touched = map[string]bool{}
	}
	g.touched[name] = true
}

// TakeTouched returns and clears the Nodes seen since the last call.
func (g *Nodes) TakeTouched() map[string]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.touched
	g.touched = nil
	return t
}

// Seed takes the "gone since" times that open StaleVolumeAttachment records
// in the controller's namespace ns of the VolumeAttachments vas prove
// (findingrecord.NodesGone), and returns why other records were not
// used. Only the first call counts.
func (g *Nodes) Seed(recs []*v1alpha1.Finding, vas []storagev1.VolumeAttachment, ns string, now time.Time) []string {
	if g.seeded {
		return nil
	}
	g.seeded = true
	var ignored []string
	g.since, ignored = findingrecord.NodesGone(recs, vas, ns, now)
	return ignored
}

// Observe updates the knowledge from one pass: a node that a
// VolumeAttachment refers to and that is missing is gone since now unless
// it was already known gone; a node that exists, or that no
// VolumeAttachment refers to any more, is forgotten.
func (g *Nodes) Observe(s *snapshot.Snapshot, now time.Time) {
	if g.since == nil {
		g.since = map[string]time.Time{}
	}
	exists := make(map[string]bool, len(s.Nodes))
	for i := range s.Nodes {
		exists[s.Nodes[i].Name] = true
	}
	missing := map[string]bool{}
	for i := range s.VolumeAttachments {
		if n := s.VolumeAttachments[i].Spec.NodeName; n != "" && !exists[n] {
			missing[n] = true
		}
	}
	seen := g.TakeTouched()
	for n := range g.since {
		if !missing[n] || seen[n] {
			delete(g.since, n)
		}
	}
	for n := range missing {
		if _, ok := g.since[n]; !ok {
			g.since[n] = now
		}
	}
}

// Copy returns a copy of the knowledge, for a snapshot or an executor.
func (g *Nodes) Copy() map[string]time.Time { return maps.Clone(g.since) }

// NextFencing returns how long until the next known gone node has been gone
// for after (the fencing rule's period), or 0 when none is pending or the
// rule is off.
func (g *Nodes) NextFencing(after time.Duration, now time.Time) time.Duration {
	if after <= 0 {
		return 0
	}
	var next time.Duration
	for _, since := range g.since {
		// One second more: stored times have second precision.
		if d := since.Add(after).Sub(now) + time.Second; d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next
}

// Seeded says whether Seed has run.
func (g *Nodes) Seeded() bool { return g.seeded }

// Any says whether some Node is counted as gone.
func (g *Nodes) Any() bool { return len(g.since) > 0 }
