package tenant

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/metrics"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
)

// The informers' requests feed the tenant's connection state: a refused
// connection (which the informers retry without reporting it) makes the
// evidence unknown until a request succeeds and the hold has passed.
func TestObservedTransport_recordsFailuresAndSuccesses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	conn := &connState{}
	c := &http.Client{Transport: &observedTransport{next: http.DefaultTransport, conn: conn}}
	get := func(url string) {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
		}
	}
	get(srv.URL + "/ok")
	if ok, why := conn.reachable(true, time.Now()); !ok {
		t.Fatalf("unknown after a success: %s", why)
	}
	get(srv.URL + "/fail")
	if ok, _ := conn.reachable(true, time.Now()); ok {
		t.Fatal("reachable right after a server error")
	}
	srv.Close()
	get(srv.URL + "/ok") // connection refused
	if ok, _ := conn.reachable(true, time.Now().Add(time.Hour)); ok {
		t.Fatal("reachable with no success since the refused connection")
	}
}

func TestWatchError_ignoresNormalEnds(t *testing.T) {
	conn := &connState{}
	for _, err := range []error{io.EOF, apierrors.NewResourceExpired("too old"), apierrors.NewGone("gone")} {
		conn.watchError(context.Background(), new(toolscache.Reflector), err)
	}
	if !conn.lastErr.IsZero() {
		t.Fatalf("a normal end of a watch counted as an error: %s", conn.errMsg)
	}
	conn.watchError(context.Background(), new(toolscache.Reflector), errors.New("i/o timeout"))
	if ok, why := conn.reachable(true, time.Now()); ok || why == "" {
		t.Fatal("a watch error left the evidence reachable")
	}
}

func TestTenantReachable(t *testing.T) {
	now := t0
	for _, c := range []struct {
		name            string
		synced          bool
		lastErr, lastOK time.Time
		want            bool
	}{
		{name: "not synced -> unknown", synced: false, want: false},
		{name: "synced, never an error -> reachable", synced: true, lastOK: now.Add(-time.Second), want: true},
		{name: "error 5s ago, requests succeed since -> unknown (the cache may still be stale)", synced: true,
			lastErr: now.Add(-5 * time.Second), lastOK: now.Add(-time.Second), want: false},
		{name: "error 29s ago -> unknown", synced: true, lastErr: now.Add(-29 * time.Second), lastOK: now, want: false},
		{name: "error 31s ago, succeeded since -> reachable", synced: true,
			lastErr: now.Add(-31 * time.Second), lastOK: now.Add(-20 * time.Second), want: true},
		{name: "error 50s ago, nothing succeeded since (backing off) -> unknown", synced: true,
			lastErr: now.Add(-50 * time.Second), lastOK: now.Add(-10 * time.Minute), want: false},
		{name: "partitioned long ago, never recovered -> unknown", synced: true,
			lastErr: now.Add(-time.Hour), lastOK: now.Add(-2 * time.Hour), want: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, why := tenantReachable(c.synced, c.lastErr, "dial tcp: connection refused", c.lastOK, now)
			if got != c.want {
				t.Fatalf("reachable = %v (%s), want %v", got, why, c.want)
			}
			if !got && why == "" {
				t.Fatal("unknown evidence without a reason")
			}
			if !got && c.synced && !strings.Contains(why, "connection refused") {
				t.Fatalf("reason %q does not name the last error", why)
			}
		})
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// A tenant is up as the checks read it: down until
// its caches synced, up then, down again right after an API failure.
func TestWatch_up(t *testing.T) {
	fact := informers.NewSharedInformerFactory(k8sfake.NewClientset(), 0)
	tw := &Watch{cfg: config.TenantConfig{Name: "guest-gauge"}, conn: &connState{tenant: "guest-gauge"},
		vas: fact.Storage().V1().VolumeAttachments().Informer(), pvs: fact.Core().V1().PersistentVolumes().Informer(),
		nodes: fact.Core().V1().Nodes().Informer(), csiNodes: fact.Storage().V1().CSINodes().Informer(),
		drivers: fact.Storage().V1().CSIDrivers().Informer()}
	now := time.Now()
	up := func() bool { return tw.Up(now) }

	if up() {
		t.Error("up before the tenant's caches synced")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fact.Start(ctx.Done())
	fact.WaitForCacheSync(ctx.Done())
	if !up() {
		t.Error("down although the caches synced and nothing failed")
	}
	errorsBefore := testutil.ToFloat64(metrics.TenantErrors.WithLabelValues("guest-gauge"))
	tw.conn.failed(now, errors.New("connection refused"))
	if up() {
		t.Error("up right after a failed request")
	}
	if got := testutil.ToFloat64(metrics.TenantErrors.WithLabelValues("guest-gauge")); got != errorsBefore+1 {
		t.Errorf("tether_tenant_errors_total: got %v, want %v", got, errorsBefore+1)
	}
}
