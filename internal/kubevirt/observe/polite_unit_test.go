package observe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// busyServer answers the first busy requests with code and header
// Retry-After: after (none when empty), then 200.
func busyServer(t *testing.T, busy int64, code int, after string) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= busy {
			if after != "" {
				w.Header().Set("Retry-After", after)
			}
			http.Error(w, "busy", code)
			return
		}
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestDoPolitely(t *testing.T) {
	for _, tc := range []struct {
		name       string
		busy       int64
		code       int
		after      string
		wantStatus int
		wantSent   int64
	}{
		{"429 with Retry-After: waited out", 3, http.StatusTooManyRequests, "0", http.StatusOK, 4},
		{"503 with Retry-After (a server starting): waited out", 2, http.StatusServiceUnavailable, "0", http.StatusOK, 3},
		{"429 without Retry-After: answered at once", 1, http.StatusTooManyRequests, "", http.StatusTooManyRequests, 1},
		{"429 with a Retry-After that is a date: answered at once", 1, http.StatusTooManyRequests, "Wed, 21 Oct 2026 07:28:00 GMT", http.StatusTooManyRequests, 1},
		{"404 with Retry-After: no retry", 1, http.StatusNotFound, "0", http.StatusNotFound, 1},
		{"busy for ever: the last answer after client-go's ten retries", 100, http.StatusTooManyRequests, "0", http.StatusTooManyRequests, maxPoliteRetries + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, sent := busyServer(t, tc.busy, tc.code, tc.after)
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
			resp, err := doPolitely(context.Background(), srv.Client(), req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || sent.Load() != tc.wantSent {
				t.Errorf("status %d after %d requests, want %d after %d", resp.StatusCode, sent.Load(), tc.wantStatus, tc.wantSent)
			}
		})
	}
}

// A wait the server asks for ends when the caller gives up.
func TestDoPolitely_waitEndsWithTheContext(t *testing.T) {
	srv, _ := busyServer(t, 100, http.StatusTooManyRequests, "30")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	t0 := time.Now()
	_, err := doPolitely(ctx, srv.Client(), req)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 10*time.Second {
		t.Fatalf("err %v after %s; want the context's deadline, long before the server's 30s", err, time.Since(t0))
	}
}
