package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	oscheck "github.com/tether-dev/tether/internal/openstack/check"
)

// TestChecks_listsEveryCheck: `tether checks` names every check of both
// platforms, each with what it finds.
func TestChecks_listsEveryCheck(t *testing.T) {
	cmd := newChecks()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range check.All() {
		names = append(names, c.Name)
	}
	names = append(names, oscheck.Names()...)
	for _, n := range names {
		line := ""
		for l := range strings.Lines(out.String()) {
			if strings.HasPrefix(l, n+" ") {
				line = l
			}
		}
		if len(strings.Fields(line)) < 3 {
			t.Errorf("%s is not listed with what it finds:\n%s", n, out.String())
		}
	}
}
