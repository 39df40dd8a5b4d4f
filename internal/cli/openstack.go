package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack"
	oscheck "github.com/tether-dev/tether/internal/openstack/check"
	"github.com/tether-dev/tether/internal/openstack/observe"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
	"github.com/tether-dev/tether/internal/plan"
	"github.com/tether-dev/tether/internal/runstate"
)

// newOpenStack is `tether openstack`: audit and fix of the two records
// OpenStack keeps of one volume attachment, Nova's block device mappings
// and Cinder's attachments.
func newOpenStack() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "openstack",
		Short: "Audit and fix volume attachments where Nova and Cinder disagree, and check what the repairs depend on",
		Long: `Reads Nova's servers and the volumes they list, and Cinder's volumes and
attachments (all projects; admin), and reports where the two records of one
attachment disagree: DanglingNovaAttachment, StaleCinderAttachment and
LeftoverCinderAttachment.
The cloud comes from clouds.yaml, as for the openstack CLI (--os-cloud, OS_CLOUD).
See docs/openstack.md.`,
	}
	cmd.AddCommand(newOpenStackAudit(), newOpenStackFix(), newOpenStackDoctor(), newOpenStackResetBreaker())
	return cmd
}

// osFlags are the flags audit and fix share.
type osFlags struct {
	logs        osLogFlags
	metrics     osMetricsFlags
	cloud       string
	allProjects bool
	project     string
	output      string
	only        string
	grace       time.Duration
	pageSize    int
}

func (f *osFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cloud, "os-cloud", os.Getenv("OS_CLOUD"), "the cloud in clouds.yaml (default $OS_CLOUD)")
	fs.BoolVar(&f.allProjects, "all-projects", true, "read every project (needs the admin role)")
	fs.StringVar(&f.project, "project", "", "read this project (ID) only")
	fs.StringVarP(&f.output, "output", "o", "table", "output format: table, json or yaml")
	fs.StringVar(&f.only, "check", "", "run this check only ("+strings.Join(oscheck.Names(), ", ")+")")
	fs.DurationVar(&f.grace, "grace", oscheck.DefaultGrace, "a volume in a transitional status is left alone until this old, and a finding is acted on only when seen twice this far apart")
	fs.IntVar(&f.pageSize, "page-size", 0, "items per list request (0: the services' limit)")
	f.logs.register(fs)
	f.metrics.register(fs)
}

// validate checks the flags alone.
func (f *osFlags) validate() error {
	switch f.output {
	case "table", "json", "yaml":
	default:
		return fmt.Errorf("--output %q is not supported here: use table, json or yaml", f.output)
	}
	if f.only != "" {
		if _, err := oscheck.Lookup(f.only); err != nil {
			return fmt.Errorf("--check: %v", err)
		}
	}
	if f.grace <= 0 {
		return fmt.Errorf("--grace must be positive, got %s", f.grace)
	}
	if f.pageSize < 0 {
		return fmt.Errorf("--page-size must be 0 or more, got %d", f.pageSize)
	}
	if !f.allProjects && f.project == "" {
		return fmt.Errorf("--all-projects=false needs --project ID, the project to read")
	}
	if err := f.logs.validate(); err != nil {
		return err
	}
	if err := f.metrics.validate(); err != nil {
		return err
	}
	if f.cloud == "" {
		return fmt.Errorf("no cloud named: pass --os-cloud NAME or set OS_CLOUD, naming a cloud of your clouds.yaml")
	}
	return nil
}

func (f *osFlags) policy() oscheck.Policy {
	p := oscheck.Policy{Grace: f.grace}
	if f.only != "" {
		p.Checks = []string{f.only}
	}
	return p
}

// connect connects to the cloud and returns OpenStack as the driver drives
// it, with these flags.
func (f *osFlags) connect(ctx context.Context) (*openstack.Fixer, error) {
	c, err := observe.Connect(ctx, observe.ConnectOptions{Cloud: f.cloud})
	if err != nil {
		return nil, err
	}
	return &openstack.Fixer{Clients: c, Policy: f.policy(), Observe: observe.Options{Project: f.project, PageSize: f.pageSize}}, nil
}

// newOpenStackAudit is `tether openstack audit`: observe once, report,
// change nothing.
func newOpenStackAudit() *cobra.Command {
	o := &osAuditOptions{}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Report where Nova and Cinder disagree, with evidence; changes nothing",
		Long: `Reads Nova and Cinder once and reports every finding with the facts behind it
(each checkable with the openstack CLI) and the action that would fix it, or why
none is safe. One observation never makes an action safe: findings are marked
NotSeenTwice until tether openstack fix sees them again --grace later.
--object narrows the audit to one server, volume or attachment (ID or name). Every
finding is one log line on stderr (--log-format); --metrics-textfile and --metrics-push
leave the run's metrics for node_exporter or a Pushgateway.
Exit code: 0 no findings, 1 findings, 2 error.`,
		Args: cobra.NoArgs,
	}
	o.register(cmd.Flags())
	cmd.Flags().StringVar(&o.object, "object", "", objectHelp)
	return bind(cmd, o)
}

