package controller

import (
	"testing"
	"time"
)

func TestBudget_tripsAndStaysTripped(t *testing.T) {
	b := newBudget(2, time.Minute)
	if !b.take(t0) || !b.take(t0.Add(time.Second)) {
		t.Fatal("the first two actions must pass")
	}
	if b.take(t0.Add(2 * time.Second)) {
		t.Fatal("the third within the window must be refused")
	}
	if b.take(t0.Add(time.Hour)) || !b.isTripped() {
		t.Fatal("once tripped, acting stays stopped")
	}
}

func TestBudget_windowSlides(t *testing.T) {
	b := newBudget(2, time.Minute)
	for i := 0; i < 10; i++ {
		if !b.take(t0.Add(time.Duration(i) * 31 * time.Second)) {
			t.Fatalf("action %d refused though at most 2 fall in any minute", i)
		}
	}
}

func TestBudget_refundGivesTheActionBack(t *testing.T) {
	b := newBudget(1, time.Minute)
	if !b.take(t0) {
		t.Fatal("the first action must pass")
	}
	b.refund(t0)
	if !b.take(t0.Add(time.Second)) {
		t.Fatal("a refunded action still counts")
	}
	b.refund(t0.Add(time.Hour)) // nothing reserved then: no effect
	if b.take(t0.Add(2*time.Second)) || !b.isTripped() {
		t.Fatal("the limit no longer holds after a refund of nothing")
	}
}

func TestBudget_seededWindowSurvivesRestart(t *testing.T) {
	b := newBudget(2, time.Minute)
	b.seed([]time.Time{t0.Add(-30 * time.Second), t0.Add(-2 * time.Minute)})
	b.seed([]time.Time{t0, t0}) // only the first seed counts
	if !b.isSeeded() {
		t.Fatal("not seeded")
	}
	if !b.take(t0) {
		t.Fatal("one action left in the window")
	}
	if b.take(t0.Add(time.Second)) {
		t.Fatal("the action before the restart was not counted")
	}
}
