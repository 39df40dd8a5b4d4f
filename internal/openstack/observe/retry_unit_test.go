package observe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header string
		want   time.Duration
		ok     bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{" 7 ", 7 * time.Second, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{"Sun, 29 Nov 2026 03:00:30 GMT", 30 * time.Second, true},
		{"Sun, 29 Nov 2026 02:59:00 GMT", 0, true}, // past: no wait
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("Retry-After", tc.header)
		}
		if got, ok := retryAfter(h, now); got != tc.want || ok != tc.ok {
			t.Errorf("Retry-After %q: %s %v, want %s %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

// rateLimited serves Cinder's volume list behind a rate limiter that
// answers the first busy requests 429 with Retry-After after (none when
// empty); it counts the requests and writes a clouds.yaml for it.
func rateLimited(t *testing.T, busy int64, after string) (cloudsYAML string, sent *atomic.Int64) {
	t.Helper()
	sent = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sent.Add(1) <= busy {
			if after != "" {
				w.Header().Set("Retry-After", after)
			}
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"overLimit": {"code": 429, "message": "Rate limit exceeded"}}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"volumes": [{"id": "v1", "status": "in-use"}]}`))
	}))
	t.Cleanup(srv.Close)
	cloudsYAML = filepath.Join(t.TempDir(), "clouds.yaml")
	yaml := "clouds:\n  limited:\n    auth_type: none\n    auth: {token: 'x:y'}\n    compute_endpoint_override: " + srv.URL + "\n    block_storage_endpoint_override: " + srv.URL + "\n"
	if err := os.WriteFile(cloudsYAML, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return cloudsYAML, sent
}

// The clients Connect makes wait out a rate limiter's 429 as its
// Retry-After says, and give up (saying why) where tether must not wait.
func TestConnect_waitsOutRateLimits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		busy     int64
		after    string
		wantErr  string
		wantSent int64
	}{
		{"Retry-After: waited out", 3, "0", "", 4},
		{"no Retry-After: the 429 is the error", 1, "", "429", 1},
		{"a wait of an hour: refused, saying so", 1, "3600", "longer than tether waits", 1},
		{"busy for ever: ten retries, then the error", 1000, "0", "429", maxPoliteRetries + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, sent := rateLimited(t, tc.busy, tc.after)
			c, err := Connect(context.Background(), ConnectOptions{Cloud: "limited", CloudsYAML: path})
			if err != nil {
				t.Fatal(err)
			}
			_, err = volumes.List(c.BlockStorage, volumes.ListOpts{}).AllPages(context.Background())
			switch {
			case tc.wantErr == "" && err != nil, tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("err %v, want %q", err, tc.wantErr)
			case sent.Load() != tc.wantSent:
				t.Errorf("%d requests, want %d", sent.Load(), tc.wantSent)
			}
		})
	}
}
