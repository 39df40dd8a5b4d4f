package reportapi

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]API{"": WGPolicy, "wgpolicyk8s.io/v1alpha2": WGPolicy, "openreports.io/v1alpha1": OpenReports} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Parse("wgpolicyk8s.io/v1beta1"); err == nil {
		t.Error("Parse accepted an unsupported version")
	}
}

// TestNames: each API's group and version make its apiVersion, and its two
// kinds and resources name the same objects.
func TestNames(t *testing.T) {
	for _, a := range All() {
		if a.Group()+"/"+a.Version() != string(a) {
			t.Errorf("%s: group %s, version %s", a, a.Group(), a.Version())
		}
		nk, ck := a.Kinds()
		nr, cr := a.Resources()
		if nr != strings.ToLower(nk)+"s" || cr != strings.ToLower(ck)+"s" {
			t.Errorf("%s: kinds %s, %s; resources %s, %s", a, nk, ck, nr, cr)
		}
	}
	if API("").OrDefault() != Default || OpenReports.OrDefault() != OpenReports {
		t.Error("OrDefault")
	}
}
