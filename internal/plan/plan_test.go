package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"k8s.io/apimachinery/pkg/types"
)

// fakeFixer is a platform whose surveys are scripted: each Survey returns
// the next list. It records what the driver asked of it.
type fakeFixer struct {
	surveys [][]drift.Finding
	grace   time.Duration
	outcome map[string]drift.Outcome
	clock   time.Time

	// graceOf, when set, is the grace by finding id (grace for the others).
	graceOf map[string]time.Duration

	surveyed int
	fixed    []string
}

func (x *fakeFixer) Survey(context.Context) (Survey, error) {
	if x.surveyed >= len(x.surveys) {
		return Survey{}, errors.New("surveyed more often than scripted")
	}
	fs := slices.Clone(x.surveys[x.surveyed])
	x.surveyed++
	return Survey{Findings: fs, Taken: x.clock}, nil
}

func (x *fakeFixer) Fix(_ context.Context, f drift.Finding) drift.Result {
	x.fixed = append(x.fixed, f.ID)
	o, ok := x.outcome[f.ID]
	if !ok {
		o = drift.Applied
	}
	return drift.Result{Outcome: o, Message: "done"}
}

func (x *fakeFixer) SeenTwice(f drift.Finding) time.Duration {
	if g, ok := x.graceOf[f.ID]; ok {
		return g
	}
	return x.grace
}

type fakeBreaker struct {
	refuse  error
	counted []string
	told    []int
}

func (b *fakeBreaker) Allows(context.Context) error { return b.refuse }

func (b *fakeBreaker) Tell(_ context.Context, planned int) string {
	b.told = append(b.told, planned)
	return fmt.Sprintf("note: %d planned", planned)
}
func (b *fakeBreaker) Count(_ context.Context, f drift.Finding, _ drift.Result) {
	b.counted = append(b.counted, f.ID)
}

func safe(id string) drift.Finding {
	return drift.Finding{ID: id, Check: "C", Namespace: "ns", Object: drift.ObjectRef{Kind: "K", Name: "o-" + id, UID: types.UID("u-" + id)}, Action: drift.Action{Type: "A", Safe: true}}
}

func blocked(id string) drift.Finding {
	f := safe(id)
	f.Action.Safe, f.Action.BlockedBy = false, "Busy"
	return f
}

func planned(r Report) []string {
	var ids []string
	for _, it := range r.Items {
		if it.Planned {
			ids = append(ids, it.Finding.ID)
		}
	}
	return ids
}

func TestRun_dryRunPlansAndChangesNothing(t *testing.T) {
	x := &fakeFixer{surveys: [][]drift.Finding{{safe("a"), blocked("b"), safe("c")}}}
	b := &fakeBreaker{refuse: errors.New("tripped")}
	var notes bytes.Buffer
	rep, err := Run(context.Background(), x, Options{Max: 1, Breaker: b, Notes: &notes})
	if err != nil {
		t.Fatal(err)
	}
	if got := planned(rep); !slices.Equal(got, []string{"a"}) || rep.Items[2].Skipped != "--max 1 reached" {
		t.Fatalf("planned %v, items %+v", got, rep.Items)
	}
	if len(x.fixed) != 0 || rep.Applied {
		t.Fatalf("a dry run fixed %v", x.fixed)
	}
	// The dry run already says what --apply would do to the shared limit.
	if !slices.Equal(b.told, []int{1}) || !strings.Contains(notes.String(), "note: 1 planned") {
		t.Fatalf("told %v, notes %q: want the one planned action told", b.told, notes.String())
	}
}

func TestRun_applyFixesOnlyPlannedAndCountsThem(t *testing.T) {
	x := &fakeFixer{surveys: [][]drift.Finding{{safe("a"), blocked("b"), safe("c"), safe("d")}},
		outcome: map[string]drift.Outcome{"c": drift.Refused, "d": drift.Pending}}
	b := &fakeBreaker{}
	var notes bytes.Buffer
	rep, err := Run(context.Background(), x, Options{Max: 10, Apply: true, Breaker: b, Notes: &notes})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.fixed, []string{"a", "c", "d"}) {
		t.Fatalf("fixed %v, want the safe ones a, c, d", x.fixed)
	}
	if !slices.Equal(b.counted, []string{"a", "d"}) {
		t.Fatalf("breaker counted %v, want the applied and pending a, d", b.counted)
	}
	if rep.Failed != 2 || !rep.Incomplete() || !rep.Applied {
		t.Fatalf("failed %d, want 2 (refused, pending)", rep.Failed)
	}
	if rep.Items[0].Result == nil || rep.Items[0].Result.FindingID != "a" {
		t.Fatalf("result not recorded with its finding id: %+v", rep.Items[0])
	}
	if !strings.Contains(notes.String(), "--plan") {
		t.Fatalf("an apply without a reviewed plan says nothing about --plan: %q", notes.String())
	}
	if !slices.Equal(b.told, []int{3}) || !strings.HasPrefix(notes.String(), "note: 3 planned") {
		t.Fatalf("told %v, notes %q: want the three planned actions told first", b.told, notes.String())
	}
}