// objectHelp is the help of --object on audit and fix.
const objectHelp = "only findings about this server, volume or Cinder attachment: its ID or name, or PROJECT/NAME (a name several share is refused: pass the ID)"

// osAuditOptions are the flags of `tether openstack audit` and, once
// completed, what it runs with.
type osAuditOptions struct {
	osFlags
	object string

	// Set by Complete.
	fixer  *openstack.Fixer
	stdout io.Writer
	log    *slog.Logger
}

func (o *osAuditOptions) Validate() error { return o.validate() }

// Complete connects to the cloud.
func (o *osAuditOptions) Complete(cmd *cobra.Command) error {
	x, err := o.connect(cmd.Context())
	o.fixer, o.stdout, o.log = x, cmd.OutOrStdout(), o.logs.logger(cmd.ErrOrStderr())
	return err
}

// Run audits, then leaves the run's metrics where the flags say.
func (o *osAuditOptions) Run(ctx context.Context) error {
	rec := newRunRecord()
	err := o.run(ctx, rec)
	rec.snapshot = o.fixer.Last
	return o.metrics.emit(ctx, o.cloud, "audit", rec, err)
}

// run surveys once (the first-sighting stage, with no earlier sighting,
// holds every finding NotSeenTwice), logs and prints the findings, and
// records them in rec.
func (o *osAuditOptions) run(ctx context.Context, rec *runRecord) error {
	s, err := o.fixer.Survey(ctx)
	if err != nil {
		return err
	}
	fs := plan.Once(o.fixer, s, "tether openstack fix")
	if o.object != "" {
		about, err := o.fixer.About(o.object)
		if err != nil {
			return err
		}
		fs = slices.DeleteFunc(fs, func(f drift.Finding) bool { return !about(f) })
	}
	for _, f := range fs {
		logObserved(o.log, f)
		rec.items = append(rec.items, plan.Item{Finding: f})
	}
	if err := printOpenStackAudit(o.stdout, o.output, o.fixer.Last, fs); err != nil {
		return err
	}
	if len(fs) > 0 {
		return exitError{ExitFindings}
	}
	return nil
}

// printOpenStackAudit writes the findings as `tether audit` does: an
// AuditReport for json and yaml; a table, then each finding's evidence and
// remedy.
func printOpenStackAudit(w io.Writer, format string, s *snapshot.Snapshot, fs []drift.Finding) error {
	if fs == nil {
		fs = []drift.Finding{}
	}
	switch format {
	case "json":
		return streamAuditJSON(w, AuditReport{APIVersion: APIVersion, Kind: "AuditReport", Findings: fs})
	case "yaml":
		return encode(w, format, AuditReport{APIVersion: APIVersion, Kind: "AuditReport", Findings: fs})
	}
	if len(fs) == 0 {
		_, err := fmt.Fprintf(w, "No findings (%d servers, %d volumes, %d Cinder attachments checked).\n", len(s.Servers), len(s.Volumes), len(s.Attachments))
		return err
	}
	return writeFindingTable(w, "PROJECT", fs)
}

// osFixOptions are the flags of `tether openstack fix`.
type osFixOptions struct {
	osFlags
	fix   fixFlags
	state osStateFlags
	// wait sleeps between the two observations; tests shorten nothing
	// else.
	wait func(context.Context, time.Duration) error

	// Set by Complete.
	fixer          *openstack.Fixer
	store          runstate.Store
	stdout, stderr io.Writer
	log            *slog.Logger
}

