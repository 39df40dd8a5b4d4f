// Package metrics defines tether's Prometheus metrics (contract: names and
// labels are what operators alert on). They are registered with
// controller-runtime's registry, which the controller serves on
// --metrics-bind-address. This package only counts; it decides nothing.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// Findings is the number of Finding objects by check and phase, set
	// after every reconcile from the controller's own bookkeeping.
	Findings = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tether_findings",
		Help: "Open findings by check and phase.",
	}, []string{"check", "phase"})

	// Actions counts attempted actions by check, action type and outcome
	// (Applied, Pending, Refused, Migrating, Failed).
	Actions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tether_actions_total",
		Help: "Actions attempted, by check, action and result.",
	}, []string{"check", "action", "result"})

	// Blocked counts transitions of findings into Blocked, by reason.
	Blocked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tether_blocked_total",
		Help: "Findings that became blocked, by reason.",
	}, []string{"check", "reason"})

	// BlastRadiusTripped is 1 once the action limit was hit and acting stopped.
	BlastRadiusTripped = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tether_blast_radius_tripped",
		Help: "1 when the controller stopped acting because the blast-radius limit was reached.",
	})

	// ReconcileSeconds is the latency of one reconcile.
	ReconcileSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tether_reconcile_duration_seconds",
		Help:    "Time spent in one reconcile of a subject.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30},
	})

	// GraceToActionSeconds is the delay between a finding's act-after time
	// and the start of its action.
	GraceToActionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tether_grace_to_action_seconds",
		Help:    "Delay from the end of a finding's grace period to the start of its action.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 60},
	})
)

func init() {
	crmetrics.Registry.MustRegister(Findings, Actions, Blocked, BlastRadiusTripped, ReconcileSeconds, GraceToActionSeconds)
}
