// Package plan is the one plan/apply driver under every command of every
// platform: observe (the platform's Survey) → first sighting → plan
// (--check, --object, --max) → reviewed plan (--plan) → breaker → apply
// (the platform's Fix, one finding at a time) → outcomes. A platform plugs
// in as a Fixer; the command line only binds flags to Options and prints
// the Report.
//
// This package decides nothing about any platform's objects: it orders,
// bounds and records what the platform's checks decided. It never acts on a
// finding its check did not mark safe, never on more than --max, never
// while the breaker refuses, and never on a finding of a reviewed plan that
// changed since the review.
package plan

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tether-dev/tether/internal/drift"
)

// Fixer is one platform as the driver drives it.
type Fixer interface {
	// Survey observes the platform once and runs its selected checks.
	Survey(ctx context.Context) (Survey, error)
	// Fix carries out one planned finding's action, only after the
	// platform's live re-read and re-check, and says how it ended.
	Fix(ctx context.Context, f drift.Finding) drift.Result
	// SeenTwice is how far apart a one-shot run must see the finding twice
	// before its action may be safe; zero when one sighting suffices (the
	// platform's checks hold what is too young themselves). A platform may
	// ask it of some checks only: the driver waits only when a finding of
	// the first survey needs it.
	SeenTwice(f drift.Finding) time.Duration
}

// An ObjectResolver is a Fixer that resolves --object itself, from its
// latest survey: by ID or name, and for objects the findings name only
// indirectly (a server, for the attachments held for it). An object the
// survey does not know is an error, not an empty plan. A Fixer that is not
// one matches Options.Object against SCOPE/NAME (Filter).
type ObjectResolver interface {
	About(object string) (func(drift.Finding) bool, error)
}

// Survey is one observation and what the checks found in it.
type Survey struct {
	Findings []drift.Finding
	// Taken is when the observation was made: the "now" of the checks.
	Taken time.Time
	// Subjects counts the objects the checks judged (the anomaly guard's
	// share counts from it).
	Subjects int
	// Anomalies are the platform's own word that the picture looks wrong:
	// a read that returned partial data, a source that lists none of a kind
	// the other says exists. Any of them refuses an apply (Guard).
	Anomalies []string
}

// Breaker shares a blast-radius limit with whoever else acts (the
// controller): Allows refuses a whole run while it is tripped, and Count
// records each action taken.
type Breaker interface {
	Allows(ctx context.Context) error
	Count(ctx context.Context, f drift.Finding, r drift.Result)
	// Tell says, before anything is changed (and in a dry run, of what
	// --apply would do), what this run's planned actions do to the shared
	// limit; "" says nothing.
	Tell(ctx context.Context, planned int) string
}

// A Limiter is a Breaker that also bounds each action: Take is asked before
// each one, and a refusal (the window is full: the breaker trips) leaves
// that action and every later one of the run undone, reported as skipped.
type Limiter interface {
	Take(ctx context.Context, f drift.Finding) error
}

// Options are what one run plans and applies with.
type Options struct {
	// Check keeps the findings of this check only ("" keeps all).
	Check string
	// Object keeps the findings about this object only, SCOPE/NAME ("" keeps
	// all).
	Object string
	// Max bounds the actions of this run.
	Max int
	// Apply carries the plan out; without it the run is a dry run.
	Apply bool
	// Reviewed is the reviewed plan's planned findings by id (ReadPlan);
	// nil plans from live state.
	Reviewed map[string]drift.Finding
	// Breaker, when set, is asked before applying and told of each action.
	Breaker Breaker
	// Guard refuses the whole batch when the picture looks wrong.
	Guard Guard
	// Wait sleeps between the two sightings; default: a timer.
	Wait func(context.Context, time.Duration) error
	// Notes receives what the operator should know while the run goes on.
	Notes io.Writer
	// Planned, when set, is told the plan once it is made, before anything
	// is applied (a log of the findings a run observed).
	Planned func([]Item)
	// Command is the fix command's name as the operator types it ("tether
	// fix"), for the notes and evidence that tell how to go on.
	Command string
}

func (o Options) command() string {
	if o.Command == "" {
		return "fix"
	}
	return o.Command
}

// Item is one finding with what the run did or would do about it.
type Item struct {
	Finding drift.Finding `json:"finding"`
	// Planned: the action would be taken (dry run) or was attempted.
	Planned bool          `json:"planned"`
	Result  *drift.Result `json:"result,omitempty"`
	// Skipped says why a safe action was left out (e.g. --max reached).
	Skipped string `json:"skipped,omitempty"`
}

