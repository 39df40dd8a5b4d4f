package drift

import (
	"fmt"
	"testing"
)

// row is a check row whose findings are given.
type row struct {
	Row
	fs []Finding
}

func (r row) Find(struct{}) []Finding { return r.fs }

// findingsOf returns n findings of check, out of order, in an array of
// room cap.
func findingsOf(check string, n, room int) []Finding {
	out := make([]Finding, 0, room)
	for i := n - 1; i >= 0; i-- {
		out = append(out, Finding{Check: check, Namespace: "ns", Object: ObjectRef{Kind: "VirtualMachine", Name: fmt.Sprintf("vm-%03d", i)}})
	}
	return out
}

// The findings are joined without a second array of them when one of the
// rows' arrays can hold them all: at 100,000 VMIs such a copy is tens of
// megabytes more at the moment an audit's heap is at its largest.
func TestRunJoinsFindingsWithoutASecondArray(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows []row
		// in is the row whose array Run should return.
		in int
	}{
		{"one row with findings -> its own array", []row{{Row{Name: "A"}, nil}, {Row{Name: "B"}, findingsOf("B", 50, 50)}}, 1},
		{"a row with room for the others -> its array", []row{{Row{Name: "A"}, findingsOf("A", 30, 30)}, {Row{Name: "B"}, findingsOf("B", 50, 80)}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := 0
			for _, r := range tc.rows {
				want += len(r.fs)
			}
			array := &tc.rows[tc.in].fs[:1][0]
			got := Run(tc.rows, struct{}{}, nil)
			if len(got) != want {
				t.Fatalf("Run returned %d findings, want %d", len(got), want)
			}
			if &got[0] != array {
				t.Errorf("Run copied the findings into a new array, want them joined in row %s's", tc.rows[tc.in].Name)
			}
			for i := 1; i < len(got); i++ {
				if Compare(got[i-1], got[i]) > 0 {
					t.Fatalf("findings %d and %d out of order: %+v, %+v", i-1, i, got[i-1].Object, got[i].Object)
				}
			}
		})
	}
}

// Without room anywhere, Run still returns every finding, sorted, and
// leaves the rows' arrays as they were.
func TestRunJoinsRowsWithoutRoom(t *testing.T) {
	a, b := findingsOf("A", 3, 3), findingsOf("B", 2, 2)
	a0, b0 := a[0].Object, b[0].Object
	got := Run([]row{{Row{Name: "A"}, a}, {Row{Name: "B"}, b}}, struct{}{}, nil)
	if len(got) != 5 {
		t.Fatalf("Run returned %d findings, want 5", len(got))
	}
	if a[0].Object != a0 || b[0].Object != b0 {
		t.Errorf("Run changed a row's array")
	}
	for i := 1; i < len(got); i++ {
		if Compare(got[i-1], got[i]) > 0 {
			t.Fatalf("findings %d and %d out of order", i-1, i)
		}
	}
}
