package controller

import (
	"testing"
	"time"

	"github.com/tether-dev/tether/api/v1alpha1"
)

func TestCoolingDown(t *testing.T) {
	r := &records{Budget: newBudget(5, 10*time.Minute)}
	acted := func(reason string, ago time.Duration) *v1alpha1.Finding {
		return record(phase(v1alpha1.PhaseResolved), func(f *v1alpha1.Finding) {
			f.Status.Reason, f.Status.LastAttempt = reason, mt(t0.Add(-ago))
		})
	}
	for _, c := range []struct {
		name string
		rec  *v1alpha1.Finding
		want time.Duration
	}{
		{"applied 4m ago -> 6m left in the window", acted("Applied", 4*time.Minute), 6 * time.Minute},
		{"pending 1m ago -> 9m left", acted("Pending", time.Minute), 9 * time.Minute},
		{"applied 11m ago -> out of the window", acted("Applied", 11*time.Minute), 0},
		{"resolved without an action -> none", acted("ConditionGone", time.Minute), 0},
		{"never attempted -> none", record(phase(v1alpha1.PhaseResolved)), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := r.coolingDown(c.rec, t0); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}