func TestRun_trippedBreakerRefusesTheWholeRun(t *testing.T) {
	x := &fakeFixer{surveys: [][]drift.Finding{{safe("a")}}}
	_, err := Run(context.Background(), x, Options{Max: 10, Apply: true, Breaker: &fakeBreaker{refuse: errors.New("breaker tripped")}})
	if err == nil || len(x.fixed) != 0 {
		t.Fatalf("err %v, fixed %v: want refused, nothing fixed", err, x.fixed)
	}
}

func TestRun_checkAndObjectNarrowThePlan(t *testing.T) {
	other := safe("b")
	other.Check = "D"
	x := &fakeFixer{surveys: [][]drift.Finding{{safe("a"), other, safe("c")}}}
	rep, err := Run(context.Background(), x, Options{Max: 10, Check: "C", Object: "ns/o-c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Items) != 1 || rep.Items[0].Finding.ID != "c" {
		t.Fatalf("items %+v, want c only", rep.Items)
	}
}

// A platform that must see findings twice is surveyed again after its
// grace; what the second survey finds new is held NotSeenTwice, what both
// found may act.
func TestRun_seenTwiceSurveysAgainAfterTheGrace(t *testing.T) {
	x := &fakeFixer{grace: time.Minute, clock: time.Unix(1000, 0),
		surveys: [][]drift.Finding{{safe("a")}, {safe("a"), safe("new")}}}
	var waited time.Duration
	wait := func(_ context.Context, d time.Duration) error {
		waited = d
		x.clock = x.clock.Add(d)
		return nil
	}
	rep, err := Run(context.Background(), x, Options{Max: 10, Wait: wait})
	if err != nil {
		t.Fatal(err)
	}
	if waited != time.Minute || x.surveyed != 2 {
		t.Fatalf("waited %s, surveyed %d times: want the grace and two surveys", waited, x.surveyed)
	}
	if got := planned(rep); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("planned %v, want a (seen twice) only", got)
	}
	if f := rep.Items[1].Finding; f.Action.BlockedBy != drift.NotSeenTwice || !strings.Contains(strings.Join(f.Evidence, ";"), "seen once") {
		t.Fatalf("new finding: %+v, want held NotSeenTwice with why", f)
	}
	if ev := strings.Join(rep.Items[0].Finding.Evidence, ";"); !strings.Contains(ev, "first seen 1m0s ago") {
		t.Fatalf("seen-twice finding does not say when it was first seen: %q", ev)
	}
}

func TestRun_seenTwiceNothingFoundNoWait(t *testing.T) {
	x := &fakeFixer{grace: time.Hour, surveys: [][]drift.Finding{{}}}
	wait := func(context.Context, time.Duration) error { t.Fatal("waited with nothing found"); return nil }
	if _, err := Run(context.Background(), x, Options{Max: 10, Wait: wait}); err != nil {
		t.Fatal(err)
	}
}

// A platform that asks two sightings of some findings only: the driver
// waits the longest grace a safe finding needs (none for a blocked one),
// holds only the findings that need two sightings and were seen once, and
// with no such finding surveys once.
func TestRun_seenTwicePerFinding(t *testing.T) {
	wait := func(x *fakeFixer, waited *time.Duration) func(context.Context, time.Duration) error {
		return func(_ context.Context, d time.Duration) error {
			*waited = d
			x.clock = x.clock.Add(d)
			return nil
		}
	}
	x := &fakeFixer{clock: time.Unix(1000, 0), graceOf: map[string]time.Duration{"slow": 2 * time.Minute, "late": time.Minute, "held": time.Hour},
		surveys: [][]drift.Finding{{safe("once"), safe("slow"), blocked("held")}, {safe("once"), safe("slow"), safe("late"), blocked("held")}}}
	var waited time.Duration
	rep, err := Run(context.Background(), x, Options{Max: 10, Wait: wait(x, &waited)})
	if err != nil {
		t.Fatal(err)
	}
	if waited != 2*time.Minute || x.surveyed != 2 {
		t.Fatalf("waited %s over %d surveys: want the longest grace of a safe finding (2m), two surveys", waited, x.surveyed)
	}
	if got := planned(rep); !slices.Equal(got, []string{"once", "slow"}) {
		t.Fatalf("planned %v, want once (one sighting enough) and slow (seen twice)", got)
	}
	if f := rep.Items[2].Finding; f.ID != "late" || f.Action.BlockedBy != drift.NotSeenTwice {
		t.Fatalf("late, seen only by the second survey: %+v", f)
	}

	y := &fakeFixer{graceOf: map[string]time.Duration{"held": time.Hour}, surveys: [][]drift.Finding{{safe("once"), blocked("held")}}}
	waited = 0
	if _, err := Run(context.Background(), y, Options{Max: 10, Wait: wait(y, &waited)}); err != nil || waited != 0 || y.surveyed != 1 {
		t.Fatalf("no safe finding needs two sightings: waited %s, surveyed %d, %v", waited, y.surveyed, err)
	}
}

