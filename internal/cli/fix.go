package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/plan"
)

// DefaultFixMaxActions bounds one `tether fix --apply` run unless --max says otherwise.
const DefaultFixMaxActions = 10

// fixFlags are the flags every fix command shares (tether fix, tether
// openstack fix): they bind to the driver's plan.Options.
type fixFlags struct {
	only       string // --check
	apply      bool
	maxActions int
	planFile   string // --plan
	object     string
	// command is the fix command's path ("tether fix").
	command string
	// reviewed holds the --plan file's planned findings by id (validate).
	reviewed map[string]drift.Finding
	// The anomaly guard.
	overrideGuard bool
	guardMax      int
	guardShare    float64
}

// register binds the flags of the fix command called command ("tether
// fix"); scope names the object's scope (NAMESPACE or PROJECT) and noun
// what is applied ("actions", "repairs").
func (f *fixFlags) register(cmd *cobra.Command, command, scope, noun string) {
	f.command = command
	fs := cmd.Flags()
	if fs.Lookup("check") == nil {
		fs.StringVar(&f.only, "check", "", "fix the findings of this check only")
	}
	fs.BoolVar(&f.apply, "apply", false, "carry out the plan (default: print it and change nothing)")
	fs.IntVar(&f.maxActions, "max", DefaultFixMaxActions, "at most this many "+noun+" in this run (0: none)")
	fs.StringVar(&f.object, "object", "", "only findings about this object, "+scope+"/NAME or a NAME one "+strings.ToLower(scope)+" has; an object the run did not read is an error")
	fs.StringVar(&f.planFile, "plan", "", "with --apply: act only on this reviewed plan (written by `"+command+" -o json`)")
	fs.BoolVar(&f.overrideGuard, "override-guard", false, "apply although the anomaly guard refuses the batch (a partial read, a source listing none of a kind, too many safe findings at once); logged")
	fs.IntVar(&f.guardMax, "guard-max-safe", plan.DefaultGuardMaxSafe, "the anomaly guard refuses a batch with more safe findings than this, or than --guard-share of the subjects read, whichever is larger")
	fs.Float64Var(&f.guardShare, "guard-share", plan.DefaultGuardShare, "see --guard-max-safe: the share of the subjects read (0.10 = 10%)")
}

// validate checks the flags alone and reads the --plan file; lookup names
// an unknown check, checks are the platform's check names.
func (f *fixFlags) validate(lookup func(string) error, checks []string) error {
	if f.only != "" {
		if err := lookup(f.only); err != nil {
			return fmt.Errorf("--check: %v", err)
		}
	}
	if f.maxActions < 0 {
		return fmt.Errorf("--max must be 0 or more, got %d", f.maxActions)
	}
	if f.guardMax < 0 {
		return fmt.Errorf("--guard-max-safe must not be negative, got %d (0 is the default; to act regardless, use --override-guard)", f.guardMax)
	}
	if f.guardShare < 0 || f.guardShare > 1 {
		return fmt.Errorf("--guard-share must be between 0 (the default) and 1, got %g", f.guardShare)
	}
	if f.planFile != "" && !f.apply {
		return fmt.Errorf("--plan %s: a reviewed plan is applied with --apply; without --apply, fix only prints a plan", f.planFile)
	}
	if f.planFile != "" {
		reviewed, err := plan.ReadPlan(f.planFile, f.command, checks)
		if err != nil {
			return err
		}
		f.reviewed = reviewed
	}
	return nil
}

// options are the driver's options of these flags.
func (f *fixFlags) options(notes io.Writer) plan.Options {
	return plan.Options{Check: f.only, Object: f.object, Max: f.maxActions, Apply: f.apply, Reviewed: f.reviewed, Notes: notes, Command: f.command,
		Guard: plan.Guard{MaxSafe: f.guardMax, Share: f.guardShare, Override: f.overrideGuard, Flag: "--override-guard"}}
}

// runFix drives fx with o and prints the report; scope heads the column
// of the findings' scope (NAMESPACE or PROJECT).
func runFix(ctx context.Context, fx plan.Fixer, o plan.Options, out io.Writer, format, scope string) error {
	rep, err := plan.Run(ctx, fx, o)
	var refused *plan.GuardError
	if errors.As(err, &refused) {
		// Show what was refused: the plan as it would have run.
		if perr := printPlan(out, format, scope, rep.Items, false); perr != nil {
			return perr
		}
	}
	if err != nil {
		return err
	}
	if err := printPlan(out, format, scope, rep.Items, rep.Applied); err != nil {
		return err
	}
	if rep.Incomplete() {
		return exitError{ExitFindings}
	}
	return nil
}

