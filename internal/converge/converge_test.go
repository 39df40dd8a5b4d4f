package converge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
)

func TestWait(t *testing.T) {
	late := func(d time.Duration) string { return "still there after " + d.String() }
	n := 0
	third := func(context.Context) bool { n++; return n >= 3 }
	if r := Wait(context.Background(), time.Millisecond, time.Second, third, "gone", late); r.Outcome != drift.Applied || r.Message != "gone" || n != 3 {
		t.Fatalf("converges on the third read: got %+v after %d reads", r, n)
	}
	never := func(context.Context) bool { return false }
	if r := Wait(context.Background(), time.Millisecond, 20*time.Millisecond, never, "gone", late); r.Outcome != drift.Pending || r.Cause != drift.Timeout || r.Message != "still there after 20ms" {
		t.Fatalf("never converges: got %+v, want Pending (Timeout) with the late message", r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := Wait(ctx, time.Millisecond, time.Second, never, "gone", late); r.Outcome != drift.Pending || !strings.Contains(r.Message, "stopped waiting") || r.Err == nil {
		t.Fatalf("caller stopped: got %+v, want Pending saying it stopped waiting", r)
	}
}
