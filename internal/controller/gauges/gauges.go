// Package gauges refreshes the controller's gauges from its caches and its
// own state.
package gauges

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/controller/tenant"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/metrics"
)

// Gauges refreshes the controller's gauges every interval from its caches
// and its own state (no API request): the Finding records by check, phase
// and severity, the oldest open one, the blast-radius breaker and the
// tenants' health.
type Gauges struct {
	Cache    client.Reader
	Interval time.Duration
	// Namespace holds the breaker record (findingrecord.Breaker).
	Namespace string
	// Budget is this process's blast-radius budget; nil when it has none.
	Budget  interface{ IsTripped() bool }
	Tenants []Health
	Now     func() time.Time
}

// Start implements manager.Runnable.
func (g Gauges) Start(ctx context.Context) error {
	t := time.NewTicker(g.Interval)
	defer t.Stop()
	for {
		g.refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection: every replica reports what its cache holds.
func (g Gauges) NeedLeaderElection() bool { return false }

func (g Gauges) refresh(ctx context.Context) {
	g.tenantHealth()
	var list v1alpha1.FindingList
	if err := g.Cache.List(ctx, &list); err != nil {
		return
	}
	g.count(list.Items)
	g.breaker(ctx)
}

// findingLabels are the labels of tether_findings and
// tether_findings_oldest_timestamp_seconds.
type findingLabels struct{ check, phase, severity string }

// count sets tether_findings and tether_findings_oldest_timestamp_seconds
// from the records; the breaker and limits records are no findings (see
// breaker).
func (g Gauges) count(recs []v1alpha1.Finding) {
	n := map[findingLabels]int{}
	oldest := map[findingLabels]time.Time{}
	for i := range recs {
		f := &recs[i]
		if findingrecord.NoFinding(f) {
			continue
		}
		l := findingLabels{f.Spec.Check, string(f.Status.Phase), f.Status.Severity}
		n[l]++
		if first := f.Status.FirstObserved; first != nil && f.Status.Phase != v1alpha1.PhaseResolved {
			if o, ok := oldest[l]; !ok || first.Time.Before(o) {
				oldest[l] = first.Time
			}
		}
	}
	metrics.Findings.Reset()
	for l, v := range n {
		metrics.Findings.WithLabelValues(l.check, l.phase, l.severity).Set(float64(v))
	}
	metrics.FindingsOldest.Reset()
	for l, t := range oldest {
		metrics.FindingsOldest.WithLabelValues(l.check, l.phase, l.severity).Set(float64(t.Unix()))
	}
}

// breaker sets tether_blast_radius_tripped from the breaker record, which
// every process that records into the namespace honours, and from this
// process's own budget (tripped before its record was written): a standby
// replica and a restarted leader show a trip too.
func (g Gauges) breaker(ctx context.Context) {
	br, err := findingrecord.Breaker(ctx, g.Cache, g.Namespace)
	if err != nil {
		return
	}
	tripped := br.Tripped || (g.Budget != nil && g.Budget.IsTripped())
	v := 0.0
	if tripped {
		v = 1
	}
	metrics.BlastRadiusTripped.Set(v)
	if gs, err := findingrecord.Guard(ctx, g.Cache, g.Namespace); err == nil {
		v = 0
		if gs.Tripped {
			v = 1
		}
		metrics.AnomalyGuardTripped.Set(v)
	}
}

// Health is what the gauges read of a watched tenant.
type Health interface {
	Name() string
	// Up reports whether the tenant's evidence counts at now.
	Up(now time.Time) bool
	// Fenced counts its nodes carrying tether's out-of-service taint.
	Fenced() int
	// Unfencing counts its nodes in the steps of tether's un-fence:
	// cordoned with the taint still on, and cordoned after it went.
	Unfencing() (cordoned, settling int)
}

// tenantHealth sets tether_tenant_up of every tenant: 1 while its evidence
// counts (caches synced, no recent failure), as the checks read it; and
// tether_tenant_nodes_fenced, while it does (an unreachable tenant's count
// keeps its last value).
func (g Gauges) tenantHealth() {
	now := g.Now()
	for _, tw := range g.Tenants {
		v := 0.0
		if tw.Up(now) {
			v = 1
			metrics.TenantNodesFenced.WithLabelValues(tw.Name()).Set(float64(tw.Fenced()))
			cordoned, settling := tw.Unfencing()
			metrics.TenantNodesUnfencing.WithLabelValues(tw.Name(), metrics.UnfenceCordoned).Set(float64(cordoned))
			metrics.TenantNodesUnfencing.WithLabelValues(tw.Name(), metrics.UnfenceSettling).Set(float64(settling))
		}
		metrics.TenantUp.WithLabelValues(tw.Name()).Set(v)
	}
}

// HealthOf is the health of each watched tenant.
func HealthOf(tenants []*tenant.Watch) []Health {
	out := make([]Health, len(tenants))
	for i, tw := range tenants {
		out[i] = tw
	}
	return out
}
