// Package blastradius is the one count behind every blast-radius limit of
// tether: the controller's budget, `tether fix`'s note on the controller's
// window and `tether openstack fix`'s breaker over its run state. Each keeps
// its actions where it must (Finding records, a state file, a switch
// record); all of them ask this package which actions count, how full the
// window is and whether one more action fits, so the three cannot drift
// apart. It is pure: no clock, no client, no store.
package blastradius

import (
	"iter"
	"time"
)

// Limits bound the actions: at most Max within any window of length
// Interval.
type Limits struct {
	Max      int
	Interval time.Duration
}

// Counts reports whether an action at at lies in the window that ends at
// now: less than Interval before now, and not before the last reset of the
// breaker (resetAt; zero when never reset).
func (l Limits) Counts(at, now, resetAt time.Time) bool {
	return now.Sub(at) < l.Interval && !at.Before(resetAt)
}

// Action is one action as a store shows it: when, and whether an operator
// took it (`tether fix --apply` under supervision) rather than the
// automation whose storm the breaker stops.
type Action struct {
	At         time.Time
	Supervised bool
}

// Window is how full the window is at one moment.
type Window struct {
	// Own are the automation's actions in the window; Supervised the
	// operator's.
	Own, Supervised int
	// Freed is how long until the first supervised action leaves the
	// window (zero when none is in it).
	Freed time.Duration
}

// Count is the window that ends at now over actions, since resetAt.
func Count(l Limits, now, resetAt time.Time, actions iter.Seq[Action]) Window {
	var w Window
	for a := range actions {
		if !l.Counts(a.At, now, resetAt) {
			continue
		}
		if !a.Supervised {
			w.Own++
			continue
		}
		w.Supervised++
		if left := a.At.Add(l.Interval).Sub(now); w.Freed == 0 || left < w.Freed {
			w.Freed = left
		}
	}
	return w
}

// Total is every action in the window, the automation's and the
// operator's.
func (w Window) Total() int { return w.Own + w.Supervised }

// Room is how many more actions fit under l (never below zero).
func (w Window) Room(l Limits) int { return max(l.Max-w.Total(), 0) }

// Verdict is what the limit says of one more action of the automation.
type Verdict int

const (
	// Fits: the action may be taken.
	Fits Verdict = iota
	// Wait: the window is full, but with the operator's actions; the
	// automation waits (Window.Freed) and nothing trips.
	Wait
	// Trip: the automation's own actions fill the window: a storm of its
	// own making, which trips the breaker until an operator looks.
	Trip
)

// Next decides one more action of the automation: the operator's actions
// fill the window like the automation's own, but only the automation's
// own trip the breaker.
func (w Window) Next(l Limits) Verdict {
	switch {
	case w.Own >= l.Max:
		return Trip
	case w.Total() >= l.Max:
		return Wait
	}
	return Fits
}
