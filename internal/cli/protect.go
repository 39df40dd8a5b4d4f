package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/protect/inuse"
)

// newProtect is `tether protect`: the command binds the flags to a
// protectOptions and runs it.
func newProtect() *cobra.Command {
	o := &protectOptions{}
	cmd := &cobra.Command{
		Use:   "protect",
		Short: "Add the " + inuse.Finalizer + " finalizer to what VMs use (dry run unless --apply)",
		Long: `Reads the VMs and their PVCs, DataVolumes and ControllerRevisions once and adds the
` + inuse.Finalizer + ` finalizer where a VM (running or stopped) uses an object that lacks it
— for clusters adopting tether. --release instead removes every tether finalizer in scope,
in use or not: the uninstall path (run it after stopping the controller, or a namespace
deletion waits), and the command the controller prints for finalizers it no longer
maintains (protection turned off, or a namespace that left its scope).
Without --apply, prints what it would change and changes nothing.
Exit code: 0 done or planned, 1 some change failed, 2 error.`,
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	o.cluster.register(fs, "label selector on VMs whose dependents to protect")
	fs.BoolVar(&o.apply, "apply", false, "make the changes (default: print them and change nothing)")
	fs.BoolVar(&o.release, "release", false, "remove every "+inuse.Finalizer+" finalizer instead (uninstall)")
	return bind(cmd, o)
}

// protectOptions are the flags of `tether protect` and, once completed,
// what it runs with.
type protectOptions struct {
	cluster clusterFlags
	apply   bool
	release bool

	// Set by Complete.
	plan   protect.PlanOptions
	client client.Client
	stdout io.Writer
}

// Validate checks the flags; none of the checks reads a file or the cluster.
func (o *protectOptions) Validate() error {
	if err := o.cluster.checkOutput(); err != nil {
		return err
	}
	if err := o.cluster.checkNamespaces(); err != nil {
		return err
	}
	if _, err := o.cluster.parseSelector(); err != nil {
		return err
	}
	if o.release && o.cluster.selector != "" {
		return fmt.Errorf("--release removes every tether finalizer in the namespace and takes no --selector")
	}
	return nil
}

// Complete reads the kubeconfig, connects to the cluster and sets the
// scope of the plan.
func (o *protectOptions) Complete(cmd *cobra.Command) error {
	sel, err := o.cluster.parseSelector()
	if err != nil {
		return err
	}
	rc, ns, err := o.cluster.restConfig()
	if err != nil {
		return err
	}
	c, err := clients.New(rc)
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %v", err)
	}
	o.plan = protect.PlanOptions{Namespace: ns, Selector: sel, Release: o.release}
	o.client, o.stdout = c, cmd.OutOrStdout()
	return nil
}

// Run plans the finalizer changes, makes them with --apply and prints them;
// it returns ExitFindings when a change failed.
func (o *protectOptions) Run(ctx context.Context) error {
	changes, err := protect.Plan(ctx, o.client, o.plan)
	if err != nil {
		return err
	}
	failed := 0
	if o.apply {
		failed = protect.Apply(ctx, o.client, changes)
	}
	if o.cluster.output != "table" {
		if err := encode(o.stdout, o.cluster.output, changes); err != nil {
			return err
		}
	} else {
		printChanges(o.stdout, changes, o.apply)
	}
	if failed > 0 {
		return exitError{ExitFindings}
	}
	return nil
}

// printChanges prints changes as a table; applied says whether they were
// made or only planned.
func printChanges(out io.Writer, changes []protect.Change, applied bool) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tKIND\tNAME\tFINALIZER\tUSED BY\tRESULT")
	for _, ch := range changes {
		verb := "would add"
		if ch.Action == inuse.Release {
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
		fmt.Fprintln(out, "nothing to change")
	} else if !applied {
		fmt.Fprintln(out, "dry run: pass --apply to make these changes")
	}
}

// joinNames joins names with commas.
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
