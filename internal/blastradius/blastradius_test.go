package blastradius

import (
	"iter"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)

func seq(as ...Action) iter.Seq[Action] { return slices.Values(as) }

func own(ago time.Duration) Action        { return Action{At: t0.Add(-ago)} }
func supervised(ago time.Duration) Action { return Action{At: t0.Add(-ago), Supervised: true} }

func TestCount(t *testing.T) {
	l := Limits{Max: 3, Interval: time.Hour}
	for _, tc := range []struct {
		name    string
		resetAt time.Time
		actions []Action
		want    Window
		next    Verdict
		room    int
	}{
		{name: "nothing", next: Fits, room: 3},
		{name: "own actions in the window", actions: []Action{own(0), own(59 * time.Minute)},
			want: Window{Own: 2}, next: Fits, room: 1},
		{name: "an action exactly one interval old has left", actions: []Action{own(time.Hour), own(2 * time.Hour)},
			want: Window{}, next: Fits, room: 3},
		{name: "actions before the reset do not count", resetAt: t0.Add(-10 * time.Minute),
			actions: []Action{own(11 * time.Minute), own(10 * time.Minute), supervised(20 * time.Minute)},
			want:    Window{Own: 1}, next: Fits, room: 2},
		{name: "own actions fill it: trip", actions: []Action{own(1), own(2), own(3)},
			want: Window{Own: 3}, next: Trip, room: 0},
		{name: "more own actions than the limit: trip, no room below zero", actions: []Action{own(1), own(2), own(3), own(4)},
			want: Window{Own: 4}, next: Trip, room: 0},
		{name: "the operator's actions fill it: wait until the first leaves", actions: []Action{own(1), supervised(50 * time.Minute), supervised(10 * time.Minute)},
			want: Window{Own: 1, Supervised: 2, Freed: 10 * time.Minute}, next: Wait, room: 0},
		{name: "the operator's actions alone never trip", actions: []Action{supervised(1), supervised(2), supervised(3), supervised(4)},
			want: Window{Supervised: 4, Freed: time.Hour - 4}, next: Wait, room: 0},
		{name: "an action in the future (a clock behind) counts", actions: []Action{own(-time.Minute)},
			want: Window{Own: 1}, next: Fits, room: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := Count(l, t0, tc.resetAt, seq(tc.actions...))
			if w != tc.want {
				t.Errorf("Count = %+v, want %+v", w, tc.want)
			}
			if got := w.Next(l); got != tc.next {
				t.Errorf("Next = %v, want %v", got, tc.next)
			}
			if got := w.Room(l); got != tc.room {
				t.Errorf("Room = %d, want %d", got, tc.room)
			}
		})
	}
}

// FuzzCount holds the count's invariants over any history: every counted
// action is one of the history's, the verdict follows the counts, the
// room never goes below zero, and a larger limit never decides worse.
func FuzzCount(f *testing.F) {
	f.Add([]byte{1, 2, 3, 200, 130}, uint8(3), uint16(60), uint16(5))
	f.Add([]byte{}, uint8(1), uint16(1), uint16(0))
	f.Fuzz(func(t *testing.T, hist []byte, max uint8, minutes, resetAgo uint16) {
		l := Limits{Max: int(max%20) + 1, Interval: time.Duration(minutes%600+1) * time.Minute}
		resetAt := t0.Add(-time.Duration(resetAgo) * time.Minute)
		var as []Action
		for _, b := range hist {
			as = append(as, Action{At: t0.Add(-time.Duration(b&0x7f) * 5 * time.Minute), Supervised: b&0x80 != 0})
		}
		w := Count(l, t0, resetAt, seq(as...))
		if w.Own < 0 || w.Supervised < 0 || w.Total() > len(as) {
			t.Fatalf("counts %+v of %d actions", w, len(as))
		}
		if w.Room(l) < 0 || w.Room(l) > l.Max {
			t.Fatalf("room %d of %d", w.Room(l), l.Max)
		}
		switch v := w.Next(l); {
		case v == Trip && w.Own < l.Max, v == Wait && (w.Total() < l.Max || w.Own >= l.Max), v == Fits && w.Total() >= l.Max:
			t.Fatalf("verdict %v of %+v under %+v", v, w, l)
		case w.Supervised > 0 && (w.Freed <= 0 || w.Freed > l.Interval):
			t.Fatalf("freed %s with supervised actions in a window of %s", w.Freed, l.Interval)
		}
		wider := Limits{Max: l.Max + 1, Interval: l.Interval}
		if w.Next(wider) > w.Next(l) {
			t.Fatalf("a larger limit decides worse: %v > %v", w.Next(wider), w.Next(l))
		}
	})
}
