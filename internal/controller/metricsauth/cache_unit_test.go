package metricsauth

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// The caches stay bounded under a flood of distinct tokens, and a full
// cache drops expired answers before live ones.
func TestAnswers_bounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	a := newAnswers[bool](4)
	a.put("old", true, time.Second, now)
	a.put("live", true, time.Hour, now)
	later := now.Add(2 * time.Second)
	for i := 0; i < 3; i++ {
		a.put(fmt.Sprint("k", i), true, time.Hour, later)
	}
	if _, ok := a.get("live", later); !ok || a.len() != 4 {
		t.Errorf("live answer dropped before the expired one (len %d)", a.len())
	}
	for i := 0; i < 1000; i++ {
		a.put(fmt.Sprint("flood", i), false, time.Hour, later)
		if a.len() > 4 {
			t.Fatalf("after %d puts the cache holds %d entries, want at most 4", i+1, a.len())
		}
	}
	if _, ok := a.get("flood999", later); !ok {
		t.Error("the newest answer was not kept")
	}
	if _, ok := a.get("flood999", later.Add(time.Hour)); ok {
		t.Error("an answer outlived its TTL")
	}
}

// Bearer tokens are read as the API server reads them.
func TestBearer(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"  BEARER abc  ", "abc", true},
		{"Bearer abc extra", "abc", true},
		{"Bearer", "", false},
		{"Bearer  abc", "", false}, // a space before the token: the API server ignores it too
		{"Basic abc", "", false},
		{"", "", false},
	} {
		req, _ := http.NewRequest("GET", "/metrics", nil)
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		if token, ok := bearer(req); token != tc.token || ok != tc.ok {
			t.Errorf("%q: %q %v, want %q %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}
