package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/act"
	"github.com/tether-dev/tether/internal/metrics"
)

// budget is the blast-radius limit (records.take reserves from it and
// seeds it from the Finding records): at most max actions in any window of
// length interval, cluster-wide. When an action would exceed it, the budget
// trips and refuses every further action until the process restarts: a storm
// of orphans means something else is wrong, and an operator should look.
//
// The window survives a restart or a change of leader: before the first
// take, the reconciler seeds it with the actions its Finding records show.
type budget struct {
	mu       sync.Mutex
	max      int
	interval time.Duration
	taken    []time.Time
	tripped  bool
	seeded   bool
}

func newBudget(max int, interval time.Duration) *budget {
	return &budget{max: max, interval: interval}
}

// take reserves one action at now; false means the limit is reached.
func (b *budget) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tripped {
		return false
	}
	keep := b.taken[:0]
	for _, t := range b.taken {
		if now.Sub(t) < b.interval {
			keep = append(keep, t)
		}
	}
	b.taken = keep
	if len(b.taken) >= b.max {
		b.tripped = true
		metrics.BlastRadiusTripped.Set(1)
		return false
	}
	b.taken = append(b.taken, now)
	return true
}

// seed adds the times of earlier actions to the window; only the first
// call counts.
func (b *budget) seed(actions []time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seeded {
		return
	}
	b.seeded = true
	b.taken = append(b.taken, actions...)
}

// isSeeded reports whether seed was called.
func (b *budget) isSeeded() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seeded
}

// refund gives back the action reserved at t, for an attempt that changed
// nothing (refused on the live re-check). It never clears a trip.
func (b *budget) refund(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.taken) - 1; i >= 0; i-- {
		if b.taken[i].Equal(t) {
			b.taken = append(b.taken[:i], b.taken[i+1:]...)
			return
		}
	}
}

// isTripped reports whether acting has stopped.
func (b *budget) isTripped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tripped
}

// take seeds the budget window if it was not yet, and reserves one action
// at now; false means the blast-radius limit is reached.
func (rs *records) take(ctx context.Context, now time.Time) (bool, error) {
	if err := rs.seedBudget(ctx, now); err != nil {
		return false, err
	}
	return rs.Budget.take(now), nil
}

// seedBudget fills the blast-radius window, once, from the actions that the
// Finding records show within it, so that a restart or a change of leader
// does not reset the window.
func (rs *records) seedBudget(ctx context.Context, now time.Time) error {
	if !rs.Seeded || rs.Budget.isSeeded() {
		return nil
	}
	var list v1alpha1.FindingList
	if err := rs.Cache.List(ctx, &list); err != nil {
		return fmt.Errorf("reading the Finding records for the action budget: %w", err)
	}
	rs.Budget.seed(recentActions(list.Items, now, rs.Budget.interval))
	return nil
}

// recentActions returns the times of the actions that changed something
// (outcome Applied or Pending), or may have (claimed Acting, outcome not
// recorded), within interval before now.
func recentActions(recs []v1alpha1.Finding, now time.Time, interval time.Duration) []time.Time {
	var out []time.Time
	for _, rec := range recs {
		la := rec.Status.LastAttempt
		if la == nil || now.Sub(la.Time) >= interval {
			continue
		}
		if rec.Status.Reason == string(act.Applied) || rec.Status.Reason == string(act.Pending) || rec.Status.Phase == v1alpha1.PhaseActing {
			out = append(out, la.Time)
		}
	}
	return out
}
