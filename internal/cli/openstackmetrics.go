package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/pflag"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/metrics/batch"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
	"github.com/tether-dev/tether/internal/plan"
	"github.com/tether-dev/tether/internal/runstate"
)

// osMetricsFlags choose where a run of `tether openstack audit|fix` leaves
// its Prometheus metrics: a textfile for node_exporter, a Pushgateway, or
// both.
type osMetricsFlags struct {
	textfile, push string
}

func (f *osMetricsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.textfile, "metrics-textfile", "", "write the run's metrics to this .prom file for node_exporter's textfile collector (replaced atomically)")
	fs.StringVar(&f.push, "metrics-push", "", "push the run's metrics to the Pushgateway at this URL (PUT /metrics/job/"+batch.Job+"/cloud/CLOUD/command/COMMAND)")
}

func (f *osMetricsFlags) validate() error {
	if f.textfile != "" {
		if err := batch.CheckTextfile(f.textfile); err != nil {
			return err
		}
	}
	if f.push != "" {
		u, err := url.Parse(f.push)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--metrics-push %q is not a Pushgateway URL: give http(s)://HOST:PORT, e.g. http://pushgateway:9091", f.push)
		}
	}
	return nil
}

// runRecord collects what a run did, for its metrics.
type runRecord struct {
	start    time.Time
	items    []plan.Item
	results  map[string]drift.Result
	snapshot *snapshot.Snapshot
	breaker  *runstate.Breaker
}

func newRunRecord() *runRecord {
	return &runRecord{start: time.Now(), results: map[string]drift.Result{}}
}

// emit writes the run's metrics where the flags say, and returns the run's
// error runErr; a failure to write them is an error of its own when the
// run had none (a cron job's metrics missing must show).
func (f *osMetricsFlags) emit(ctx context.Context, cloud, command string, rec *runRecord, runErr error) error {
	if f.textfile == "" && f.push == "" {
		return runErr
	}
	m := batch.New()
	for _, it := range rec.items {
		var res *drift.Result
		if r, ok := rec.results[it.Finding.ID]; ok {
			res = &r
		}
		m.Finding(it.Finding, res)
	}
	if s := rec.snapshot; s != nil {
		m.Objects("server", len(s.Servers))
		m.Objects("volume", len(s.Volumes))
		m.Objects("attachment", len(s.Attachments))
	}
	if rec.breaker != nil {
		if st, err := rec.breaker.State(ctx); err == nil {
			m.Tripped(st.Tripped)
		}
	}
	var refused *plan.GuardError
	m.Guard(errors.As(runErr, &refused))
	var short exitError
	m.End(rec.start, time.Now(), runErr == nil || (errors.As(runErr, &short) && short.code == ExitFindings && command == "audit"))
	var errs []error
	if f.textfile != "" {
		errs = append(errs, m.WriteTextfile(f.textfile, command))
	}
	if f.push != "" {
		errs = append(errs, m.Push(ctx, f.push, cloud, command, nil))
	}
	err := errors.Join(errs...)
	switch {
	case err == nil:
		return runErr
	case runErr == nil || errors.As(runErr, &short):
		// Missing metrics must show, whatever the run found.
		return err
	}
	return errors.Join(runErr, err)
}
