package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/protect"
)

func newProtect() *cobra.Command {
	var (
		kubeconfig, kubeContext, namespace, selector, output string
		allNamespaces, apply, release                        bool
	)
	cmd := &cobra.Command{
		Use:   "protect",
		Short: "Add the " + protect.Finalizer + " finalizer to what VMs use (dry run unless --apply)",
		Long: `Reads the VMs and their PVCs, DataVolumes and ControllerRevisions once and adds the
` + protect.Finalizer + ` finalizer where a VM (running or stopped) uses an object that lacks it
— for clusters adopting tether. --release instead removes every tether finalizer in scope
(the uninstall path: run it after stopping the controller, or a namespace deletion waits).
Without --apply, prints what it would change and changes nothing.
Exit code: 0 done or planned, 1 some change failed, 2 error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "table", "json", "yaml":
			default:
				return fmt.Errorf("--output %q is not supported: use table, json or yaml", output)
			}
			if allNamespaces && namespace != "" {
				return fmt.Errorf("--namespace and --all-namespaces exclude each other: pass one of them")
			}
			sel, err := labels.Parse(selector)
			if err != nil {
				return fmt.Errorf("--selector %q is not a valid label selector: %v", selector, err)
			}
			if release && selector != "" {
				return fmt.Errorf("--release removes every tether finalizer in the namespace and takes no --selector")
			}
			rc, ns, err := loadConfig(kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			switch {
			case allNamespaces:
				ns = ""
			case namespace != "":
				ns = namespace
			}
			c, err := clients.New(rc)
			if err != nil {
				return fmt.Errorf("connecting to the cluster: %v", err)
			}
			changes, err := protect.Plan(cmd.Context(), c, protect.PlanOptions{Namespace: ns, Selector: sel, Release: release})
			if err != nil {
				return err
			}
			failed := 0
			if apply {
				failed = protect.Apply(cmd.Context(), c, changes)
			}
			if output != "table" {
				if err := encode(cmd.OutOrStdout(), output, changes); err != nil {
					return err
				}
			} else {
				printChanges(cmd, changes, apply)
			}
			if failed > 0 {
				return exitError{ExitFindings}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&kubeContext, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&namespace, "namespace", "n", "", "namespace to look at (default: the context's namespace)")
	fs.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "look at all namespaces")
	fs.StringVarP(&selector, "selector", "l", "", "label selector on VMs whose dependents to protect")
	fs.StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	fs.BoolVar(&apply, "apply", false, "make the changes (default: print them and change nothing)")
	fs.BoolVar(&release, "release", false, "remove every "+protect.Finalizer+" finalizer instead (uninstall)")
	return cmd
}

func printChanges(cmd *cobra.Command, changes []protect.Change, applied bool) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tKIND\tNAME\tFINALIZER\tUSED BY\tRESULT")
	for _, ch := range changes {
		verb := "would add"
		if ch.Action == protect.Release {
			verb = "would remove"
		}
		result := "planned"
		if applied {
			verb = verb[len("would "):]
			result = "done"
			if ch.Error != "" {
				result = "failed: " + ch.Error
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", ch.Ref.Namespace, ch.Ref.Kind, ch.Ref.Name, verb, orDash(joinNames(ch.Users)), result)
	}
	_ = w.Flush()
	if len(changes) == 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "nothing to change")
	} else if !applied {
		fmt.Fprintln(cmd.OutOrStdout(), "dry run: pass --apply to make these changes")
	}
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ","
		}
		out += n
	}
	return out
}
