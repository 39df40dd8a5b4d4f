package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/runstate"
)

// osBreakerRecord is the switch record of `tether openstack fix` in the
// namespace --state-namespace names (contract: operators read it with
// kubectl get finding -n NS openstack-blast-radius). Its name differs from
// the controller's breaker, so both can live in one namespace.
var osBreakerRecord = findingrecord.Switch{
	Name: "openstack-blast-radius", Check: "OpenStackBlastRadius",
	Reason: findingrecord.BreakerTripped, What: "blast-radius breaker of tether openstack fix",
}

// osStateFlags say where `tether openstack fix` keeps its blast-radius
// window between runs: a state file or a namespace, or nowhere.
type osStateFlags struct {
	file, namespace         string
	kubeconfig, kubeContext string
	limits                  runstate.Limits
}

// register binds the flags; withLimits adds the limit's (fix; the reset
// needs only the place).
func (f *osStateFlags) register(fs *pflag.FlagSet, withLimits bool) {
	fs.StringVar(&f.file, "state-file", "", "keep the blast-radius window and breaker of the runs in this file (written atomically; locked while a run acts)")
	fs.StringVar(&f.namespace, "state-namespace", "", "keep them in the Finding record "+osBreakerRecord.Name+" of this Kubernetes namespace instead (needs tether's Finding CRD)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "with --state-namespace: the kubeconfig file (default: in-cluster, $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.kubeContext, "context", "", "with --state-namespace: the kubeconfig context")
	if withLimits {
		fs.IntVar(&f.limits.Max, "blast-radius-max-actions", runstate.DefaultMaxActions, "with a state: the breaker trips when the runs would act more often than this within --blast-radius-interval")
		fs.DurationVar(&f.limits.Interval, "blast-radius-interval", runstate.DefaultInterval, "with a state: the window --blast-radius-max-actions counts in")
	}
}

// validate checks the flags alone.
func (f *osStateFlags) validate(limits bool) error {
	switch {
	case f.file != "" && f.namespace != "":
		return fmt.Errorf("--state-file and --state-namespace exclude each other: keep the state in one place")
	case f.namespace == "" && (f.kubeconfig != "" || f.kubeContext != ""):
		return fmt.Errorf("--kubeconfig and --context are for --state-namespace: pass it, or drop them")
	case limits && f.limits.Max < 1:
		return fmt.Errorf("--blast-radius-max-actions must be 1 or more, got %d", f.limits.Max)
	case limits && f.limits.Interval <= 0:
		return fmt.Errorf("--blast-radius-interval must be positive, got %s", f.limits.Interval)
	}
	if f.namespace != "" {
		if errs := validation.IsDNS1123Label(f.namespace); len(errs) > 0 {
			return fmt.Errorf("--state-namespace %q is not a namespace name: %s", f.namespace, strings.Join(errs, "; "))
		}
	}
	if f.file != "" {
		return runstate.CheckPath(f.file)
	}
	return nil
}

// store is the place the flags name; nil for none.
func (f *osStateFlags) store() (runstate.Store, error) {
	switch {
	case f.file != "":
		return &runstate.FileStore{Path: f.file}, nil
	case f.namespace != "":
		rc, _, err := loadConfig(f.kubeconfig, f.kubeContext)
		if err != nil {
			return nil, err
		}
		c, err := clients.New(rc)
		if err != nil {
			return nil, err
		}
		return &runstate.RecordStore{Client: c, Namespace: f.namespace, Switch: osBreakerRecord}, nil
	}
	return nil, nil
}

// resetCommand is the command that resets the breaker in the place the
// flags name.
func (f *osStateFlags) resetCommand() string {
	cmd := "tether openstack reset-breaker"
	if f.file != "" {
		return cmd + " --state-file " + f.file
	}
	if f.kubeconfig != "" {
		cmd += " --kubeconfig " + f.kubeconfig
	}
	if f.kubeContext != "" {
		cmd += " --context " + f.kubeContext
	}
	return cmd + " --state-namespace " + f.namespace
}

// noStateNote is said once by a fix run without a state.
const noStateNote = "note: no --state-file or --state-namespace: only --max bounds this run, and nothing counts its repairs across runs (no blast-radius breaker); give one to a cron job"

// holder names this run in a lock.
func holder(command string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s on %s, pid %d", command, host, os.Getpid())
}

// newOpenStackResetBreaker is `tether openstack reset-breaker`: the
// operator's step that lets `tether openstack fix --apply` act again after
// the runs' blast-radius limit tripped.
func newOpenStackResetBreaker() *cobra.Command {
	o := &osResetOptions{}
	cmd := &cobra.Command{
		Use:   "reset-breaker",
		Short: "Let tether openstack fix act again after the runs' blast-radius limit tripped",
		Long: `With --state-file or --state-namespace, tether openstack fix --apply counts its repairs
across runs; when a run would repair more than --blast-radius-max-actions within
--blast-radius-interval, the breaker trips, and no run repairs anything until it is reset.
Investigate first (tether openstack audit; the runs' log lines with reason
TetherBlastRadiusExceeded), then reset: runs act again, and the repairs before the reset
no longer count. Name the same place the runs use.`,
		Args: cobra.NoArgs,
	}
	o.state.register(cmd.Flags(), false)
	return bind(cmd, o)
}

// osResetOptions are the flags of `tether openstack reset-breaker`.
type osResetOptions struct {
	state osStateFlags

	// Set by Complete.
	store  runstate.Store
	stdout io.Writer
}

// Validate needs one place.
func (o *osResetOptions) Validate() error {
	if o.state.file == "" && o.state.namespace == "" {
		return fmt.Errorf("name the runs' state: --state-file PATH or --state-namespace NS, as the fix runs were given")
	}
	return o.state.validate(false)
}

// Complete connects to the place.
func (o *osResetOptions) Complete(cmd *cobra.Command) (err error) {
	o.stdout = cmd.OutOrStdout()
	o.store, err = o.state.store()
	return err
}

// Run clears the trip, saying who did and when it had tripped.
func (o *osResetOptions) Run(ctx context.Context) error {
	by := "tether openstack reset-breaker"
	if u := os.Getenv("USER"); u != "" {
		by += " (user " + u + ")"
	}
	before, cleared, err := runstate.Reset(ctx, o.store, holder("tether openstack reset-breaker"), by, time.Now())
	if err != nil {
		return err
	}
	if !cleared {
		fmt.Fprintf(o.stdout, "the blast-radius breaker in the %s is not tripped: nothing to reset\n", o.store.Where())
		return nil
	}
	fmt.Fprintf(o.stdout, "the blast-radius breaker in the %s is reset (it tripped at %s: %s); tether openstack fix --apply acts again\n",
		o.store.Where(), before.TrippedAt.UTC().Format(time.RFC3339), before.Message)
	return nil
}