// newFix is `tether fix`: the command binds the flags to a fixOptions and
// runs it.
func newFix() *cobra.Command {
	o := &fixOptions{}
	cmd := &cobra.Command{
		Use:   "fix",
		Short: "Plan (default) or apply the fixes that are provably safe",
		Long: `Without --apply, prints the plan and changes nothing. With --apply, carries out
at most --max safe actions, each only after a live re-read, a re-run of the check on
the fresh objects and a server-side dry run; every action is recorded as an Event.
With --plan FILE (a plan saved with -o json), acts only on the reviewed plan's findings
that still match the cluster, and reports every other one as changed-since-plan.
Exit code: 0 plan printed or all actions applied, 1 some action did not apply, 2 error.`,
		Args: cobra.NoArgs,
	}
	o.scope.register(cmd.Flags())
	o.fix.register(cmd, "tether fix", "NAMESPACE", "actions")
	cmd.Flags().BoolVar(&o.deletePods, "delete-attachment-pods", false, "also delete orphaned attachment pods (OrphanAttachmentPod)")
	cmd.Flags().BoolVar(&o.deleteMigrationSourcePods, "delete-migration-source-pods", false, "also delete MigrationSourcePodLeftover's finished source launcher pods of completed migrations whose VMIs run on the target")
	cmd.Flags().BoolVar(&o.persistHotplugs, "persist-hotplugs", false, "put UnpersistedHotplug's hot-plugs into their VMs' specs as the VMIs have them, so that KubeVirt's declarative hot-plug sync keeps them")
	cmd.Flags().BoolVar(&o.ignoreBreaker, "ignore-breaker", false, "act although the controller's blast-radius breaker (in --controller-namespace) is tripped")
	cmd.Flags().StringVar(&o.from, "from", "", "refused: fix never acts on a support bundle (read it with `tether audit --from`, then run fix on the live cluster)")
	return bind(cmd, o)
}

// fixOptions are the flags of `tether fix` and, once completed, what it
// runs with.
type fixOptions struct {
	scope      scopeFlags
	fix        fixFlags
	deletePods bool
	// persistHotplugs: act on UnpersistedHotplug (PersistHotplug).
	persistHotplugs bool
	// deleteMigrationSourcePods: act on MigrationSourcePodLeftover.
	deleteMigrationSourcePods bool
	// ignoreBreaker: act although the controller's breaker is tripped.
	ignoreBreaker bool
	// from is --from, which fix refuses.
	from string

	// Set by Complete.
	fixer          *kubevirt.Fixer
	breaker        *controllerBreaker
	output         string
	stdout, stderr io.Writer
}

// Validate checks the flags of fix itself; the scope flags are checked
// when Complete resolves them.
func (o *fixOptions) Validate() error {
	if o.from != "" {
		return refuseFixFrom(o.from)
	}
	lookup := func(name string) error { _, err := check.Lookup(name); return err }
	return o.fix.validate(lookup, check.Names())
}

// Complete resolves the scope flags (--check narrows --checks to one
// check) and the kubeconfig into the options the run uses.
func (o *fixOptions) Complete(cmd *cobra.Command) error {
	if o.fix.only != "" {
		o.scope.checks = []string{o.fix.only}
	}
	r, err := o.scope.resolve()
	if err != nil {
		return err
	}
	r.policy.DeleteAttachmentPods = o.deletePods
	r.policy.PersistHotplugs = o.persistHotplugs
	r.policy.DeleteMigrationSourcePods = o.deleteMigrationSourcePods
	o.stdout, o.stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
	o.fixer = r.fixer(o.stderr)
	o.breaker = &controllerBreaker{config: r.config, namespace: o.scope.controllerNamespace, ignore: o.ignoreBreaker, stderr: o.stderr}
	o.output = r.output
	return nil
}

// Run drives KubeVirt through the plan/apply driver and prints the plan;
// with --apply it first carries out the planned actions, and returns
// ExitFindings when one did not apply.
func (o *fixOptions) Run(ctx context.Context) error {
	opts := o.fix.options(o.stderr)
	opts.Breaker = o.breaker
	return runFix(ctx, o.fixer, opts, o.stdout, o.output, "NAMESPACE")
}
