// Package metrics defines tether's Prometheus metrics (contract: names and
// labels are what operators alert on). They are registered with
// controller-runtime's registry, which the controller serves on
// --metrics-bind-address. This package only counts; it decides nothing.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The definitions the controller's metrics share with a one-shot run's
// (package batch): one name, help and label set wherever they mean the
// same.
var (
	FindingsOpts = prometheus.GaugeOpts{
		Name: "tether_findings",
		Help: "Finding records by check, phase and severity.",
	}
	FindingsLabels = []string{"check", "phase", "severity"}
	ActionsOpts    = prometheus.CounterOpts{
		Name: "tether_actions_total",
		Help: "Actions attempted, by check, action and result.",
	}
	ActionsLabels          = []string{"check", "action", "result"}
	BlastRadiusTrippedOpts = prometheus.GaugeOpts{
		Name: "tether_blast_radius_tripped",
		Help: "1 while the blast-radius breaker is tripped and acting is stopped, until an operator resets it.",
	}
	AnomalyGuardTrippedOpts = prometheus.GaugeOpts{
		Name: "tether_anomaly_guard_tripped",
		Help: "1 while the anomaly guard is tripped (a source emptied, or too many findings became safe at once) and acting is stopped, until an operator resets it.",
	}
)

var (
	// Findings is the number of Finding records by check, phase and
	// severity, recounted from the controller's cache every few seconds.
	Findings = prometheus.NewGaugeVec(FindingsOpts, FindingsLabels)

	// FindingsOldest is, for the records of each check, phase and severity
	// that are not Resolved, the first-observed time of the oldest one (Unix
	// seconds): `time() - tether_findings_oldest_timestamp_seconds` is how
	// long the oldest has been open.
	FindingsOldest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tether_findings_oldest_timestamp_seconds",
		Help: "First-observed time (Unix seconds) of the oldest open finding, by check, phase and severity.",
	}, []string{"check", "phase", "severity"})

	// Actions counts attempted actions by check, action type and outcome
	// (Applied, Pending, Refused, Migrating, Failed).
	Actions = prometheus.NewCounterVec(ActionsOpts, ActionsLabels)

	// Blocked counts transitions of findings into Blocked, by reason.
	Blocked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tether_blocked_total",
		Help: "Findings that became blocked, by reason.",
	}, []string{"check", "reason"})

	// BlastRadiusTripped is 1 while the blast-radius breaker is tripped:
	// this process hit the action limit, or the breaker record in the
	// controller's namespace shows a trip that no operator has reset.
	BlastRadiusTripped = prometheus.NewGauge(BlastRadiusTrippedOpts)

	// AnomalyGuardTripped is 1 while the anomaly guard is tripped: the
	// picture the controller acts from looked wrong, and acting is stopped
	// until an operator resets the guard record.
	AnomalyGuardTripped = prometheus.NewGauge(AnomalyGuardTrippedOpts)

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
	crmetrics.Registry.MustRegister(Findings, FindingsOldest, Actions, Blocked, BlastRadiusTripped, AnomalyGuardTripped, ReconcileSeconds, GraceToActionSeconds)
}
