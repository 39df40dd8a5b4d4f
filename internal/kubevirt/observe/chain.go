package observe

import (
	"context"
	"errors"
	"sync"
)

// chain runs LISTs concurrently with a fixed order of starts: each starts
// once the one before it has its first page (or has ended); a kind the
// page reader reads, once the server has answered its first page, before
// the page has arrived whole. The server has taken the LIST's
// resourceVersion before it answers, and serves the later pages at that
// of the first, so every kind is still read at a resourceVersion no older
// than the kinds before it, as when they are read one after the other,
// while the server encodes one kind and tether decodes another.
type chain struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// prev is closed once the last step added has its first page.
	prev chan struct{}
	mu   sync.Mutex
	errs map[int]error
	n    int
}

func newChain(ctx context.Context) *chain {
	ctx, cancel := context.WithCancel(ctx)
	return &chain{ctx: ctx, cancel: cancel, errs: map[int]error{}}
}

// add starts run once the step before it has its first page. run calls
// first when it has its own first page; an error from it stops the chain.
func (c *chain) add(run func(ctx context.Context, first func()) error) {
	i, wait, ready := c.n, c.prev, make(chan struct{})
	c.n++
	c.prev = ready
	var once sync.Once
	first := func() { once.Do(func() { close(ready) }) }
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer first()
		if wait != nil {
			select {
			case <-wait:
			case <-c.ctx.Done():
			}
		}
		if err := c.ctx.Err(); err != nil {
			c.fail(i, err) // an earlier step failed: never start
			return
		}
		if err := run(c.ctx, first); err != nil {
			c.fail(i, err)
		}
	}()
}

func (c *chain) fail(i int, err error) {
	c.mu.Lock()
	c.errs[i] = err
	c.mu.Unlock()
	c.cancel()
}

// wait waits for every step and returns the error of the first step (in
// the order added) that failed for a reason of its own, else the first
// error.
func (c *chain) wait() error {
	c.wg.Wait()
	c.cancel()
	var first error
	for i := 0; i < c.n; i++ {
		err := c.errs[i]
		if err == nil {
			continue
		}
		if !errors.Is(err, context.Canceled) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}
