package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// DefaultFixMaxActions bounds one `tether fix --apply` run unless --max says otherwise.
const DefaultFixMaxActions = 10

// planItem is one finding with what fix did or would do about it.
type planItem struct {
	Finding drift.Finding `json:"finding"`
	// Planned: the action would be taken (dry run) or was attempted.
	Planned bool          `json:"planned"`
	Result  *drift.Result `json:"result,omitempty"`
	// Skipped says why a safe action was left out (e.g. --max reached).
	Skipped string `json:"skipped,omitempty"`
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
		RunE: func(cmd *cobra.Command, _ []string) error { return runOptions(cmd, o) },
	}
	o.scope.register(cmd.Flags())
	cmd.Flags().StringVar(&o.only, "check", "", "fix the findings of this check only")
	cmd.Flags().BoolVar(&o.apply, "apply", false, "carry out the plan (default: print it and change nothing)")
	cmd.Flags().IntVar(&o.maxActions, "max", DefaultFixMaxActions, "at most this many actions in this run (0: none)")
	cmd.Flags().BoolVar(&o.deletePods, "delete-attachment-pods", false, "also delete orphaned attachment pods (OrphanAttachmentPod)")
	cmd.Flags().StringVar(&o.object, "object", "", "only findings about this object, NAMESPACE/NAME")
	cmd.Flags().BoolVar(&o.ignoreBreaker, "ignore-breaker", false, "act although the controller's blast-radius breaker (in --controller-namespace) is tripped")
	cmd.Flags().StringVar(&o.planFile, "plan", "", "with --apply: act only on this reviewed plan (written by `tether fix -o json`)")
	return cmd
}

// fixOptions are the flags of `tether fix` and, once completed, what it
// runs with.
type fixOptions struct {
	scope      scopeFlags
	only       string // --check
	apply      bool
	maxActions int
	deletePods bool
	planFile   string // --plan
	object     string
	// ignoreBreaker: act although the controller's breaker is tripped.
	ignoreBreaker bool
	// warnedCount: the failure to record an action was reported once.
	warnedCount bool

	// reviewed holds the --plan file's planned findings by id (Validate).
	reviewed map[string]drift.Finding
	// Set by Complete.
	resolved       *options
	stdout, stderr io.Writer
}

// Validate checks the flags of fix itself; the scope flags are checked
// when Complete resolves them.
func (o *fixOptions) Validate() error {
	if o.only != "" {
		if _, err := check.Lookup(o.only); err != nil {
			return fmt.Errorf("--check: %v", err)
		}
	}
	if o.maxActions < 0 {
		return fmt.Errorf("--max must be 0 or more, got %d", o.maxActions)
	}
	if o.planFile != "" && !o.apply {
		return fmt.Errorf("--plan %s: a reviewed plan is applied with --apply; without --apply, fix only prints a plan", o.planFile)
	}
	if o.planFile != "" {
		reviewed, err := readPlan(o.planFile)
		if err != nil {
			return err
		}
		o.reviewed = reviewed
	}
	return nil
}

// Complete resolves the scope flags (--check narrows --checks to one
// check) and the kubeconfig into the options the run uses.
func (o *fixOptions) Complete(cmd *cobra.Command) error {
	if o.only != "" {
		o.scope.checks = []string{o.only}
	}
	r, err := o.scope.resolve()
	if err != nil {
		return err
	}
	r.policy.DeleteAttachmentPods = o.deletePods
	o.resolved, o.stdout, o.stderr = r, cmd.OutOrStdout(), cmd.ErrOrStderr()
	return nil
}

// Run reads the cluster and prints the plan; with --apply it first carries
// out the planned actions, and returns ExitFindings when one did not apply.
func (o *fixOptions) Run(ctx context.Context) error {
	snap, findings, err := scan(ctx, o.resolved, o.stderr)
	if err != nil {
		return err
	}
	findings = filterObject(findings, o.object)
	if !o.apply {
		return printPlan(o.stdout, o.resolved.output, "NAMESPACE", plan(findings, o.maxActions), false)
	}
	items, changed := plan(findings, o.maxActions), 0
	if o.reviewed != nil {
		items, changed = planReviewed(findings, o.reviewed, o.maxActions)
	} else {
		fmt.Fprintln(o.stderr, "note: --apply without --plan acts on a plan made now from live state; to apply exactly a reviewed plan, save it with `tether fix -o json > plan.json` and pass --plan plan.json")
	}
	if err := o.breakerAllows(ctx); err != nil {
		return err
	}
	failed, err := o.applyPlan(ctx, snap, items)
	if err != nil {
		return err
	}
	if err := printPlan(o.stdout, o.resolved.output, "NAMESPACE", items, true); err != nil {
		return err
	}
	if failed+changed > 0 {
		return exitError{ExitFindings}
	}
	return nil
}

// applyPlan carries out the planned items one by one through act, records
// each result in its item and returns how many did not apply.
func (o *fixOptions) applyPlan(ctx context.Context, snap *snapshot.Snapshot, items []planItem) (int, error) {
	ex, err := act.NewExecutor(o.resolved.config, o.resolved.policy, o.resolved.observe)
	if err != nil {
		return 0, err
	}
	// The live re-check sees the same durable node records.
	ev := act.Evidence{NodesGoneSince: snap.NodesGoneSince}
	failed := 0
	for i := range items {
		if !items[i].Planned {
			continue
		}
		r := ex.Apply(ctx, items[i].Finding, ev)
		items[i].Result = &r
		if r.Outcome != drift.Applied {
			failed++
		}
		if r.Outcome == drift.Applied || r.Outcome == drift.Pending {
			o.count(ctx, items[i].Finding, r)
		}
	}
	return failed, nil
}

// plan marks the safe findings to act on, up to max.
func plan(findings []drift.Finding, max int) []planItem {
	items := make([]planItem, 0, len(findings))
	n := 0
	for _, f := range findings {
		it := planItem{Finding: f}
		if f.Action.Safe {
			if n < max {
				it.Planned = true
				n++
			} else {
				it.Skipped = fmt.Sprintf("--max %d reached", max)
			}
		}
		items = append(items, it)
	}
	return items
}

// filterObject keeps the findings about object (NAMESPACE/NAME); an empty
// object keeps them all.
func filterObject(fs []drift.Finding, object string) []drift.Finding {
	if object == "" {
		return fs
	}
	var out []drift.Finding
	for _, f := range fs {
		if f.Namespace+"/"+f.Object.Name == object {
			out = append(out, f)
		}
	}
	return out
}
