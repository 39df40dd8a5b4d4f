package controller

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/metrics"
)

// findingGauge recounts the Finding records by check and phase from the
// cache (no API request) every interval, for the tether_findings metric.
type findingGauge struct {
	cache    client.Reader
	interval time.Duration
}

// Start implements manager.Runnable.
func (g findingGauge) Start(ctx context.Context) error {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		g.count(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection: every replica reports what its cache holds.
func (g findingGauge) NeedLeaderElection() bool { return false }

func (g findingGauge) count(ctx context.Context) {
	var list v1alpha1.FindingList
	if err := g.cache.List(ctx, &list); err != nil {
		return
	}
	metrics.Findings.Reset()
	for _, f := range list.Items {
		metrics.Findings.WithLabelValues(f.Spec.Check, string(f.Status.Phase)).Inc()
	}
}
