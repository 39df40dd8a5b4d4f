package runstate

import (
	"context"
	"fmt"
	"time"

	"github.com/tether-dev/tether/internal/drift"
)

// Breaker is the plan driver's Breaker (and Limiter) over a Store: it
// refuses a run while the breaker is tripped, lets each action through
// only while the window has room (tripping the breaker, durably, when it
// has none), and records each action taken. The run holds the Store's
// lock (Lock) from before its first survey to its end.
type Breaker struct {
	Store  Store
	Limits Limits
	// ResetCommand is the command that resets the breaker, for messages.
	ResetCommand string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Tripped is told when this run trips the breaker.
	Tripped func(State)

	state  State
	loaded bool
	// err is a failure to store an action: no further action is taken,
	// since it could not be counted.
	err error
}

func (b *Breaker) now() time.Time {
	if b.Now == nil {
		return time.Now()
	}
	return b.Now()
}

func (b *Breaker) load(ctx context.Context) error {
	if b.loaded {
		return nil
	}
	s, err := b.Store.Load(ctx)
	if err != nil {
		return err
	}
	b.state, b.loaded = s, true
	return nil
}

// State is the state as this run last read or changed it.
func (b *Breaker) State(ctx context.Context) (State, error) {
	err := b.load(ctx)
	return b.state, err
}

// Allows refuses the run while the breaker is tripped.
func (b *Breaker) Allows(ctx context.Context) error {
	b.loaded = false // read afresh, under the run's lock
	if err := b.load(ctx); err != nil {
		return err
	}
	if b.state.Tripped {
		return fmt.Errorf("nothing was changed: %s: %w", b.Store.Where(), b.state.TrippedError(b.ResetCommand))
	}
	return nil
}

// Take lets one more action through while the window has room; when it
// has none, the breaker trips and is stored, and the error says so.
func (b *Breaker) Take(ctx context.Context, _ drift.Finding) error {
	if b.err != nil {
		return b.err
	}
	if err := b.load(ctx); err != nil {
		return err
	}
	was := b.state.Tripped
	err := b.state.Take(b.now(), b.Limits, b.ResetCommand)
	if err != nil && !was {
		if serr := b.Store.Save(ctx, b.state); serr != nil {
			return fmt.Errorf("%v (the trip could not be stored: %v)", err, serr)
		}
		if b.Tripped != nil {
			b.Tripped(b.state)
		}
	}
	return err
}

// Count records an action that changed something or may have; a failure
// to store it stops the run's later actions (Take).
func (b *Breaker) Count(ctx context.Context, f drift.Finding, r drift.Result) {
	if err := b.load(ctx); err != nil {
		b.err = err
		return
	}
	b.state.Record(Action{At: b.now(), Check: f.Check, Finding: f.ID, Object: f.Object.Kind + "/" + string(f.Object.UID), Volume: f.Volume, Outcome: string(r.Outcome)}, b.Limits)
	if err := b.Store.Save(ctx, b.state); err != nil {
		b.err = fmt.Errorf("the action on %s could not be counted in the %s (%v): no further action is taken", f.ID, b.Store.Where(), err)
	}
}

// Tell says what the run's planned actions do to the window.
func (b *Breaker) Tell(ctx context.Context, planned int) string {
	if err := b.load(ctx); err != nil {
		return fmt.Sprintf("warning: %v", err)
	}
	s, now, l := b.state, b.now(), b.Limits
	if s.Tripped {
		return fmt.Sprintf("note: the blast-radius breaker in the %s is tripped since %s (%s): --apply changes nothing until `%s`",
			b.Store.Where(), s.TrippedAt.UTC().Format(time.RFC3339), s.Message, b.ResetCommand)
	}
	w := s.Window(now, l)
	head := fmt.Sprintf("note: blast-radius window (%s): %d of %d actions in the last %s", b.Store.Where(), w.Total(), l.Max, l.Interval)
	switch room := w.Room(l); {
	case planned == 0:
		return head
	case planned <= room:
		return head + fmt.Sprintf("; this run's %d planned action(s) fit", planned)
	default:
		return head + fmt.Sprintf("; of this run's %d planned action(s) only %d fit: the next trips the breaker, and no run acts until `%s`", planned, room, b.ResetCommand)
	}
}

// Reset clears a trip of the breaker in store at now, under the store's
// lock; false when it was not tripped. It returns the state before.
func Reset(ctx context.Context, store Store, holder, by string, now time.Time) (State, bool, error) {
	if err := store.Lock(ctx, holder, now, time.Minute); err != nil {
		return State{}, false, err
	}
	defer store.Unlock(ctx)
	s, err := store.Load(ctx)
	if err != nil {
		return State{}, false, err
	}
	before := s
	if !s.Reset(now, by) {
		return before, false, nil
	}
	return before, true, store.Save(ctx, s)
}
