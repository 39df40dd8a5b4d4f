package cli

import (
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/check"
)

func TestParseTenant(t *testing.T) {
	for _, c := range []struct {
		name, spec         string
		wantName, wantPath string
		wantNS, wantErr    string
	}{
		{"name and path -> all namespaces", "guest=/etc/guest.kubeconfig", "guest", "/etc/guest.kubeconfig", "", ""},
		{"name, path and namespace -> namespace", "guest=/etc/guest.kubeconfig:tenant-a", "guest", "/etc/guest.kubeconfig", "tenant-a", ""},
		{"colon inside path, no namespace -> whole path", "g=/a:b/c.kubeconfig", "g", "/a:b/c.kubeconfig", "", ""},
		{"relative path with namespace -> split", "g=kc:ns1", "g", "kc", "ns1", ""},
		{"no equals -> error with form", "guest", "", "", "", "NAME=KUBECONFIG[:NAMESPACE]"},
		{"empty path -> error", "guest=", "", "", "", "no kubeconfig path"},
		{"only namespace -> error", "guest=:ns", "", "", "", "no kubeconfig path"},
		{"invalid name -> error", "Guest_1=/x", "", "", "", "is not valid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseTenant(c.spec)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("want error containing %q, got %v", c.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != c.wantName || got.kubeconfig != c.wantPath || got.Namespace != c.wantNS {
				t.Fatalf("got name=%q path=%q ns=%q", got.Name, got.kubeconfig, got.Namespace)
			}
		})
	}
}

// FuzzParseTenant: never panics; a success always has a valid name and a
// path, and the parts put back together give the input.
func FuzzParseTenant(f *testing.F) {
	for _, s := range []string{"g=/p", "g=/p:ns", "=", "g=:", "a=b=c:d", "g=/x:y:z", "g=C:\\x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		got, err := ParseTenant(spec)
		if err != nil {
			return
		}
		if got.Name == "" || got.kubeconfig == "" {
			t.Fatalf("%q parsed to an empty name or path: %+v", spec, got)
		}
		back := got.Name + "=" + got.kubeconfig
		if got.Namespace != "" {
			back += ":" + got.Namespace
		}
		if back != spec {
			t.Fatalf("%q parsed to %q", spec, back)
		}
	})
}

func TestPlan_boundsSafeActions(t *testing.T) {
	safe := check.Finding{ID: "s", Action: check.Action{Type: check.VMIRemoveVolume, Safe: true}}
	blocked := check.Finding{ID: "b", Action: check.Action{Type: check.VMIRemoveVolume, BlockedBy: check.VMIMigrating}}
	for _, c := range []struct {
		name        string
		findings    []check.Finding
		max         int
		wantPlanned int
		wantSkipped int
	}{
		{"three safe, max 2 -> two planned, one skipped", []check.Finding{safe, safe, safe}, 2, 2, 1},
		{"blocked only -> nothing planned", []check.Finding{blocked, blocked}, 10, 0, 0},
		{"max 0 -> nothing planned", []check.Finding{safe, blocked}, 0, 0, 1},
		{"mixed, room -> safe planned, blocked never", []check.Finding{blocked, safe, blocked, safe}, 10, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			items := plan(c.findings, c.max)
			planned, skipped := 0, 0
			for _, it := range items {
				if it.Planned {
					planned++
					if !it.Finding.Action.Safe {
						t.Fatal("planned a blocked action")
					}
				}
				if it.Skipped != "" {
					skipped++
				}
			}
			if planned != c.wantPlanned || skipped != c.wantSkipped || len(items) != len(c.findings) {
				t.Fatalf("planned %d skipped %d of %d", planned, skipped, len(items))
			}
		})
	}
}
