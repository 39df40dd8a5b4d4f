package drift

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// deferredFindings returns n findings, every other one with its words
// deferred; wrote counts the words written.
func deferredFindings(n int, wrote *int) []Finding {
	fs := make([]Finding, n)
	for i := range fs {
		fs[i] = Finding{ID: fmt.Sprint(i), Message: fmt.Sprintf("finding %d", i), Evidence: []string{"first"}}
		if i%2 == 0 {
			i := i
			fs[i].Defer(func() Text {
				*wrote++
				return Text{Message: fmt.Sprintf("finding %d", i), Evidence: []string{"first"}, Remedy: "fix it"}
			})
			fs[i].Block(NotRequested, "added") // evidence added meanwhile follows the words'
		}
	}
	return fs
}

func TestEachWritten_inOrderWithWordsAndLeavesTheFindings(t *testing.T) {
	for _, n := range []int{0, 1, writtenBatch - 1, writtenBatch, 3*writtenBatch + 5, 10000} {
		wrote := 0
		fs := deferredFindings(n, &wrote)
		next := 0
		err := EachWritten(fs, func(f *Finding) error {
			if f.ID != fmt.Sprint(next) {
				return fmt.Errorf("finding %s in the turn of %d", f.ID, next)
			}
			if f.Deferred() || f.Message != fmt.Sprintf("finding %d", next) {
				return fmt.Errorf("finding %d handed over without its words: %+v", next, *f)
			}
			if next%2 == 0 && (len(f.Evidence) != 2 || f.Evidence[1] != "added" || f.Action.Remedy != "fix it") {
				return fmt.Errorf("finding %d: evidence %q, remedy %q", next, f.Evidence, f.Action.Remedy)
			}
			next++
			return nil
		})
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if next != n || wrote != (n+1)/2 {
			t.Fatalf("n=%d: %d handed over, %d words written", n, next, wrote)
		}
		for i := 0; i < n; i += 2 {
			if !fs[i].Deferred() || fs[i].Message != "" {
				t.Fatalf("n=%d: finding %d got its words written in place", n, i)
			}
		}
	}
}

func TestEachWritten_stopsAtTheFirstErrorAndLeavesNothingRunning(t *testing.T) {
	before := runtime.NumGoroutine()
	wrote := 0
	fs := deferredFindings(100*writtenBatch, &wrote)
	bad, seen := errors.New("disk full"), 0
	err := EachWritten(fs, func(f *Finding) error {
		seen++
		if seen == writtenBatch+3 {
			return bad
		}
		return nil
	})
	if !errors.Is(err, bad) || seen != writtenBatch+3 {
		t.Fatalf("err %v after %d findings, want %v after %d", err, seen, bad, writtenBatch+3)
	}
	// The words goroutine has returned: no more words are written, and at
	// most the batches that existed were.
	n := wrote
	time.Sleep(20 * time.Millisecond)
	if wrote != n || wrote > 4*writtenBatch/2 {
		t.Fatalf("words written after EachWritten returned, or far ahead: %d then %d", n, wrote)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines before, %d after", before, after)
	}
}
