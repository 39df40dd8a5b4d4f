package snapshot_test

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// The kind table has one row per kind, in the order of their bits, and
// together they are every kind.
func TestKindTable_oneRowPerKind(t *testing.T) {
	var all snapshot.Kinds
	names := map[string]bool{}
	for i, row := range snapshot.KindTable() {
		if row.Kind != 1<<i {
			t.Errorf("row %d (%s) is kind %b, want the bit %b", i, row.Name, row.Kind, 1<<i)
		}
		if row.Name == "" || names[row.Name] || len(row.Resources) == 0 {
			t.Errorf("row %d: name %q (twice: %v), %d resources", i, row.Name, names[row.Name], len(row.Resources))
		}
		names[row.Name] = true
		all |= row.Kind
	}
	if all != snapshot.AllKinds {
		t.Errorf("the table holds %s, AllKinds is %s", all, snapshot.AllKinds)
	}
	if got := (snapshot.KindVMs | snapshot.KindStorage).String(); got != "VMs,Storage" {
		t.Errorf("String: %q", got)
	}
}

// Each resource of the table is a kind of the clients' scheme, and the
// caches hold it as its row says: the controller's cache transform makes
// every object lean (snapshot.Lean), which drops what no decision reads
// (here, an annotation) of the kinds the table calls lean or compact, and
// stores compact only those it calls compact.
func TestKindTable_watchIsWhatTheCachesHold(t *testing.T) {
	const dropped = "tether.test/dropped"
	for _, row := range snapshot.KindTable() {
		for _, res := range row.Resources {
			o, err := clients.Scheme().New(res.GroupVersionKind)
			if err != nil {
				t.Errorf("%s: %s is not in the clients' scheme: %v", row.Name, res.GroupVersionKind, err)
				continue
			}
			m := o.(metav1.Object)
			m.SetName("x")
			m.SetAnnotations(map[string]string{dropped: "x"})
			o.GetObjectKind().SetGroupVersionKind(res.GroupVersionKind)
			lean := snapshot.Lean(o).(metav1.Object)
			if _, kept := lean.GetAnnotations()[dropped]; kept != (row.Watch == snapshot.WatchWhole || row.Watch == snapshot.NotWatched) {
				t.Errorf("%s %s: Lean keeps what no decision reads: %v; the table says %s", row.Name, res.Kind, kept, row.Watch)
			}
			compact := reflect.TypeOf(snapshot.Compact(lean)) != reflect.TypeOf(o)
			if compact != (row.Watch == snapshot.WatchCompact) {
				t.Errorf("%s %s: Compact stores it compact: %v; the table says %s", row.Name, res.Kind, compact, row.Watch)
			}
		}
	}
}