// Report is what a run planned and, when applied, how each action ended.
type Report struct {
	Items   []Item
	Applied bool
	// Failed counts the planned actions that did not apply.
	Failed int
	// Changed counts the reviewed plan's findings that changed since the
	// review and were left alone.
	Changed int
	// Guard says why the anomaly guard refuses (or, overridden, would have
	// refused) this batch; nil when it does not.
	Guard []string
}

// Incomplete says whether the run fell short of what it was asked: an
// action did not apply, or a reviewed finding changed (exit code 1).
func (r Report) Incomplete() bool { return r.Failed+r.Changed > 0 }

// Run drives fx through every stage and returns the report; an error means
// the run could not read the platform or was refused as a whole (the
// breaker), and nothing was changed.
func Run(ctx context.Context, fx Fixer, o Options) (Report, error) {
	fs, last, err := sighted(ctx, fx, o)
	if err != nil {
		return Report{}, err
	}
	safe := 0
	for _, f := range fs {
		if f.Action.Safe {
			safe++
		}
	}
	guard := o.Guard.Reasons(last, safe)
	reviewed := o.Reviewed
	if fs, reviewed, err = narrow(fx, fs, reviewed, o); err != nil {
		return Report{}, err
	}
	rep := Report{Items: Items(fs, o.Max), Guard: guard}
	if reviewed != nil {
		rep.Items, rep.Changed = Reviewed(fs, reviewed, o.Max)
	}
	if o.Planned != nil {
		o.Planned(rep.Items)
	}
	o.tell(ctx, guard, rep.Items)
	if !o.Apply {
		return rep, nil
	}
	if len(guard) > 0 && !o.Guard.Override {
		return rep, &GuardError{Reasons: guard, Flag: o.Guard.flag()}
	}
	if o.Reviewed == nil && o.Notes != nil {
		fmt.Fprintf(o.Notes, "note: --apply without --plan acts on a plan made now from live state; to apply exactly a reviewed plan, save it with `%s -o json > plan.json` and pass --plan plan.json\n", o.command())
	}
	if o.Breaker != nil {
		if err := o.Breaker.Allows(ctx); err != nil {
			return Report{}, err
		}
	}
	apply(ctx, fx, o, &rep)
	return rep, nil
}

// tell writes the notes of a plan before it is applied: what the anomaly
// guard says of it, and what the blast-radius breaker will allow.
func (o Options) tell(ctx context.Context, guard []string, items []Item) {
	if o.Notes == nil {
		return
	}
	if len(guard) > 0 {
		switch {
		case !o.Apply:
			fmt.Fprintf(o.Notes, "note: the anomaly guard would refuse --apply: %s\n", strings.Join(guard, "; "))
		case o.Guard.Override:
			fmt.Fprintf(o.Notes, "warning: anomaly guard overridden (%s): %s\n", o.Guard.flag(), strings.Join(guard, "; "))
		}
	}
	if o.Breaker != nil {
		planned := 0
		for _, it := range items {
			if it.Planned {
				planned++
			}
		}
		if line := o.Breaker.Tell(ctx, planned); line != "" {
			fmt.Fprintln(o.Notes, line)
		}
	}
}

// apply carries out the planned items of rep in order, each through
// fx.Fix, as long as the breaker's limiter lets it; the rest are skipped
// with the limiter's reason.
func apply(ctx context.Context, fx Fixer, o Options, rep *Report) {
	rep.Applied = true
	limiter, _ := o.Breaker.(Limiter)
	var stopped error
	for i := range rep.Items {
		it := &rep.Items[i]
		if !it.Planned {
			continue
		}
		if stopped == nil && limiter != nil {
			stopped = limiter.Take(ctx, it.Finding)
		}
		if stopped != nil {
			it.Planned, it.Skipped = false, "not attempted: "+stopped.Error()
			rep.Failed++
			continue
		}
		r := fx.Fix(ctx, it.Finding)
		r.FindingID = it.Finding.ID
		it.Result = &r
		if r.Outcome != drift.Applied {
			rep.Failed++
		}
		if o.Breaker != nil && (r.Outcome == drift.Applied || r.Outcome == drift.Pending) {
			o.Breaker.Count(ctx, it.Finding, r)
		}
	}
}

