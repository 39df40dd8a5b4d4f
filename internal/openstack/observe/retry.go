package observe

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
)

// maxPoliteRetries is how often a request the service refused as too many
// (429) is sent again when the service says when: client-go's number, as
// tether's Kubernetes reads wait.
const maxPoliteRetries = 10

// maxPoliteWait is the longest wait tether takes on a service's word: a
// Retry-After beyond it fails the request, saying so, rather than leave a
// run waiting for an hour.
const maxPoliteWait = 2 * time.Minute

// politely makes pc wait out a 429 as the service's Retry-After says and
// send the request again, up to maxPoliteRetries times (a rate-limiting
// middleware in front of Nova or Cinder answers so); without a Retry-After
// the 429 is the request's error, as before.
func politely(pc *gophercloud.ProviderClient) {
	pc.MaxBackoffRetries = maxPoliteRetries
	pc.RetryBackoffFunc = func(ctx context.Context, resp *gophercloud.ErrUnexpectedResponseCode, err error, _ uint) error {
		if err == nil {
			// gophercloud passes the answer's error apart; nil from here
			// would mean "send it again".
			err = resp
		}
		wait, ok := retryAfter(resp.ResponseHeader, time.Now())
		switch {
		case !ok:
			return err
		case wait > maxPoliteWait:
			return fmt.Errorf("%w (the service asks to be asked again in %s, longer than tether waits: %s)", err, wait, maxPoliteWait)
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (while waiting %s as the service asked: %v)", err, wait, ctx.Err())
		case <-t.C:
			return nil
		}
	}
}

// retryAfter is how long a Retry-After header asks to wait at now: whole
// seconds or an HTTP date (RFC 9110, 10.2.3); a date in the past is no
// wait. false: no header, or one that is neither.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
