package main

import (
	"fmt"
	"testing"
)

// The first run visits the contestants in the order listed; every run
// visits each once; and over the runs of a measurement no contestant always
// runs right after the same one (what a job leaves on the API server must
// not always fall on the next). The same run is the same order each time.
func TestRunOrderShufflesTheContestants(t *testing.T) {
	const n, runs = 9, 5
	if got := fmt.Sprint(runOrder(n, 0)); got != "[0 1 2 3 4 5 6 7 8]" {
		t.Errorf("the first run's order is %s, want the listed one", got)
	}
	before := make([]map[int]bool, n)
	for r := 0; r < runs; r++ {
		order := runOrder(n, r)
		if fmt.Sprint(order) != fmt.Sprint(runOrder(n, r)) {
			t.Errorf("run %d: the order differs from one call to the next", r)
		}
		seen := map[int]bool{}
		prev := -1
		for _, i := range order {
			if i < 0 || i >= n || seen[i] {
				t.Fatalf("run %d: %v is not an order of the contestants", r, order)
			}
			seen[i] = true
			if before[i] == nil {
				before[i] = map[int]bool{}
			}
			before[i][prev] = true
			prev = i
		}
		if len(seen) != n {
			t.Fatalf("run %d: %v visits %d contestants, want %d", r, order, len(seen), n)
		}
	}
	for i, b := range before {
		if len(b) < 2 {
			t.Errorf("contestant %d ran after the same one (or first) in all %d runs", i, runs)
		}
	}
	if got := fmt.Sprint(runOrder(1, 3)); got != "[0]" {
		t.Errorf("one contestant: %s", got)
	}
}
