package observe

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// Each LIST of the chain starts only once the one before it has its first
// page, and a LIST still reading its later pages does not hold up the next.
func TestChain_startsAfterTheFirstPageOfTheOneBefore(t *testing.T) {
	ch := newChain(context.Background())
	var mu sync.Mutex
	var events []string
	log := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	release := make(chan struct{})
	for _, name := range []string{"a", "b", "c"} {
		ch.add(func(ctx context.Context, first func()) error {
			log(name + " start")
			time.Sleep(5 * time.Millisecond)
			log(name + " first")
			first()
			if name == "a" {
				<-release // a's later pages wait until c has started
			}
			log(name + " end")
			return nil
		})
	}
	go func() {
		for {
			mu.Lock()
			started := len(events) > 0 && contains(events, "c start")
			mu.Unlock()
			if started {
				close(release)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if err := ch.wait(); err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, e := range events {
		pos[e] = i
	}
	if !(pos["a first"] < pos["b start"] && pos["b first"] < pos["c start"]) {
		t.Fatalf("a step started before the first page of the one before it: %v", events)
	}
	if !(pos["c start"] < pos["a end"]) {
		t.Fatalf("the LISTs did not overlap: %v", events)
	}
}

func contains(s []string, e string) bool {
	for _, x := range s {
		if x == e {
			return true
		}
	}
	return false
}

// A failing LIST stops the others, and its own error is the one returned,
// not the cancellation it caused in the steps around it.
func TestChain_returnsTheCauseNotTheCancellation(t *testing.T) {
	ch := newChain(context.Background())
	boom := errors.New("forbidden")
	ch.add(func(ctx context.Context, first func()) error {
		first()
		<-ctx.Done()
		return ctx.Err()
	})
	ch.add(func(ctx context.Context, first func()) error { return boom })
	ch.add(func(ctx context.Context, first func()) error {
		t.Error("a step after a failure before its start must not run")
		return nil
	})
	if err := ch.wait(); !errors.Is(err, boom) {
		t.Fatalf("wait = %v, want %v", err, boom)
	}
}
