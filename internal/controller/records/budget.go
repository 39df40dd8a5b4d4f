package records

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/blastradius"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/metrics"
)

// Budget is the blast-radius limit: at most max actions in any window of
// length interval, cluster-wide. When an action would exceed it, the budget
// trips and refuses every further action until an operator resets it: a
// storm of orphans means something else is wrong, and an operator should
// look. The trip is durable (breaker.go): it survives restarts and changes
// of leader, and only `tether controller reset-breaker` clears it.
//
// The window is counted from the Finding records on every take, so it
// holds every action whatever made it and whichever process: this one, an
// earlier one, the "on restart" mode or `tether fix --apply` (which records
// its actions in the controller's namespace). What this process reserved
// and its cache does not show yet is held in pending.
type Budget struct {
	mu     sync.Mutex
	limits blastradius.Limits
	// pending are this process's reservations by record key, until the
	// cache shows the record's claim (or they are refunded).
	pending map[string]time.Time
	// tripped: acting has stopped in this process.
	tripped bool
	// durable: the cache showed the breaker record tripped (written by
	// this process or another); from then on only the record clears it.
	durable bool
	// written: this process wrote its trip to the breaker record, as
	// tripped at writtenAt.
	written   bool
	writtenAt time.Time
}

// NewBudget is a budget of at most max actions within any window of length
// interval.
func NewBudget(max int, interval time.Duration) *Budget {
	return &Budget{limits: blastradius.Limits{Max: max, Interval: interval}, pending: map[string]time.Time{}}
}

// window is what the records show of the recent actions: the time of the
// last action of each record, by record key, which of them `tether fix`
// took (supervised), and the breaker's state.
type window struct {
	actions    map[string]time.Time
	supervised map[string]bool
	breaker    findingrecord.BreakerState
}

// take reserves one action for the record key at now, given what the
// records show; false means the limit is reached (now or earlier). One
// budget, two kinds of actions: the supervised ones (`tether fix --apply`,
// an operator at the prompt) count in the window like the controller's own,
// so the controller waits while they fill it (wait, until the first of them
// leaves it); but only the controller's own actions trip the breaker, which
// stops a storm of its own making until an operator looks.
func (b *Budget) take(now time.Time, key string, w window) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.breaker.Tripped {
		b.trip()
		b.durable = true
		return false, 0
	}
	if b.tripped {
		// Not recorded yet (the caller writes the record), or recorded and
		// not yet in the cache: the trip stands until an operator clears
		// the record that shows it.
		ownTripReset := b.written && w.breaker.TrippedAt.Equal(b.writtenAt.Truncate(time.Second)) && !w.breaker.ResetAt.IsZero()
		if !b.durable && !ownTripReset {
			return false, 0
		}
		// The record that showed the trip was reset (or deleted) by an
		// operator: acting resumes, counting from the reset.
		b.tripped, b.durable, b.written = false, false, false
		metrics.BlastRadiusTripped.Set(0)
	}
	win := b.count(now, w)
	switch win.Next(b.limits) {
	case blastradius.Trip:
		b.trip()
		return false, 0
	case blastradius.Wait:
		return false, win.Freed
	}
	b.pending[key] = now
	return true, 0
}

// count is the window that ends at now: the actions the records show
// since the last reset, and this process's reservations they do not show
// yet (one count: blastradius).
func (b *Budget) count(now time.Time, w window) blastradius.Window {
	for key, t := range b.pending {
		if rec, ok := w.actions[key]; !b.limits.Counts(t, now, time.Time{}) || ok && !rec.Before(t.Truncate(time.Second)) {
			// Out of any window, or the record shows this claim (stored
			// to the second).
			delete(b.pending, key)
		}
	}
	return blastradius.Count(b.limits, now, w.breaker.ResetAt, func(yield func(blastradius.Action) bool) {
		for key, t := range w.actions {
			if !yield(blastradius.Action{At: t, Supervised: w.supervised[key]}) {
				return
			}
		}
		for _, t := range b.pending {
			if !yield(blastradius.Action{At: t}) {
				return
			}
		}
	})
}

