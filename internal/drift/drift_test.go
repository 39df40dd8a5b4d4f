package drift_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/internal/drift"
)

// The finding ID is a contract (plans, records and Events carry it): the
// first 12 hex digits of SHA-256("check/ns/kind/name/uid/volume").
func TestFindingIDIsTheContractHash(t *testing.T) {
	// printf 'C/ns/VM/a/u1/v' | sha256sum | cut -c1-12
	got := drift.FindingID("C", "ns", drift.ObjectRef{Kind: "VM", Name: "a", UID: "u1"}, "v")
	if got != "f6df95d6eec7" {
		t.Fatalf("FindingID = %s, want f6df95d6eec7", got)
	}
	other := drift.FindingID("C", "ns", drift.ObjectRef{Kind: "VM", Name: "a", UID: "u2"}, "v")
	if other == got {
		t.Fatal("a re-created object (other UID) has the same finding ID")
	}
}

// One order for every platform: scope, kind, name, volume, check, and the
// UID last, so that a re-created object's findings sit beside the old ones
// of the same volume.
func TestSortOrdersVolumeBeforeUID(t *testing.T) {
	f := func(ns, name, uid, vol, check string) drift.Finding {
		return drift.Finding{Namespace: ns, Check: check, Volume: vol, Object: drift.ObjectRef{Kind: "server", Name: name, UID: types.UID(uid)}}
	}
	in := []drift.Finding{
		f("p", "s", "b", "v1", "X"),
		f("p", "s", "a", "v2", "X"),
		f("p", "s", "a", "v1", "Y"),
		f("p", "s", "a", "v1", "X"),
		f("o", "z", "z", "v9", "X"),
	}
	drift.Sort(in)
	var got []string
	for _, x := range in {
		got = append(got, x.Namespace+"/"+x.Volume+"/"+x.Check+"/"+string(x.Object.UID))
	}
	want := []string{"o/v9/X/z", "p/v1/X/a", "p/v1/X/b", "p/v1/Y/a", "p/v2/X/a"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