// newOpenStackFix is `tether openstack fix`: observe twice --grace apart,
// plan, and with --apply repair.
func newOpenStackFix() *cobra.Command {
	o := &osFixOptions{wait: plan.Sleep}
	cmd := &cobra.Command{
		Use:   "fix",
		Short: "Plan (default) or apply the repairs that are provably safe",
		Long: `Reads Nova and Cinder twice, --grace apart: only findings seen both times can be
safe. Without --apply, prints the plan and changes nothing. With --apply, carries
out at most --max safe repairs, each only after a live re-read of the server, the
volume and its attachments and a re-run of the check on them.
With --plan FILE (a plan saved with -o json), reads once, acts only on the reviewed
plan's findings that still match, and reports every other one as changed-since-plan.
--object narrows the run to one server, volume or attachment (ID or name).
For cron runs: --state-file or --state-namespace counts the repairs of all runs in a
blast-radius window (--blast-radius-max-actions per --blast-radius-interval); beyond it
the breaker trips and no run repairs until tether openstack reset-breaker. Every finding
and repair is one log line on stderr (--log-format); --metrics-textfile and
--metrics-push leave the run's metrics for node_exporter or a Pushgateway.
RecreateAttachmentAndDetach and ForceDetachVolume cut the compute host's
connection to the volume: they are safe only on a stopped server (SHUTOFF, or
SHELVED_OFFLOADED) and held ServerRunning otherwise; stop the server and run
fix again.
Exit code: 0 plan printed or all repairs applied, 1 some repair did not apply, 2 error.`,
		Args: cobra.NoArgs,
	}
	o.register(cmd.Flags())
	o.fix.register(cmd, "tether openstack fix", "PROJECT", "repairs")
	cmd.Flags().Lookup("object").Usage = objectHelp
	o.state.register(cmd.Flags(), true)
	return bind(cmd, o)
}

// Validate checks the flags and reads the --plan file.
func (o *osFixOptions) Validate() error {
	if err := o.validate(); err != nil {
		return err
	}
	o.fix.only = o.only // --check is the shared flag of osFlags
	if err := o.state.validate(true); err != nil {
		return err
	}
	lookup := func(name string) error { _, err := oscheck.Lookup(name); return err }
	return o.fix.validate(lookup, oscheck.Names())
}

// Complete connects to the cloud and to the runs' state.
func (o *osFixOptions) Complete(cmd *cobra.Command) error {
	x, err := o.connect(cmd.Context())
	o.fixer, o.stdout, o.stderr = x, cmd.OutOrStdout(), cmd.ErrOrStderr()
	o.log = o.logs.logger(o.stderr)
	if err != nil {
		return err
	}
	o.store, err = o.state.store()
	return err
}

// Run drives OpenStack through the plan/apply driver. With a state, an
// applying run holds its lock from before the first survey to its end, and
// the breaker counts its repairs in the window of the runs.
func (o *osFixOptions) Run(ctx context.Context) error {
	rec := newRunRecord()
	err := o.logRefusal(o.run(ctx, rec))
	rec.snapshot = o.fixer.Last
	return o.metrics.emit(ctx, o.cloud, "fix", rec, err)
}

// run is Run before the metrics: it records the plan and the results in
// rec.
func (o *osFixOptions) run(ctx context.Context, rec *runRecord) error {
	opts := o.fix.options(o.stderr)
	opts.Wait = o.wait
	opts.Planned = func(items []plan.Item) {
		rec.items = items
		for _, it := range items {
			logObserved(o.log, it.Finding)
		}
	}
	fx := loggedFixer{Fixer: o.fixer, log: o.log, results: rec.results}
	if o.store == nil {
		fmt.Fprintln(o.stderr, noStateNote)
		return runFix(ctx, fx, opts, o.stdout, o.output, "PROJECT")
	}
	if o.fix.apply {
		// A run waits --grace between its two surveys: the lock of a run
		// that died runs out well after a live run would have ended.
		ttl := 2*o.grace + 15*time.Minute
		if err := o.store.Lock(ctx, holder("tether openstack fix --apply"), time.Now(), ttl); err != nil {
			return err
		}
		defer o.store.Unlock(context.WithoutCancel(ctx))
	}
	reset := o.state.resetCommand()
	rec.breaker = &runstate.Breaker{Store: o.store, Limits: o.state.limits, ResetCommand: reset, Tripped: func(s runstate.State) {
		o.log.Error("blast-radius breaker tripped", "reason", openstack.ReasonBlastRadiusExceeded, "state", o.store.Where(), "message", s.Message, "reset", reset)
	}}
	opts.Breaker = rec.breaker
	return runFix(ctx, fx, opts, o.stdout, o.output, "PROJECT")
}

// logRefusal logs the refusal of a whole run, by the anomaly guard or the
// tripped breaker, and returns err.
func (o *osFixOptions) logRefusal(err error) error {
	var refused *plan.GuardError
	var tripped *runstate.Tripped
	switch {
	case errors.As(err, &refused):
		o.log.Error("run refused", "reason", openstack.ReasonAnomalyGuard, "message", strings.Join(refused.Reasons, "; "), "override", refused.Flag)
	case errors.As(err, &tripped):
		o.log.Error("run refused", "reason", openstack.ReasonBlastRadiusExceeded, "state", o.store.Where(), "message", tripped.Message, "reset", tripped.Reset)
	}
	return err
}