// sighted surveys fx and runs the first-sighting stage: when a safe
// finding of the first survey needs to be seen twice (SeenTwice), fx is
// surveyed again the longest of those graces later, and what the second
// survey finds that the first did not is held NotSeenTwice. A reviewed plan
// stands for the first sighting of the findings it planned (the run that
// wrote it had seen them twice).
func sighted(ctx context.Context, fx Fixer, o Options) ([]drift.Finding, Survey, error) {
	s, err := fx.Survey(ctx)
	if err != nil {
		return nil, Survey{}, err
	}
	seen := Memory{}
	if o.Reviewed != nil {
		for id, f := range o.Reviewed {
			seen[id] = s.Taken.Add(-fx.SeenTwice(f))
		}
		return FirstSighting(s.Findings, seen, fx.SeenTwice, s.Taken, o.command()), s, nil
	}
	longest := Longest(s.Findings, fx.SeenTwice)
	if longest <= 0 {
		return s.Findings, s, nil
	}
	for _, f := range s.Findings {
		seen.Sighted(f.ID, s.Taken)
	}
	if o.Notes != nil {
		fmt.Fprintf(o.Notes, "%d finding(s); observing again in %s before planning (some are acted on only when seen twice that far apart)\n", len(s.Findings), longest)
	}
	wait := o.Wait
	if wait == nil {
		wait = Sleep
	}
	if err := wait(ctx, longest); err != nil {
		return nil, Survey{}, err
	}
	if s, err = fx.Survey(ctx); err != nil {
		return nil, Survey{}, err
	}
	return FirstSighting(s.Findings, seen, fx.SeenTwice, s.Taken, o.command()), s, nil
}

// Longest is the longest grace a safe finding of fs needs between two
// sightings; zero when none needs two.
func Longest(fs []drift.Finding, grace func(drift.Finding) time.Duration) time.Duration {
	var longest time.Duration
	for _, f := range fs {
		if g := grace(f); f.Action.Safe && g > longest {
			longest = g
		}
	}
	return longest
}

// Once is the first-sighting stage of a run that observes once (an audit):
// every safe finding that must be seen twice is held NotSeenTwice.
func Once(fx Fixer, s Survey, command string) []drift.Finding {
	return FirstSighting(s.Findings, Memory{}, fx.SeenTwice, s.Taken, command)
}

// Items marks the safe findings to act on, up to max; the others are
// listed with why not.
func Items(fs []drift.Finding, max int) []Item {
	items := make([]Item, 0, len(fs))
	n := 0
	for _, f := range fs {
		it := Item{Finding: f}
		if f.Action.Safe {
			if n < max {
				it.Planned = true
				n++
			} else {
				it.Skipped = fmt.Sprintf("--max %d reached", max)
			}
		}
		items = append(items, it)
	}
	return items
}

// narrow keeps the findings (and the reviewed plan's) of o.Check about
// o.Object, asking fx to resolve the object where it can (ObjectResolver).
// A reviewed finding outside them is not this run's business: it is
// neither acted on nor reported as changed.
func narrow(fx Fixer, fs []drift.Finding, reviewed map[string]drift.Finding, o Options) ([]drift.Finding, map[string]drift.Finding, error) {
	r, ok := fx.(ObjectResolver)
	if o.Object == "" || !ok {
		fs = Filter(fs, o.Check, o.Object)
		if reviewed != nil && (o.Check != "" || o.Object != "") {
			reviewed = keep(reviewed, func(f drift.Finding) bool { return len(Filter([]drift.Finding{f}, o.Check, o.Object)) == 1 })
		}
		return fs, reviewed, nil
	}
	about, err := r.About(o.Object)
	if err != nil {
		return nil, nil, err
	}
	in := func(f drift.Finding) bool { return (o.Check == "" || f.Check == o.Check) && about(f) }
	var out []drift.Finding
	for _, f := range fs {
		if in(f) {
			out = append(out, f)
		}
	}
	if reviewed != nil {
		reviewed = keep(reviewed, in)
	}
	return out, reviewed, nil
}

func keep(m map[string]drift.Finding, in func(drift.Finding) bool) map[string]drift.Finding {
	out := make(map[string]drift.Finding, len(m))
	for id, f := range m {
		if in(f) {
			out[id] = f
		}
	}
	return out
}

// Filter keeps the findings of check (all when "") about object
// (SCOPE/NAME, all when "").
func Filter(fs []drift.Finding, check, object string) []drift.Finding {
	if check == "" && object == "" {
		return fs
	}
	var out []drift.Finding
	for _, f := range fs {
		if (check == "" || f.Check == check) && (object == "" || f.Namespace+"/"+f.Object.Name == object) {
			out = append(out, f)
		}
	}
	return out
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
