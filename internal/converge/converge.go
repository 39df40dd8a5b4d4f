// Package converge waits for an accepted change to show, the one way every
// platform's act does: poll a live read at an interval until it shows the
// change or the timeout passes, and say how it ended in the outcomes of
// internal/drift (Applied once it shows, Pending when it did not in time or
// the caller stopped waiting). It never writes.
package converge

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tether-dev/tether/internal/drift"
)

// Wait polls converged (first at once, then every interval) for at most
// timeout. It returns Applied with the message done once converged holds;
// Pending (cause Timeout) with late(timeout) when the timeout passed;
// Pending with why when ctx ended first.
func Wait(ctx context.Context, interval, timeout time.Duration, converged func(context.Context) bool, done string, late func(time.Duration) string) drift.Result {
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		return converged(ctx), nil
	})
	switch {
	case err == nil:
		return drift.Result{Outcome: drift.Applied, Message: done}
	case ctx.Err() != nil:
		return drift.Result{Outcome: drift.Pending, Cause: drift.Timeout, Message: done + ": accepted; stopped waiting: " + ctx.Err().Error(), Err: ctx.Err()}
	}
	return drift.Result{Outcome: drift.Pending, Cause: drift.Timeout, Message: late(timeout)}
}
