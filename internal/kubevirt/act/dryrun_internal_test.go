package act

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
)

func TestParseKubeVirtVersion(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" = error
	}{
		{"v1.9.0", "v1.9.0"},
		{"v0.49.0", "v0.49.0"},
		{"v0.48.1-rc.1", "v0.48.1-rc.1"},
		{"v1.2.0-beta.0+abc", "v1.2.0-beta.0"},
		{"v1.3.0-alpha.0-123-gabcdef0", "v1.3.0-alpha.0-123-gabcdef0"},
		{"1.0.0", "v1.0.0"},
		{"v0.49", "v0.49.0"},
		{" v0.50.1 ", "v0.50.1"},
		{"V1.1.1", "v1.1.1"},
		{"v010.02.3", "v10.2.3"},
		{"", ""},
		{"v", ""},
		{"devel", ""},
		{"latest", ""},
		{"v1", ""},
		{"v1.2.3.4", ""},
		{"v1..3", ""},
		{"v1.2.", ""},
		{"v-1.2.3", ""},
		{"v1.+2.3", ""},
		{"v1.2.3-", ""},
		{"vv1.2.3", ""},
		{"v1.2.x", ""},
		{"v99999999999999999999.0.0", ""},
		{"sha256:0123abcd", ""},
	} {
		v, err := parseKubeVirtVersion(c.in)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%q: want an error, got %s", c.in, v)
		case c.want != "" && err != nil:
			t.Errorf("%q: %v", c.in, err)
		case c.want != "" && v.String() != c.want:
			t.Errorf("%q: got %s, want %s", c.in, v, c.want)
		}
	}
}

func TestDryRunProblem(t *testing.T) {
	known := func(v string) snapshot.FeatureGates { return snapshot.FeatureGates{Known: true, KubeVirtVersion: v} }
	for _, c := range []struct {
		gates snapshot.FeatureGates
		want  string // "" = honours dryRun
	}{
		{known("v1.9.0"), ""},
		{known("v0.49.0"), ""},
		{known("v0.49.1-rc.0"), ""},
		{known("v0.50.0"), ""},
		{known("v1.0.0-beta.0+abc"), ""},
		{known("v0.48.0"), "KubeVirt v0.48.0 is older than v0.49.0"},
		{known("v0.48.1-rc.1"), "KubeVirt v0.48.1-rc.1 is older than v0.49.0"},
		{known("v0.49.0-rc.0"), "KubeVirt v0.49.0-rc.0 is older than v0.49.0"},
		{known("v0.9.99"), "older than v0.49.0"},
		{known(""), "no status.observedKubeVirtVersion"},
		{known("devel"), `"devel" cannot be compared`},
		{snapshot.FeatureGates{}, "no KubeVirt object could be read"},
		{snapshot.FeatureGates{KubeVirtVersion: "v1.9.0"}, "no KubeVirt object could be read"},
	} {
		got := dryRunProblem(c.gates)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v: got %q, want %q", c.gates, got, c.want)
		}
	}
}

// The refusal names what was found and both remedies, with the manual
// command at the right level.
func TestDryRunRefusal(t *testing.T) {
	if r := dryRunRefusal(snapshot.FeatureGates{Known: true, KubeVirtVersion: "v1.9.0"}, virtapi.VM, "ns", "vm", "vol"); r != nil {
		t.Fatalf("v1.9.0 refused: %s", r.Message)
	}
	r := dryRunRefusal(snapshot.FeatureGates{Known: true, KubeVirtVersion: "v0.48.0"}, virtapi.VM, "ns", "vm", "vol")
	if r == nil || r.Outcome != drift.Refused {
		t.Fatalf("v0.48.0: want Refused, got %+v", r)
	}
	for _, want := range []string{"v0.48.0", "Upgrade KubeVirt to v0.49 or later", "`virtctl removevolume vm -n ns --volume-name=vol --persist`"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("message lacks %q: %s", want, r.Message)
		}
	}
	r = dryRunRefusal(snapshot.FeatureGates{}, virtapi.VMI, "ns", "vmi", "vol")
	if r == nil || !strings.Contains(r.Message, "`virtctl removevolume vmi -n ns --volume-name=vol`") {
		t.Fatalf("VMI level: want the command without --persist, got %+v", r)
	}
}

func FuzzParseKubeVirtVersion(f *testing.F) {
	for _, s := range []string{"v1.9.0", "v0.49.0", "v0.48.1-rc.1", "v1.2.0-beta.0+abc", "", "v", "1.2", "v1.2.3-", "+", "-", "v9999999999.1.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseKubeVirtVersion(s)
		problem := dryRunProblem(snapshot.FeatureGates{Known: true, KubeVirtVersion: s})
		if err != nil {
			if problem == "" {
				t.Fatalf("%q does not parse but is trusted", s)
			}
			return
		}
		if v.Major < 0 || v.Minor < 0 || v.Patch < 0 {
			t.Fatalf("%q: negative part in %s", s, v)
		}
		if (problem == "") != v.AtLeast(dryRunSince) {
			t.Fatalf("%q (%s): decision %q disagrees with atLeast", s, v, problem)
		}
		// What String prints parses back to the same version.
		if w, err := parseKubeVirtVersion(v.String()); err != nil || w != v {
			t.Fatalf("%q: %s re-parses as %s, %v", s, v, w, err)
		}
	})
}

func objectMeta(name, uid, rv string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: rv}
}

// The fingerprint of the last re-check must equal the first's: a VM deleted
// and re-created under its name (same name, another UID) is refused even
// if its resourceVersion happened to match; any other change is too.
func TestMoved(t *testing.T) {
	snap := func(vmUID, vmRV, vmiUID, vmiRV string) *snapshot.Snapshot {
		return snapshot.New(snapshot.Snapshot{
			VMs:  []snapshot.VM{{ObjectMeta: objectMeta("vm", vmUID, vmRV)}},
			VMIs: []snapshot.VMI{{ObjectMeta: objectMeta("vm", vmiUID, vmiRV)}},
		})
	}
	first := snap("uid-1", "10", "uid-2", "11")
	for _, c := range []struct {
		name   string
		last   *snapshot.Snapshot
		refuse bool
	}{
		{"nothing changed", snap("uid-1", "10", "uid-2", "11"), false},
		{"VM re-created", snap("uid-9", "10", "uid-2", "11"), true},
		{"VMI re-created", snap("uid-1", "10", "uid-9", "11"), true},
		{"VM changed", snap("uid-1", "12", "uid-2", "11"), true},
		{"VMI changed", snap("uid-1", "10", "uid-2", "12"), true},
		{"VM gone", snapshot.New(snapshot.Snapshot{VMIs: first.VMIs}), true},
	} {
		for _, fp := range []func(*snapshot.Snapshot) string{resourceVersions, danglingVersions} {
			r := moved(fp(first), fp(c.last))
			if (r != nil) != c.refuse {
				t.Errorf("%s: want refused %v, got %+v", c.name, c.refuse, r)
			}
			if r != nil && r.Outcome != drift.Refused {
				t.Errorf("%s: outcome %s", c.name, r.Outcome)
			}
		}
	}
}
