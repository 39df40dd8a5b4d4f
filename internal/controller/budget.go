package controller

import (
	"sync"
	"time"

	"github.com/tether-dev/tether/internal/metrics"
)

// budget is the blast-radius limit: at most max actions in any window of
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

// trip stops acting, as an exceeded limit does (a trip recorded by an
// earlier process).
func (b *budget) trip() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tripped = true
	metrics.BlastRadiusTripped.Set(1)
}
