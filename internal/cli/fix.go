package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tether-dev/tether/internal/act"
	"github.com/tether-dev/tether/internal/check"
)

// DefaultMaxActions bounds one `tether fix --apply` run unless --max says otherwise.
const DefaultMaxActions = 10

// planItem is one finding with what fix did or would do about it.
type planItem struct {
	Finding check.Finding `json:"finding"`
	// Planned: the action would be taken (dry run) or was attempted.
	Planned bool        `json:"planned"`
	Result  *act.Result `json:"result,omitempty"`
	// Skipped says why a safe action was left out (e.g. --max reached).
	Skipped string `json:"skipped,omitempty"`
}

func newFix() *cobra.Command {
	var (
		f          scopeFlags
		only       string
		apply      bool
		maxActions int
		deletePods bool
		object     string
	)
	cmd := &cobra.Command{
		Use:   "fix",
		Short: "Plan (default) or apply the fixes that are provably safe",
		Long: `Without --apply, prints the plan and changes nothing. With --apply, carries out
at most --max safe actions, each only after a live re-read, a re-run of the check on
the fresh objects and a server-side dry run; every action is recorded as an Event.
Exit code: 0 plan printed or all actions applied, 1 some action did not apply, 2 error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if only != "" {
				if _, err := check.Lookup(only); err != nil {
					return fmt.Errorf("--check: %v", err)
				}
				f.checks = []string{only}
			}
			if maxActions < 0 {
				return fmt.Errorf("--max must be 0 or more, got %d", maxActions)
			}
			o, err := f.resolve()
			if err != nil {
				return err
			}
			o.policy.DeleteAttachmentPods = deletePods
			snap, findings, err := scan(cmd.Context(), o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			findings = filterObject(findings, object)
			items := plan(findings, maxActions)
			if !apply {
				return printPlan(cmd.OutOrStdout(), o.output, items, false)
			}
			ex, err := act.NewExecutor(o.config, o.policy, o.observe)
			if err != nil {
				return err
			}
			failed := 0
			for i := range items {
				if !items[i].Planned {
					continue
				}
				// The live re-check sees the same durable node records.
				r := ex.Apply(cmd.Context(), items[i].Finding, act.Evidence{NodesGoneSince: snap.NodesGoneSince})
				items[i].Result = &r
				if r.Outcome != act.Applied {
					failed++
				}
			}
			if err := printPlan(cmd.OutOrStdout(), o.output, items, true); err != nil {
				return err
			}
			if failed > 0 {
				return exitError{ExitFindings}
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&only, "check", "", "fix the findings of this check only")
	cmd.Flags().BoolVar(&apply, "apply", false, "carry out the plan (default: print it and change nothing)")
	cmd.Flags().IntVar(&maxActions, "max", DefaultMaxActions, "at most this many actions in this run (0: none)")
	cmd.Flags().BoolVar(&deletePods, "delete-attachment-pods", false, "also delete orphaned attachment pods (OrphanAttachmentPod)")
	cmd.Flags().StringVar(&object, "object", "", "only findings about this object, NAMESPACE/NAME")
	return cmd
}

// plan marks the safe findings to act on, up to max.
func plan(findings []check.Finding, max int) []planItem {
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

func filterObject(fs []check.Finding, object string) []check.Finding {
	if object == "" {
		return fs
	}
	var out []check.Finding
	for _, f := range fs {
		if f.Namespace+"/"+f.Object.Name == object {
			out = append(out, f)
		}
	}
	return out
}
