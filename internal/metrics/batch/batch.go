// Package batch is the Prometheus output of one one-shot run (a cron job of
// `tether openstack audit` or `fix`): the run's figures in a registry of
// their own, under the controller's metric names and labels where they mean
// the same (package metrics), written for node_exporter's textfile
// collector or pushed to a Pushgateway. It only counts and writes; it
// decides nothing.
package batch

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/metrics"
)

// Job is the Pushgateway job of tether's one-shot runs.
const Job = "tether-openstack"

// Run holds one run's metrics.
type Run struct {
	reg      *prometheus.Registry
	findings *prometheus.GaugeVec
	blocked  *prometheus.GaugeVec
	actions  *prometheus.CounterVec
	tripped  prometheus.Gauge
	guard    prometheus.Gauge
	objects  *prometheus.GaugeVec
	last     prometheus.Gauge
	duration prometheus.Gauge
	success  prometheus.Gauge
}

// New is an empty run's metrics.
func New() *Run {
	r := &Run{
		reg:      prometheus.NewRegistry(),
		findings: prometheus.NewGaugeVec(metrics.FindingsOpts, metrics.FindingsLabels),
		blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tether_run_findings_blocked",
			Help: "Findings of the last run that no action may fix (yet), by check and the reason that holds them.",
		}, []string{"check", "reason"}),
		actions:  prometheus.NewCounterVec(metrics.ActionsOpts, metrics.ActionsLabels),
		tripped:  prometheus.NewGauge(metrics.BlastRadiusTrippedOpts),
		guard:    prometheus.NewGauge(metrics.AnomalyGuardTrippedOpts),
		objects:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tether_run_objects_read", Help: "Objects the last run read, by kind."}, []string{"kind"}),
		last:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "tether_run_last_timestamp_seconds", Help: "When the last run ended (Unix seconds)."}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tether_run_duration_seconds", Help: "How long the last run took."}),
		success:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "tether_run_success", Help: "1 if the last run read everything and did all it was asked, 0 if it failed or fell short."}),
	}
	r.reg.MustRegister(r.findings, r.blocked, r.actions, r.tripped, r.guard, r.objects, r.last, r.duration, r.success)
	return r
}

// Phase is the Finding record phase a one-shot run's finding stands for,
// as the controller would show it: held until seen twice is Waiting, held
// otherwise Blocked, repaired Resolved, a repair that failed Failed, one
// accepted but not yet shown Acting, the rest Observed.
func Phase(f drift.Finding, r *drift.Result) v1alpha1.Phase {
	if r != nil {
		switch r.Outcome {
		case drift.Applied:
			return v1alpha1.PhaseResolved
		case drift.Pending:
			return v1alpha1.PhaseActing
		case drift.Failed:
			return v1alpha1.PhaseFailed
		}
		return v1alpha1.PhaseBlocked
	}
	switch f.Action.BlockedBy {
	case "":
		return v1alpha1.PhaseObserved
	case drift.NotSeenTwice:
		return v1alpha1.PhaseWaiting
	}
	return v1alpha1.PhaseBlocked
}

// Finding counts one finding of the run and, when it was acted on, its
// result.
func (r *Run) Finding(f drift.Finding, res *drift.Result) {
	r.findings.WithLabelValues(f.Check, string(Phase(f, res)), string(f.Severity)).Inc()
	if f.Action.BlockedBy != "" {
		r.blocked.WithLabelValues(f.Check, string(f.Action.BlockedBy)).Inc()
	}
	if res != nil {
		r.actions.WithLabelValues(f.Check, string(f.Action.Type), string(res.Outcome)).Inc()
	}
}

// Objects records how many objects of kind the run read.
func (r *Run) Objects(kind string, n int) { r.objects.WithLabelValues(kind).Set(float64(n)) }

// Tripped records whether the blast-radius breaker is tripped after the
// run, and Guard whether the anomaly guard refused its batch.
func (r *Run) Tripped(on bool) { r.tripped.Set(b(on)) }
func (r *Run) Guard(on bool)   { r.guard.Set(b(on)) }

// End records the run's end, its duration and whether it succeeded.
func (r *Run) End(start, end time.Time, ok bool) {
	r.last.Set(float64(end.Unix()))
	r.duration.Set(end.Sub(start).Seconds())
	r.success.Set(b(ok))
}

func b(on bool) float64 {
	if on {
		return 1
	}
	return 0
}

// CheckTextfile says whether path can be a textfile of node_exporter's
// collector: a .prom file in an existing directory.
func CheckTextfile(path string) error {
	if !strings.HasSuffix(path, ".prom") {
		return fmt.Errorf("--metrics-textfile %s: node_exporter's textfile collector reads only files ending in .prom: name it e.g. %s.prom", path, strings.TrimSuffix(path, filepath.Ext(path)))
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return fmt.Errorf("--metrics-textfile %s: its directory %s does not exist: create it (node_exporter's --collector.textfile.directory)", path, filepath.Dir(path))
	}
	return nil
}

// WriteTextfile writes the run's metrics to path in the text format, each
// with the label command (so the files of several commands do not clash in
// the collector): to a hidden temporary file beside it (the collector reads
// only *.prom), then renamed over it, so the collector never reads half a
// file.
func (r *Run) WriteTextfile(path, command string) error {
	mfs, err := r.reg.Gather()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("--metrics-textfile: %v", err)
	}
	defer os.Remove(tmp.Name())
	enc := expfmt.NewEncoder(tmp, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		mf = proto.Clone(mf).(*dto.MetricFamily)
		for _, m := range mf.Metric {
			m.Label = append(m.Label, &dto.LabelPair{Name: proto.String("command"), Value: proto.String(command)})
		}
		if err = enc.Encode(mf); err != nil {
			break
		}
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644) // the collector runs as another user
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("--metrics-textfile %s: %v", path, err)
	}
	return nil
}

// Push replaces the metrics of the group job/Job, cloud, command on the
// Pushgateway at url (PUT: the group holds this run's metrics only).
func (r *Run) Push(ctx context.Context, url, cloud, command string, client *http.Client) error {
	p := push.New(url, Job).Grouping("cloud", cloud).Grouping("command", command).Gatherer(r.reg)
	if client != nil {
		p = p.Client(client)
	}
	if err := p.PushContext(ctx); err != nil {
		return fmt.Errorf("--metrics-push %s: %v", url, err)
	}
	return nil
}
