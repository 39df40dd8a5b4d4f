package tether_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/kubevirt/check"
)

// Every setting of the checks with a key in the controller's configuration
// (check.Settings) is a value of the chart under the same section and
// name, empty by default (the controller's default), its comment showing
// that default.
func TestSettingsAreValuesOfTheChart(t *testing.T) {
	data, err := os.ReadFile("values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for _, st := range check.Settings() {
		if st.Section == "" {
			continue
		}
		line, ok := valueLine(lines, st.Section, st.Name)
		if !ok {
			t.Errorf("values.yaml has no %s.%s", st.Section, st.Name)
			continue
		}
		value, comment, _ := strings.Cut(line, "#")
		shown, _, _ := strings.Cut(strings.TrimSpace(comment), ":")
		d, err := time.ParseDuration(strings.Fields(shown + " x")[0])
		if strings.TrimSpace(value) != st.Name+`: ""` || err != nil || d != st.Default {
			t.Errorf("values.yaml %s.%s: %q; want it empty, its comment showing the default %s", st.Section, st.Name, line, st.Default)
		}
	}
}

// valueLine is the line of key name in the top-level block section.
func valueLine(lines []string, section, name string) (string, bool) {
	in := false
	for _, l := range lines {
		switch {
		case l == section+":":
			in = true
		case in && l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "#"):
			return "", false
		case in && strings.HasPrefix(strings.TrimSpace(l), name+":"):
			return strings.TrimSpace(l), true
		}
	}
	return "", false
}
