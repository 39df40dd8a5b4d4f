package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/findingrecord"
)

// newResetBreaker is `tether controller reset-breaker`: the operator's
// step that lets the controller act again after its blast-radius limit
// tripped.
func newResetBreaker() *cobra.Command {
	var kubeconfig, kubeContext, namespace string
	cmd := &cobra.Command{
		Use:   "reset-breaker",
		Short: "Let the controller act again after its blast-radius limit tripped",
		Long: `The blast-radius breaker is the Finding "` + findingrecord.BreakerName + `" in the controller's namespace
(kubectl get finding -n tether-system ` + findingrecord.BreakerName + `). Once tripped, every controller process
that records into that namespace stops acting, across restarts and changes of leader.
Investigate first (kubectl get findings -A; the controller's Events), then reset: acting
resumes, and the actions before the reset no longer count towards the limit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rc, _, err := loadConfig(kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			c, err := clients.New(rc)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			before, err := findingrecord.Breaker(ctx, c, namespace)
			if err != nil {
				return err
			}
			who := "tether controller reset-breaker"
			if u := os.Getenv("USER"); u != "" {
				who += " (user " + u + ")"
			}
			cleared, err := findingrecord.ResetBreaker(ctx, client.WithFieldOwner(c, "tether-reset-breaker"), namespace, time.Now(), who)
			if err != nil {
				return fmt.Errorf("resetting the breaker %s/%s: %w", namespace, findingrecord.BreakerName, err)
			}
			out := cmd.OutOrStdout()
			if !cleared {
				fmt.Fprintf(out, "breaker %s/%s is not tripped: nothing to reset\n", namespace, findingrecord.BreakerName)
				return nil
			}
			fmt.Fprintf(out, "breaker %s/%s reset (it tripped at %s: %s); the controller acts again\n",
				namespace, findingrecord.BreakerName, before.TrippedAt.UTC().Format(time.RFC3339), before.Message)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: in-cluster, $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&kubeContext, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "the controller's namespace (where its breaker record is)")
	return cmd
}
