package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/protect"
)

// newManifests is `tether manifests`, with its one subcommand `protection`:
// the admission policy that refuses to delete protected objects.
func newManifests() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "manifests",
		Short: "Print manifests to apply with kubectl",
	}
	var allow []string
	prot := &cobra.Command{
		Use:   "protection",
		Short: "Print a ValidatingAdmissionPolicy refusing DELETE of objects labelled " + protect.DeleteProtectionLabel + "=true",
		Long: `Prints a ValidatingAdmissionPolicy and its binding that refuse the deletion of
PVCs, DataVolumes and ControllerRevisions labelled ` + protect.DeleteProtectionLabel + `=true, with a
message saying how to release the protection. The garbage collector and the namespace
controller are always let through (a namespace being deleted can go); --allow adds more
user names. Apply with: tether manifests protection | kubectl apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, b := protect.Policy(protect.PolicyOptions{Allow: allow})
			for _, o := range []any{p, b} {
				data, err := yaml.Marshal(o)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "---\n%s", data)
			}
			return nil
		},
	}
	prot.Flags().StringArrayVar(&allow, "allow", nil, "also let this user through, e.g. system:kube-controller-manager when it runs without --use-service-account-credentials (repeatable)")
	cmd.AddCommand(prot)
	return cmd
}
