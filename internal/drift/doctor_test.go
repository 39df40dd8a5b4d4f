package drift_test

import (
	"testing"

	"github.com/tether-dev/tether/internal/drift"
)

func TestDoctorExit(t *testing.T) {
	l := func(s drift.Status) drift.Line { return drift.Line{Status: s} }
	for _, tc := range []struct {
		name  string
		lines []drift.Line
		want  int
	}{
		{"no lines -> 0", nil, 0},
		{"all OK -> 0", []drift.Line{l(drift.StatusOK), l(drift.StatusOK)}, 0},
		{"a WARN -> 1", []drift.Line{l(drift.StatusOK), l(drift.StatusWarn)}, 1},
		{"a FAIL after a WARN -> 2", []drift.Line{l(drift.StatusWarn), l(drift.StatusFail), l(drift.StatusOK)}, 2},
		{"an unknown status counts as FAIL -> 2", []drift.Line{l(drift.StatusOK), l("MAYBE")}, 2},
	} {
		if got := drift.DoctorExit(tc.lines); got != tc.want {
			t.Errorf("%s: got %d", tc.name, got)
		}
	}
}