// With a reviewed plan, the plan stands for the first sighting: one survey,
// and the reviewed findings may act at once; others are held.
func TestRun_reviewedPlanIsTheFirstSighting(t *testing.T) {
	x := &fakeFixer{grace: time.Hour, surveys: [][]drift.Finding{{safe("a"), safe("b")}}}
	wait := func(context.Context, time.Duration) error {
		t.Fatal("waited although a reviewed plan was given")
		return nil
	}
	rep, err := Run(context.Background(), x, Options{Max: 10, Apply: true, Wait: wait, Reviewed: map[string]drift.Finding{"a": safe("a")}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.fixed, []string{"a"}) || x.surveyed != 1 {
		t.Fatalf("fixed %v after %d surveys, want a after one", x.fixed, x.surveyed)
	}
	for _, it := range rep.Items {
		if it.Finding.ID == "b" && (it.Planned || it.Finding.Action.BlockedBy != drift.NotSeenTwice) {
			t.Fatalf("b, not in the reviewed plan: %+v", it)
		}
	}
}

func TestFirstSighting(t *testing.T) {
	now := time.Unix(10000, 0)
	for _, c := range []struct {
		name string
		seen Memory
		safe bool
	}{
		{"never seen -> held", Memory{}, false},
		{"seen 30s before, grace 1m -> held", Memory{"a": now.Add(-30 * time.Second)}, false},
		{"seen exactly the grace before -> safe", Memory{"a": now.Add(-time.Minute)}, true},
		{"seen 2m before -> safe", Memory{"a": now.Add(-2 * time.Minute)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := FirstSighting([]drift.Finding{safe("a"), blocked("b")}, c.seen, Every(time.Minute), now, "fix")
			if fs[0].Action.Safe != c.safe {
				t.Fatalf("safe = %t, want %t (%v)", fs[0].Action.Safe, c.safe, fs[0].Evidence)
			}
			if fs[1].Action.BlockedBy != "Busy" {
				t.Fatalf("a finding blocked by its check changed its reason to %s", fs[1].Action.BlockedBy)
			}
		})
	}
}

// guardFixer is a fakeFixer whose survey carries subjects and anomalies.
type guardFixer struct {
	fakeFixer
	subjects  int
	anomalies []string
}

func (x *guardFixer) Survey(ctx context.Context) (Survey, error) {
	s, err := x.fakeFixer.Survey(ctx)
	s.Subjects, s.Anomalies = x.subjects, x.anomalies
	return s, err
}

func manySafe(n int) []drift.Finding {
	var fs []drift.Finding
	for i := 0; i < n; i++ {
		fs = append(fs, safe(fmt.Sprintf("f%02d", i)))
	}
	return fs
}

// The anomaly guard refuses a whole batch, nothing fixed, when the platform
// says the picture is wrong or too much is safe at once; it says why and
// how to override; overridden, the batch goes on and the notes say so; a
// dry run only warns.
func TestRun_anomalyGuard(t *testing.T) {
	cases := []struct {
		name      string
		safe      int
		subjects  int
		anomalies []string
		override  bool
		refused   bool
	}{
		{name: "a partial read refuses", safe: 1, subjects: 10, anomalies: []string{"tenant t1 could not be read"}, refused: true},
		{name: "26 safe of 100 subjects: over 25", safe: 26, subjects: 100, refused: true},
		{name: "25 safe: at the limit", safe: 25, subjects: 100},
		{name: "60 safe of 1000 subjects: under 10%", safe: 60, subjects: 1000},
		{name: "101 safe of 1000 subjects: over 10%", safe: 101, subjects: 1000, refused: true},
		{name: "overridden", safe: 1, subjects: 10, anomalies: []string{"zero volumes"}, override: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := &guardFixer{fakeFixer: fakeFixer{surveys: [][]drift.Finding{manySafe(c.safe), manySafe(c.safe)}}, subjects: c.subjects, anomalies: c.anomalies}
			var notes bytes.Buffer
			g := Guard{Override: c.override, Flag: "--override-guard"}
			dry, err := Run(context.Background(), x, Options{Max: 1000, Guard: g, Notes: &notes})
			if err != nil || (len(dry.Guard) > 0) != (c.refused || c.override) {
				t.Fatalf("dry run: %v, guard %v", err, dry.Guard)
			}
			x.surveyed = 0
			notes.Reset()
			_, err = Run(context.Background(), x, Options{Max: 1000, Apply: true, Guard: g, Notes: &notes})
			var ge *GuardError
			switch {
			case c.refused:
				if !errors.As(err, &ge) || len(x.fixed) != 0 || !strings.Contains(err.Error(), "nothing was changed") || !strings.Contains(err.Error(), "--override-guard") {
					t.Fatalf("want the batch refused, nothing fixed: %v, fixed %v", err, x.fixed)
				}
			case c.override:
				if err != nil || len(x.fixed) != c.safe || !strings.Contains(notes.String(), "anomaly guard overridden (--override-guard): zero volumes") {
					t.Fatalf("overridden: %v, fixed %d, notes %q", err, len(x.fixed), notes.String())
				}
			default:
				if err != nil || len(x.fixed) != c.safe {
					t.Fatalf("want the batch applied: %v, fixed %d", err, len(x.fixed))
				}
			}
		})
	}
}

