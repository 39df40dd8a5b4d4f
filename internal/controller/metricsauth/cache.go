package metricsauth

import (
	"sync"
	"time"
)

// answers remembers the API server's answers for a while, so that a
// scraper asking every few seconds costs one review per TTL, not one per
// scrape. It holds at most max entries: a full cache first drops what has
// expired, then arbitrary entries, so a flood of distinct tokens cannot
// grow it.
type answers[V any] struct {
	mu  sync.Mutex
	max int
	m   map[string]answer[V]
}

type answer[V any] struct {
	v       V
	expires time.Time
}

func newAnswers[V any](max int) *answers[V] {
	return &answers[V]{max: max, m: make(map[string]answer[V])}
}

// get returns the answer stored under key unless it has expired at now.
func (a *answers[V]) get(key string, now time.Time) (V, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.m[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// put stores v under key until now+ttl; a ttl of zero or less stores
// nothing.
func (a *answers[V]) put(key string, v V, ttl time.Duration, now time.Time) {
	if ttl <= 0 || a.max <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.m[key]; !ok && len(a.m) >= a.max {
		for k, e := range a.m {
			if !now.Before(e.expires) {
				delete(a.m, k)
			}
		}
		for k := range a.m {
			if len(a.m) < a.max {
				break
			}
			delete(a.m, k)
		}
	}
	a.m[key] = answer[V]{v: v, expires: now.Add(ttl)}
}

// len is the number of entries held, expired or not.
func (a *answers[V]) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}