func (b *Budget) trip() {
	b.tripped = true
	metrics.BlastRadiusTripped.Set(1)
}

// unrecorded reports whether the process has tripped and has neither seen
// nor written the breaker record that shows it.
func (b *Budget) unrecorded() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tripped && !b.durable && !b.written
}

// recorded notes that this process wrote its trip to the breaker record as
// tripped at at (the trip becomes durable once the cache shows it).
func (b *Budget) recorded(at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.written, b.writtenAt = b.tripped, at
}

// refund gives back the reservation for key made at t, for an attempt that
// changed nothing (refused on the live re-check, or forbidden). It never
// clears a trip.
func (b *Budget) refund(key string, t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if got, ok := b.pending[key]; ok && got.Equal(t) {
		delete(b.pending, key)
	}
}

// IsTripped reports whether acting has stopped in this process.
func (b *Budget) IsTripped() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tripped
}

// recentActions returns, by record key, the time of each record's last
// action that changed something (outcome Applied or Pending) or may have
// (claimed Acting, outcome not recorded), within interval before now.
func recentActions(recs []v1alpha1.Finding, now time.Time, interval time.Duration) (map[string]time.Time, map[string]bool) {
	out, supervised := map[string]time.Time{}, map[string]bool{}
	for _, rec := range recs {
		if findingrecord.InWindow(&rec, now, interval) {
			out[recordKey(&rec)] = rec.Status.LastAttempt.Time
			if findingrecord.Supervised(&rec) {
				supervised[recordKey(&rec)] = true
			}
		}
	}
	return out, supervised
}

// take reserves one action for the record rec at now, counting every
// action the Finding records in the cache show; false means the
// blast-radius limit is reached, now or earlier (durably: see breaker).
func (rs *Keeper) take(ctx context.Context, now time.Time, rec *v1alpha1.Finding) (ok bool, wait time.Duration, err error) {
	w, err := rs.window(ctx, now)
	if err != nil {
		return false, 0, err
	}
	ok, wait = rs.Budget.take(now, recordKey(rec), w)
	if ok || wait > 0 {
		return ok, wait, nil
	}
	if rs.Budget.unrecorded() {
		if err := findingrecord.TripBreaker(ctx, rs.Live, rs.Namespace, now, rs.blastRadiusMessage()); err != nil {
			// The trip holds in this process; the next action tries again.
			rs.Log.Error(err, "blast-radius trip not recorded; acting stays stopped in this process")
		} else {
			rs.Budget.recorded(now)
			rs.Log.Info("blast-radius limit reached; acting stopped until an operator resets it",
				"breaker", rs.Namespace+"/"+findingrecord.BreakerName, "maxActions", rs.Config.BlastRadius.MaxActions)
		}
	}
	return false, 0, nil
}

// window reads what the records show: the recent actions and the breaker.
func (rs *Keeper) window(ctx context.Context, now time.Time) (window, error) {
	br, err := findingrecord.Breaker(ctx, rs.Cache, rs.Namespace)
	if err != nil {
		return window{}, err
	}
	var list v1alpha1.FindingList
	if err := rs.Cache.List(ctx, &list); err != nil {
		return window{}, fmt.Errorf("reading the Finding records for the action budget: %w", err)
	}
	actions, supervised := recentActions(list.Items, now, rs.Budget.limits.Interval)
	return window{actions: actions, supervised: supervised, breaker: br}, nil
}

// actedOn reports whether the record's last action changed something or
// may have: Applied, Pending, or resolved after a claim whose outcome was
// never stored.
func actedOn(rec *v1alpha1.Finding) bool { return findingrecord.ActedOn(rec) }

func recordKey(rec *v1alpha1.Finding) string { return rec.Namespace + "/" + rec.Name }
