// Package runstate is what one-shot fix runs (a cron job of `tether
// openstack fix --apply`) keep between runs, where the operator gives them a
// place: the blast-radius window (the actions of the recent runs), its
// breaker (tripped when a run would act beyond the window's limit, until an
// operator resets it) and a lock that lets one run act at a time. Two
// stores hold it: a state file (FileStore) and a switch record in a
// Kubernetes namespace (RecordStore, the controller's record code).
//
// The window and the breaker's decisions are pure (State); the stores only
// read and write. This package never acts on a platform's objects.
package runstate

import (
	"fmt"
	"time"

	"github.com/tether-dev/tether/internal/blastradius"
)

// Action is one action of a run that changed something or may have
// (Applied, Pending).
type Action struct {
	At      time.Time `json:"at"`
	Check   string    `json:"check"`
	Finding string    `json:"finding"`
	Object  string    `json:"object"`
	Volume  string    `json:"volume,omitempty"`
	Outcome string    `json:"outcome"`
}

// Lock says which run holds the state, until when (a run that died leaves
// a lock that ends by itself).
type Lock struct {
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// State is the durable state of the runs.
type State struct {
	// Tripped: a run stopped acting at TrippedAt, because Message; no run
	// acts until an operator resets it (ResetAt, ResetBy).
	Tripped   bool      `json:"tripped"`
	TrippedAt time.Time `json:"trippedAt,omitzero"`
	Message   string    `json:"message,omitempty"`
	ResetAt   time.Time `json:"resetAt,omitzero"`
	ResetBy   string    `json:"resetBy,omitempty"`
	// Actions are the recent actions (Prune drops the old ones).
	Actions []Action `json:"actions,omitempty"`
	// Lock is the run that holds the state (a record's lock; a file is
	// locked by the kernel instead).
	Lock *Lock `json:"lock,omitempty"`
}

// Limits bound the actions of all runs: at most Max within any window of
// length Interval (the one count of every blast-radius limit).
type Limits = blastradius.Limits

// Defaults of the runs' limit: two full runs of `fix --max 10` fit in an
// hour; a third trips the breaker.
const (
	DefaultMaxActions = 20
	DefaultInterval   = time.Hour
)

// Kept is how long actions are kept at least, whatever the interval.
const Kept = 24 * time.Hour

// Window is the runs' window that ends at now: every action of a run
// since the last reset is the automation's own (a run trips the breaker).
func (s *State) Window(now time.Time, l Limits) blastradius.Window {
	return blastradius.Count(l, now, s.ResetAt, func(yield func(blastradius.Action) bool) {
		for _, a := range s.Actions {
			if !yield(blastradius.Action{At: a.At}) {
				return
			}
		}
	})
}

// InWindow counts the actions within l.Interval before now, since the
// last reset.
func (s *State) InWindow(now time.Time, l Limits) int { return s.Window(now, l).Total() }

// Take decides whether one more action fits the window at now. When it
// does not, the breaker trips (recorded in s; the caller stores it) and the
// error says why and how to reset (reset is that command).
func (s *State) Take(now time.Time, l Limits, reset string) error {
	if s.Tripped {
		return s.TrippedError(reset)
	}
	if w := s.Window(now, l); w.Next(l) != blastradius.Fits {
		n := w.Total()
		s.Tripped, s.TrippedAt, s.ResetBy = true, now, ""
		s.Message = fmt.Sprintf("%d actions within %s, the limit (--blast-radius-max-actions %d per --blast-radius-interval %s): a storm of drift means something else is wrong", n, l.Interval, l.Max, l.Interval)
		return s.TrippedError(reset)
	}
	return nil
}

// TrippedError says that the breaker is tripped and how to go on.
func (s *State) TrippedError(reset string) error {
	return &Tripped{At: s.TrippedAt, Message: s.Message, Reset: reset}
}

// Tripped is the error of an action or run the tripped breaker refuses.
type Tripped struct {
	At             time.Time
	Message, Reset string
}

func (e *Tripped) Error() string {
	return fmt.Sprintf("the blast-radius breaker tripped at %s (%s); no run acts until an operator investigates and runs `%s`",
		e.At.UTC().Format(time.RFC3339), e.Message, e.Reset)
}

// Record adds an action and drops the ones no window counts any more.
func (s *State) Record(a Action, l Limits) {
	s.Actions = append(s.Actions, a)
	s.Prune(a.At, l)
}

// Prune drops the actions older than the interval (and than Kept) and
// those before the last reset.
func (s *State) Prune(now time.Time, l Limits) {
	keep := max(l.Interval, Kept)
	out := s.Actions[:0]
	for _, a := range s.Actions {
		if now.Sub(a.At) < keep && !a.At.Before(s.ResetAt) {
			out = append(out, a)
		}
	}
	s.Actions = out
}

// Reset clears a trip at now; false when it was not tripped. Actions
// before now no longer count.
func (s *State) Reset(now time.Time, by string) bool {
	if !s.Tripped {
		return false
	}
	s.Tripped, s.ResetAt, s.ResetBy = false, now, by
	return true
}
