package gauges

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/metrics"
)

func gaugeRecord(name, check, severity string, phase v1alpha1.Phase, first time.Time) *v1alpha1.Finding {
	return &v1alpha1.Finding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:   v1alpha1.FindingSpec{Check: check},
		Status: v1alpha1.FindingStatus{Phase: phase, Severity: severity, FirstObserved: &metav1.Time{Time: first}}}
}

func TestGauges_findingsByCheckPhaseAndSeverity(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	breaker := gaugeRecord(findingrecord.BreakerName, findingrecord.BreakerCheck, "", v1alpha1.PhaseBlocked, t0.Add(-time.Hour))
	c := fake.NewClientBuilder().WithScheme(clients.Scheme()).WithObjects(
		gaugeRecord("a", "OrphanHotplugVolume", "warning", v1alpha1.PhaseBlocked, t0.Add(2*time.Hour)),
		gaugeRecord("b", "OrphanHotplugVolume", "warning", v1alpha1.PhaseBlocked, t0),
		gaugeRecord("c", "OrphanHotplugVolume", "info", v1alpha1.PhaseBlocked, t0.Add(time.Hour)),
		// Resolved: counted, but never the oldest open finding.
		gaugeRecord("d", "OrphanHotplugVolume", "warning", v1alpha1.PhaseResolved, t0.Add(-48*time.Hour)),
		breaker,
	).Build()
	metrics.Findings.WithLabelValues("Stale", "Acting", "warning").Set(7)       // must be cleared
	metrics.FindingsOldest.WithLabelValues("Stale", "Acting", "warning").Set(1) // must be cleared
	g := Gauges{Cache: c, Namespace: "ns", Now: func() time.Time { return t0 }}
	g.refresh(context.Background())

	for _, w := range []struct {
		phase, severity string
		want            float64
	}{{"Blocked", "warning", 2}, {"Blocked", "info", 1}, {"Resolved", "warning", 1}} {
		if got := testutil.ToFloat64(metrics.Findings.WithLabelValues("OrphanHotplugVolume", w.phase, w.severity)); got != w.want {
			t.Errorf("tether_findings %s/%s: got %v, want %v", w.phase, w.severity, got, w.want)
		}
	}
	if n := testutil.CollectAndCount(metrics.Findings); n != 3 {
		t.Errorf("want 3 series of tether_findings (no breaker, nothing stale), got %d", n)
	}
	if got := testutil.ToFloat64(metrics.FindingsOldest.WithLabelValues("OrphanHotplugVolume", "Blocked", "warning")); got != float64(t0.Unix()) {
		t.Errorf("oldest open warning: got %v, want %v (the earlier of two)", got, t0.Unix())
	}
	if n := testutil.CollectAndCount(metrics.FindingsOldest); n != 2 {
		t.Errorf("want 2 series of the oldest open finding (a resolved one has none), got %d", n)
	}
	if got := testutil.ToFloat64(metrics.BlastRadiusTripped); got != 1 {
		t.Errorf("the breaker record shows a trip: tether_blast_radius_tripped %v, want 1", got)
	}

	// An operator's reset clears it, unless this process itself tripped
	// and has not written the record yet.
	breaker.Status.Phase, breaker.Status.ResolvedAt = v1alpha1.PhaseResolved, &metav1.Time{Time: t0}
	if err := c.Update(context.Background(), breaker); err != nil {
		t.Fatal(err)
	}
	g.refresh(context.Background())
	if got := testutil.ToFloat64(metrics.BlastRadiusTripped); got != 0 {
		t.Errorf("after a reset: tether_blast_radius_tripped %v, want 0", got)
	}
	g.Budget = trippedBudget{}
	metrics.BlastRadiusTripped.Set(0)
	g.refresh(context.Background())
	if got := testutil.ToFloat64(metrics.BlastRadiusTripped); got != 1 {
		t.Errorf("this process tripped: tether_blast_radius_tripped %v, want 1", got)
	}
}

// tether_tenant_up is each tenant's Up; tether_tenant_nodes_fenced its
// count of fenced nodes while it is up, and its last count while it is
// not (an unreachable tenant's nodes are not known to be unfenced).
func TestGauges_tenantUp(t *testing.T) {
	now := time.Now()
	metrics.TenantNodesFenced.WithLabelValues("guest-down").Set(3) // last seen while up
	g := Gauges{Cache: fake.NewClientBuilder().WithScheme(clients.Scheme()).Build(), Now: func() time.Time { return now },
		Tenants: []Health{stubTenant{"guest-up", true, 2, 1}, stubTenant{"guest-down", false, 0, 0}}}
	g.refresh(context.Background())
	for name, want := range map[string]float64{"guest-up": 1, "guest-down": 0} {
		if got := testutil.ToFloat64(metrics.TenantUp.WithLabelValues(name)); got != want {
			t.Errorf("tether_tenant_up{tenant=%q} = %v, want %v", name, got, want)
		}
	}
	for name, want := range map[string]float64{"guest-up": 2, "guest-down": 3} {
		if got := testutil.ToFloat64(metrics.TenantNodesFenced.WithLabelValues(name)); got != want {
			t.Errorf("tether_tenant_nodes_fenced{tenant=%q} = %v, want %v", name, got, want)
		}
	}
	for step, want := range map[string]float64{metrics.UnfenceCordoned: 1, metrics.UnfenceSettling: 2} {
		if got := testutil.ToFloat64(metrics.TenantNodesUnfencing.WithLabelValues("guest-up", step)); got != want {
			t.Errorf("tether_tenant_nodes_unfencing{tenant=guest-up,step=%q} = %v, want %v", step, got, want)
		}
	}
}

// stubTenant is a tenant whose evidence counts or not.
type stubTenant struct {
	name   string
	up     bool
	fenced int
	// cordoned nodes un-fencing; twice as many settling.
	cordoned int
}

func (s stubTenant) Name() string          { return s.name }
func (s stubTenant) Up(time.Time) bool     { return s.up }
func (s stubTenant) Fenced() int           { return s.fenced }
func (s stubTenant) Unfencing() (int, int) { return s.cordoned, 2 * s.cordoned }

// trippedBudget is the budget of a process that has tripped.
type trippedBudget struct{}

func (trippedBudget) IsTripped() bool { return true }
