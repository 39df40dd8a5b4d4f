package records

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/findingrecord"
)

// referenceCount is the budget's count as it was written before the one
// count (internal/blastradius) took its place: each recorded action in the
// window since the reset, own or supervised, this process's reservations
// the records do not show yet, and how long until the first supervised
// action leaves the window.
func referenceCount(interval time.Duration, pending map[string]time.Time, now time.Time, w window) (own, supervised int, freed time.Duration) {
	in := func(t time.Time) bool { return now.Sub(t) < interval && !t.Before(w.breaker.ResetAt) }
	for key, t := range w.actions {
		if !in(t) {
			continue
		}
		if w.supervised[key] {
			supervised++
			if left := t.Add(interval).Sub(now); freed == 0 || left < freed {
				freed = left
			}
			continue
		}
		own++
	}
	for key, t := range pending {
		switch rec, ok := w.actions[key]; {
		case now.Sub(t) >= interval:
			delete(pending, key)
		case ok && !rec.Before(t.Truncate(time.Second)):
			delete(pending, key)
		case in(t):
			own++
		}
	}
	return own, supervised, freed
}

// The budget counts through the one count exactly as it counted by hand:
// over random histories of recorded, supervised and reserved actions and
// resets, the window and the reservations kept are the same.
func TestBudget_countAsBefore(t *testing.T) {
	r := rand.New(rand.NewPCG(47, 4))
	t0 := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	for i := range 2000 {
		interval := time.Duration(1+r.IntN(30)) * time.Minute
		now := t0.Add(time.Duration(r.IntN(3600)) * time.Second)
		w := window{actions: map[string]time.Time{}, supervised: map[string]bool{}}
		if r.IntN(3) == 0 {
			w.breaker = findingrecord.BreakerState{ResetAt: now.Add(-time.Duration(r.IntN(40)) * time.Minute)}
		}
		pending := map[string]time.Time{}
		for k := range r.IntN(12) {
			key := fmt.Sprintf("ns/r%d", k)
			at := now.Add(-time.Duration(r.IntN(45*60)) * time.Second).Add(time.Duration(r.IntN(1000)) * time.Millisecond)
			switch r.IntN(4) {
			case 0:
				pending[key] = at
			case 1:
				pending[key] = at
				w.actions[key] = at.Truncate(time.Second).Add(-time.Duration(r.IntN(2)) * time.Second)
			case 2:
				w.actions[key], w.supervised[key] = at.Truncate(time.Second), true
			default:
				w.actions[key] = at.Truncate(time.Second)
			}
		}
		b := NewBudget(1+r.IntN(10), interval)
		b.pending = maps.Clone(pending)
		got := b.count(now, w)
		own, sup, freed := referenceCount(interval, pending, now, w)
		if got.Own != own || got.Supervised != sup || got.Freed != freed || !maps.Equal(b.pending, pending) {
			t.Fatalf("history %d: count %+v, pending %v; before: own %d supervised %d freed %s, pending %v", i, got, b.pending, own, sup, freed, pending)
		}
	}
}
