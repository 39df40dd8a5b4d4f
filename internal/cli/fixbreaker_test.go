package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/findingrecord"
)

// What fix says before it acts about the controller's window: how full it
// is (the controller's own actions and fix's apart, the old and the reset
// ones left out), whether this run fills it and until when, and that fix
// never trips the breaker; a tripped breaker is said instead.
func TestBudgetNote(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	rec := func(check string, ago time.Duration, reason string) v1alpha1.Finding {
		at := metav1.NewTime(now.Add(-ago))
		return v1alpha1.Finding{Spec: v1alpha1.FindingSpec{Check: check}, Status: v1alpha1.FindingStatus{Reason: reason, LastAttempt: &at}}
	}
	recs := []v1alpha1.Finding{
		rec("OrphanHotplugVolume", time.Minute, "Applied"),
		rec(findingrecord.FixCheck, 2*time.Minute, "Applied"),
		rec("OrphanHotplugVolume", time.Hour, "Applied"),        // out of the window
		rec("OrphanHotplugVolume", 3*time.Minute, "Refused"),    // changed nothing
		rec(findingrecord.BreakerCheck, time.Minute, "Applied"), // no action
		rec("StaleVolumeAttachment", 30*time.Second, "Pending"), // counts
	}
	l := findingrecord.Limits{Max: 5, Interval: 10 * time.Minute}
	for _, tc := range []struct {
		name    string
		br      findingrecord.BreakerState
		planned int
		want    []string
		not     []string
	}{
		{"room left", findingrecord.BreakerState{}, 1, []string{"allows 5 actions per 10m0s", "holds 3 now (1 of them by tether fix)", "1 planned", "room for 1 action(s) of its own", "never trip its breaker"}, []string{"fill it"}},
		{"this run fills it", findingrecord.BreakerState{}, 6, []string{"fill it (9 of 5)", "waits, acting on nothing", "about 12:10 UTC", "never trip its breaker"}, nil},
		{"a reset forgets what came before", findingrecord.BreakerState{ResetAt: now.Add(-90 * time.Second)}, 1, []string{"holds 2 now (0 of them by tether fix)"}, nil},
		{"tripped", findingrecord.BreakerState{Tripped: true}, 1, []string{"is tripped", "reset-breaker -n tether-system"}, []string{"allows"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := budgetNote("tether-system", l, tc.br, recs, "in every namespace", tc.planned, now)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("says %q:\n%s", w, got)
				}
			}
		})
	}
}
