package kevent_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tether-dev/tether/internal/kevent"
)

// The oracle is the API server's own rule for metadata.name of an Event:
// validation.IsDNS1123Subdomain from k8s.io/apimachinery.
func valid(t *testing.T, name string) {
	t.Helper()
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		t.Fatalf("name %q (%d characters) is not a valid Event name: %v", name, len(name), errs)
	}
}

func TestName_lengths(t *testing.T) {
	const suffix = "tether-0123456789ab-x7k2q" // what act.Recorder uses
	for _, n := range []int{1, 63, 227, 228, 229, 252, 253} {
		object := strings.Repeat("a", n)
		got := kevent.Name(object, suffix)
		valid(t, got)
		fits := n+1+len(suffix) <= validation.DNS1123SubdomainMaxLength
		if fits && got != object+"."+suffix {
			t.Errorf("object of %d characters: got %q, want the plain <object>.<suffix>", n, got)
		}
		if !fits {
			if !strings.HasSuffix(got, "."+suffix) {
				t.Errorf("object of %d characters: %q lost its suffix", n, got)
			}
			if !strings.HasPrefix(got, strings.Repeat("a", 100)) {
				t.Errorf("object of %d characters: %q does not start with the object's name", n, got)
			}
		}
	}
}

// Two long names that differ only past the cut get different Event names,
// and one name always gets the same one.
func TestName_longNamesStayApart(t *testing.T) {
	a := strings.Repeat("p", 240) + "-one"
	b := strings.Repeat("p", 240) + "-two"
	ea, eb := kevent.Name(a, "s"), kevent.Name(b, "s")
	if ea == eb {
		t.Fatalf("both got %q", ea)
	}
	if kevent.Name(a, "s") != ea {
		t.Fatal("not stable")
	}
	valid(t, ea)
	valid(t, eb)
}

// Names with dots that land at the cut, or that the API server would not
// accept as they are, still give valid names.
func TestName_awkwardInput(t *testing.T) {
	for _, object := range []string{
		"",
		strings.Repeat("ab.", 80) + "cd", // a dot falls at the cut
		strings.Repeat("a-", 126) + "b",  // a '-' falls at the cut
		"UPPER.Case",                     // not a valid name at all
		strings.Repeat(".", 300),         // nothing usable
		"vm." + strings.Repeat("x", 249), // 252: valid object, too long with suffix
	} {
		valid(t, kevent.Name(object, "tether-abc"))
	}
	valid(t, kevent.Name("vm", ""))
	valid(t, kevent.Name("vm", strings.Repeat("Z.", 200)))
}

func FuzzName(f *testing.F) {
	f.Add("vm-1", "tether-0123456789ab-abcde")
	f.Add(strings.Repeat("a", 253), "tether-x")
	f.Add("a.b", "")
	f.Fuzz(func(t *testing.T, object, suffix string) {
		got := kevent.Name(object, suffix)
		valid(t, got)
		if kevent.Valid(got) != (len(validation.IsDNS1123Subdomain(got)) == 0) {
			t.Fatalf("Valid(%q) disagrees with the API server's rule", got)
		}
		if name := object + "." + suffix; len(validation.IsDNS1123Subdomain(name)) == 0 && len(suffix) <= 64 && got != name {
			t.Fatalf("a valid name %q was changed to %q", name, got)
		}
	})
}

func FuzzValid(f *testing.F) {
	f.Add("a.b-c")
	f.Add("-a")
	f.Add("a..b")
	f.Fuzz(func(t *testing.T, name string) {
		if kevent.Valid(name) != (len(validation.IsDNS1123Subdomain(name)) == 0) {
			t.Fatalf("Valid(%q) = %v, the API server's rule says otherwise", name, kevent.Valid(name))
		}
	})
}
