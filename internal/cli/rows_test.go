package cli

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	osact "github.com/tether-dev/tether/internal/openstack/act"
	oscheck "github.com/tether-dev/tether/internal/openstack/check"
)

// The places that follow from the check rows agree with them: the README
// table links every check to its row's page, `tether checks` lists every
// check with its doc line, and each platform's act carries out every
// action its rows propose.
func TestDerivedPlacesAgreeWithTheRows(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var listed bytes.Buffer
	o := &checksOptions{stdout: &listed}
	if err := o.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rows []drift.Row
	for _, c := range check.All() {
		rows = append(rows, c.Row)
		for _, a := range c.Actions {
			if !act.Handles(a) {
				t.Errorf("check %s proposes %s, which act does not carry out", c.Name, a)
			}
		}
	}
	for _, c := range oscheck.All() {
		rows = append(rows, c.Row)
		for _, a := range c.Actions {
			if !osact.Handles(a) {
				t.Errorf("OpenStack check %s proposes %s, which its act does not carry out", c.Name, a)
			}
		}
	}
	for _, r := range rows {
		if link := "| [" + r.Name + "](" + r.Page + ") |"; !bytes.Contains(readme, []byte(link)) {
			t.Errorf("README's check table lacks the row %q", link)
		}
		if !slices.ContainsFunc(strings.Split(listed.String(), "\n"), func(l string) bool {
			return strings.HasPrefix(l, r.Name+" ") && strings.HasSuffix(l, r.Doc)
		}) {
			t.Errorf("tether checks does not list %s with its doc line", r.Name)
		}
	}
}
