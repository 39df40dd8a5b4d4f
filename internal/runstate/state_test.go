package runstate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// The window counts the actions of the last interval since the last
// reset; the action beyond the limit trips the breaker, which then refuses
// everything until a reset, after which the earlier actions do not count.
func TestState_windowTripAndReset(t *testing.T) {
	l := Limits{Max: 2, Interval: time.Hour}
	s := State{Actions: []Action{{At: t0.Add(-2 * time.Hour)}, {At: t0.Add(-30 * time.Minute)}}}
	if n := s.InWindow(t0, l); n != 1 {
		t.Fatalf("in window: %d, want 1 (the old one left it)", n)
	}
	if err := s.Take(t0, l, "reset-cmd"); err != nil {
		t.Fatalf("second action refused: %v", err)
	}
	s.Record(Action{At: t0}, l)
	err := s.Take(t0.Add(time.Minute), l, "reset-cmd")
	if err == nil || !s.Tripped || !strings.Contains(err.Error(), "`reset-cmd`") || !strings.Contains(s.Message, "2 actions within 1h0m0s") {
		t.Fatalf("third action: err %v, state %+v; want a trip naming the reset", err, s)
	}
	// An hour later the window is empty, but the trip stands.
	if err := s.Take(t0.Add(3*time.Hour), l, "reset-cmd"); err == nil {
		t.Fatal("a tripped breaker let an action through once the window emptied")
	}
	if !s.Reset(t0.Add(2*time.Minute), "ops") || s.Tripped || s.InWindow(t0.Add(3*time.Minute), l) != 0 {
		t.Fatalf("after reset: %+v, in window %d; want untripped and nothing counted", s, s.InWindow(t0.Add(3*time.Minute), l))
	}
	if s.Reset(t0.Add(4*time.Minute), "ops") {
		t.Fatal("reset of an untripped breaker said it cleared something")
	}
	s.Prune(t0.Add(3*time.Minute), l)
	if len(s.Actions) != 0 {
		t.Fatalf("actions before the reset kept: %+v", s.Actions)
	}
}

type fileFixture struct {
	path string
}

func newFile(t *testing.T) fileFixture {
	return fileFixture{path: filepath.Join(t.TempDir(), "state.json")}
}

// Two runs on one state file: the second cannot take the lock while the
// first holds it, and names the holder; once the first ends, it can.
func TestFileStore_lock(t *testing.T) {
	ctx := context.Background()
	f := newFile(t)
	a, b := &FileStore{Path: f.path}, &FileStore{Path: f.path}
	if err := a.Lock(ctx, "run A", t0, 0); err != nil {
		t.Fatal(err)
	}
	err := b.Lock(ctx, "run B", t0, 0)
	if err == nil || !strings.Contains(err.Error(), "another run holds the lock") || !strings.Contains(err.Error(), "run A") {
		t.Fatalf("second lock: %v; want refused, naming run A", err)
	}
	if err := b.Save(ctx, State{}); err == nil {
		t.Fatal("a run without the lock saved the state")
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(ctx, "run B", t0, 0); err != nil {
		t.Fatalf("lock after the first run ended: %v", err)
	}
	b.Unlock(ctx)
}

// The state survives runs through the file; the file is replaced whole
// (no temporary file is left beside it), and a damaged file is an error
// that says what to do, never an empty window.
func TestFileStore_roundTripAndDamage(t *testing.T) {
	ctx := context.Background()
	f := newFile(t)
	st := &FileStore{Path: f.path}
	if s, err := st.Load(ctx); err != nil || s.Tripped || len(s.Actions) != 0 {
		t.Fatalf("no file: %+v, %v; want an empty state", s, err)
	}
	want := State{Tripped: true, TrippedAt: t0, Message: "m", Actions: []Action{{At: t0, Check: "C", Finding: "f", Object: "Server/s", Outcome: "Applied"}}}
	if err := st.Lock(ctx, "run", t0, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Save(ctx, want); err != nil {
		t.Fatal(err)
	}
	st.Unlock(ctx)
	got, err := (&FileStore{Path: f.path}).Load(ctx)
	if err != nil || !got.Tripped || !got.TrippedAt.Equal(t0) || len(got.Actions) != 1 || got.Actions[0].Finding != "f" {
		t.Fatalf("read back %+v, %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(f.path))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	os.WriteFile(f.path, []byte(`{"tripped": tru`), 0o600)
	if _, err := st.Load(ctx); err == nil || !strings.Contains(err.Error(), "move it away") {
		t.Fatalf("damaged file: %v", err)
	}
	if err := CheckPath(filepath.Join(f.path, "no-such-dir", "x.json")); err == nil || !strings.Contains(err.Error(), "create it") {
		t.Fatalf("missing directory: %v", err)
	}
}

// The breaker over a store: a run with room acts and records; the action
// beyond the limit trips it, durably (the next run is refused as a whole);
// Reset clears it.
func TestBreaker_acrossRuns(t *testing.T) {
	ctx := context.Background()
	f := newFile(t)
	l := Limits{Max: 2, Interval: time.Hour}
	now := t0
	run := func() (*Breaker, *FileStore) {
		st := &FileStore{Path: f.path}
		if err := st.Lock(ctx, "run", now, 0); err != nil {
			t.Fatal(err)
		}
		return &Breaker{Store: st, Limits: l, ResetCommand: "tether openstack reset-breaker --state-file " + f.path, Now: func() time.Time { return now }}, st
	}
	finding := drift.Finding{ID: "f1", Check: "C", Object: drift.ObjectRef{Kind: "Server", UID: "s1"}}

	b, st := run()
	if err := b.Allows(ctx); err != nil {
		t.Fatal(err)
	}
	if note := b.Tell(ctx, 3); !strings.Contains(note, "0 of 2 actions") || !strings.Contains(note, "of this run's 3 planned action(s) only 2 fit: the next trips the breaker") {
		t.Errorf("tell: %s", note)
	}
	for i := 0; i < 2; i++ {
		if err := b.Take(ctx, finding); err != nil {
			t.Fatalf("action %d: %v", i, err)
		}
		b.Count(ctx, finding, drift.Result{Outcome: drift.Applied})
	}
	st.Unlock(ctx)

	now = now.Add(10 * time.Minute)
	b, st = run()
	var tripped []State
	b.Tripped = func(s State) { tripped = append(tripped, s) }
	if err := b.Allows(ctx); err != nil {
		t.Fatalf("second run refused before the limit: %v", err)
	}
	if err := b.Take(ctx, finding); err == nil || len(tripped) != 1 {
		t.Fatalf("third action in the hour: %v, tripped %d; want refused, tripped once", err, len(tripped))
	}
	st.Unlock(ctx)

	now = now.Add(2 * time.Hour) // the window is empty: the trip stands
	b, st = run()
	if err := b.Allows(ctx); err == nil || !strings.Contains(err.Error(), "reset-breaker --state-file") {
		t.Fatalf("run after the trip: %v; want refused, naming the reset", err)
	}
	st.Unlock(ctx)

	before, cleared, err := Reset(ctx, &FileStore{Path: f.path}, "reset", "ops", now)
	if err != nil || !cleared || !before.Tripped {
		t.Fatalf("reset: %+v %v %v", before, cleared, err)
	}
	b, st = run()
	defer st.Unlock(ctx)
	if err := b.Allows(ctx); err != nil {
		t.Fatalf("run after the reset: %v", err)
	}
}
