package drift

import "sync"

// writtenBatch is how many findings EachWritten hands over at a time.
const writtenBatch = 64

// EachWritten calls each with every finding of fs in order, as Written
// copies: their deferred words written, fs left as it is. The words are
// written on another goroutine, a few batches ahead of each, so that a
// printer of hundreds of thousands of findings has words and print share
// two cores while holding the words of only a few hundred findings. each
// must not read what the words are written from (the snapshot and the
// checks' lookups: it gets the words); nothing else may meanwhile. It
// returns each's first error, once the other goroutine has stopped.
func EachWritten(fs []Finding, each func(*Finding) error) error {
	const batches = 3
	full := make(chan []Finding, batches)
	free := make(chan []Finding, batches)
	for range batches {
		free <- make([]Finding, 0, writtenBatch)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(full)
		for start := 0; start < len(fs); start += writtenBatch {
			var b []Finding
			select {
			case b = <-free:
			case <-stop:
				return
			}
			for i := start; i < min(start+writtenBatch, len(fs)); i++ {
				b = append(b, fs[i].Written())
			}
			full <- b // never blocks: full holds every batch there is
		}
	}()
	var err error
	for b := range full {
		for i := 0; i < len(b) && err == nil; i++ {
			err = each(&b[i])
		}
		if err != nil {
			break
		}
		clear(b) // the words are garbage once printed
		free <- b[:0]
	}
	close(stop)
	wg.Wait()
	return err
}
