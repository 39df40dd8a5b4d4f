package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
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
	c := fake.NewClientBuilder().WithScheme(clients.Scheme).WithObjects(
		gaugeRecord("a", "OrphanHotplugVolume", "warning", v1alpha1.PhaseBlocked, t0.Add(2*time.Hour)),
		gaugeRecord("b", "OrphanHotplugVolume", "warning", v1alpha1.PhaseBlocked, t0),
		gaugeRecord("c", "OrphanHotplugVolume", "info", v1alpha1.PhaseBlocked, t0.Add(time.Hour)),
		// Resolved: counted, but never the oldest open finding.
		gaugeRecord("d", "OrphanHotplugVolume", "warning", v1alpha1.PhaseResolved, t0.Add(-48*time.Hour)),
		breaker,
	).Build()
	metrics.Findings.WithLabelValues("Stale", "Acting", "warning").Set(7)       // must be cleared
	metrics.FindingsOldest.WithLabelValues("Stale", "Acting", "warning").Set(1) // must be cleared
	g := gauges{cache: c, namespace: "ns", now: func() time.Time { return t0 }}
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
	g.budget = trippedBudget{}
	metrics.BlastRadiusTripped.Set(0)
	g.refresh(context.Background())
	if got := testutil.ToFloat64(metrics.BlastRadiusTripped); got != 1 {
		t.Errorf("this process tripped: tether_blast_radius_tripped %v, want 1", got)
	}
}

// tether_tenant_up follows what the checks read of a tenant: down until
// its caches synced, up then, down again right after an API failure.
func TestGauges_tenantUp(t *testing.T) {
	fact := informers.NewSharedInformerFactory(k8sfake.NewClientset(), 0)
	tw := &tenantWatch{cfg: config.TenantConfig{Name: "guest-gauge"}, conn: &connState{tenant: "guest-gauge"},
		vas: fact.Storage().V1().VolumeAttachments().Informer(), pvs: fact.Core().V1().PersistentVolumes().Informer(),
		nodes: fact.Core().V1().Nodes().Informer(), csiNodes: fact.Storage().V1().CSINodes().Informer(),
		drivers: fact.Storage().V1().CSIDrivers().Informer()}
	now := time.Now()
	g := gauges{cache: fake.NewClientBuilder().WithScheme(clients.Scheme).Build(), tenants: []*tenantWatch{tw}, now: func() time.Time { return now }}
	up := func() float64 { return testutil.ToFloat64(metrics.TenantUp.WithLabelValues("guest-gauge")) }

	g.refresh(context.Background())
	if up() != 0 {
		t.Error("up before the tenant's caches synced")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fact.Start(ctx.Done())
	fact.WaitForCacheSync(ctx.Done())
	g.refresh(context.Background())
	if up() != 1 {
		t.Error("down although the caches synced and nothing failed")
	}
	errorsBefore := testutil.ToFloat64(metrics.TenantErrors.WithLabelValues("guest-gauge"))
	tw.conn.failed(now, errors.New("connection refused"))
	g.refresh(context.Background())
	if up() != 0 {
		t.Error("up right after a failed request")
	}
	if got := testutil.ToFloat64(metrics.TenantErrors.WithLabelValues("guest-gauge")); got != errorsBefore+1 {
		t.Errorf("tether_tenant_errors_total: got %v, want %v", got, errorsBefore+1)
	}
}

// trippedBudget is the budget of a process that has tripped.
type trippedBudget struct{}

func (trippedBudget) IsTripped() bool { return true }