// A reviewed plan applied with --object acts on that object's findings and
// says nothing of the plan's others: they are not gone, only out of this
// run's scope (the run used to report each as changed-since-plan, exit 1).
func TestRun_objectNarrowsTheReviewedPlanToo(t *testing.T) {
	x := &fakeFixer{surveys: [][]drift.Finding{{safe("a"), safe("b")}}}
	reviewed := map[string]drift.Finding{"a": safe("a"), "b": safe("b")}
	rep, err := Run(context.Background(), x, Options{Max: 10, Apply: true, Object: "ns/o-b", Reviewed: reviewed})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.fixed, []string{"b"}) || rep.Changed != 0 || rep.Incomplete() || len(rep.Items) != 1 {
		t.Fatalf("fixed %v, changed %d, items %+v: want b fixed, nothing called changed", x.fixed, rep.Changed, rep.Items)
	}
}

// resolvingFixer resolves --object itself.
type resolvingFixer struct {
	fakeFixer
	known map[string]string // object -> finding id
}

func (x *resolvingFixer) About(object string) (func(drift.Finding) bool, error) {
	id, ok := x.known[object]
	if !ok {
		return nil, fmt.Errorf("--object %q: unknown", object)
	}
	return func(f drift.Finding) bool { return f.ID == id }, nil
}

// A platform that resolves --object itself decides which findings are
// about it, and an object it does not know stops the run before anything
// is changed.
func TestRun_platformResolvesTheObject(t *testing.T) {
	x := &resolvingFixer{fakeFixer: fakeFixer{surveys: [][]drift.Finding{{safe("a"), safe("b")}, {safe("a"), safe("b")}}}, known: map[string]string{"vol-1": "b"}}
	rep, err := Run(context.Background(), x, Options{Max: 10, Apply: true, Object: "vol-1"})
	if err != nil || !slices.Equal(x.fixed, []string{"b"}) || len(rep.Items) != 1 {
		t.Fatalf("err %v, fixed %v, items %+v: want b only", err, x.fixed, rep.Items)
	}
	x.fixed = nil
	if _, err := Run(context.Background(), x, Options{Max: 10, Apply: true, Object: "nope"}); err == nil || len(x.fixed) != 0 {
		t.Fatalf("unknown object: err %v, fixed %v; want an error and nothing fixed", err, x.fixed)
	}
}

// limitingBreaker lets take actions through, then refuses.
type limitingBreaker struct {
	fakeBreaker
	take  int
	taken []string
}

func (b *limitingBreaker) Take(_ context.Context, f drift.Finding) error {
	if len(b.taken) >= b.take {
		return errors.New("blast-radius breaker tripped")
	}
	b.taken = append(b.taken, f.ID)
	return nil
}

// A Limiter that refuses stops the run: the refused action and every later
// one are left undone and reported, and the run is incomplete.
func TestRun_limiterStopsTheRun(t *testing.T) {
	x := &fakeFixer{surveys: [][]drift.Finding{{safe("a"), safe("b"), blocked("c"), safe("d")}}}
	b := &limitingBreaker{take: 1}
	rep, err := Run(context.Background(), x, Options{Max: 10, Apply: true, Breaker: b})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.fixed, []string{"a"}) || !slices.Equal(b.counted, []string{"a"}) {
		t.Fatalf("fixed %v, counted %v: want a only", x.fixed, b.counted)
	}
	if rep.Failed != 2 || !rep.Incomplete() {
		t.Fatalf("failed %d, want 2 (b and d not attempted)", rep.Failed)
	}
	for _, it := range rep.Items {
		if (it.Finding.ID == "b" || it.Finding.ID == "d") && (it.Planned || !strings.Contains(it.Skipped, "not attempted: blast-radius breaker tripped")) {
			t.Errorf("%s: %+v, want skipped as not attempted, naming the breaker", it.Finding.ID, it)
		}
	}
}
