package protect_test

import (
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/protect/inuse"
)

func TestCoverage(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    protect.Coverage
		ns   string
		want bool
	}{
		{"disabled -> nothing covered", protect.Coverage{Namespaces: []string{"a"}}, "a", false},
		{"enabled, no scope -> every namespace", protect.Coverage{Enabled: true}, "b", true},
		{"enabled, in scope -> covered", protect.Coverage{Enabled: true, Namespaces: []string{"a", "b"}}, "b", true},
		{"enabled, out of scope -> not covered", protect.Coverage{Enabled: true, Namespaces: []string{"a"}}, "b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.Covers(tc.ns); got != tc.want {
				t.Errorf("Covers(%q) = %v, want %v", tc.ns, got, tc.want)
			}
		})
	}
	if (protect.Coverage{Enabled: true, Namespaces: []string{"a"}}).Everything() || !(protect.Coverage{Enabled: true}).Everything() {
		t.Error("Everything: only enabled protection without namespaces covers everything")
	}
}

func TestStrandedMessage(t *testing.T) {
	ref := inuse.Ref{Kind: inuse.KindPVC, Namespace: "b", Name: "disk"}
	for _, tc := range []struct {
		name string
		st   protect.Stranded
		c    protect.Coverage
		want []string
	}{
		{"in use, out of scope -> names the VMs and the scope", protect.Stranded{Ref: ref, Reason: protect.StrandedInUse, Users: []string{"db", "web"}},
			protect.Coverage{Enabled: true, Namespaces: []string{"a"}},
			[]string{"PersistentVolumeClaim b/disk keeps finalizer tether.dev/in-use", "namespace b is outside scope.namespaces", "VirtualMachine(s) db, web use it", "add b to scope.namespaces"}},
		{"no patch right, protection off -> names the right", protect.Stranded{Ref: ref, Reason: protect.StrandedNoPatchRight},
			protect.Coverage{}, []string{"protection is disabled", "may not patch persistentvolumeclaims in b", "enable protection"}},
		{"failed -> points to the log", protect.Stranded{Ref: ref, Reason: protect.StrandedReleaseFailed},
			protect.Coverage{}, []string{"releasing it failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := protect.StrandedMessage(tc.st, tc.c)
			for _, w := range append(tc.want, "tether protect --release -n b --apply") {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q\nlacks %q", msg, w)
				}
			}
			if !strings.HasSuffix(msg, protect.ReleaseCommand("b")) {
				t.Errorf("message %q does not end with the command", msg)
			}
		})
	}
}
