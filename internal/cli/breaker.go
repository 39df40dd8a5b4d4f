package cli

import (
	"context"
	"fmt"
	"io"
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
	o := &resetBreakerOptions{}
	cmd := &cobra.Command{
		Use:   "reset-breaker",
		Short: "Let the controller act again after its blast-radius limit tripped",
		Long: `The blast-radius breaker is the Finding "` + findingrecord.BreakerName + `" in the controller's namespace
(kubectl get finding -n tether-system ` + findingrecord.BreakerName + `). Once tripped, every controller process
that records into that namespace stops acting, across restarts and changes of leader.
Investigate first (kubectl get findings -A; the controller's Events), then reset: acting
resumes, and the actions before the reset no longer count towards the limit.`,
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: in-cluster, $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.kubeContext, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&o.namespace, "namespace", "n", v1alpha1.DefaultNamespace, "the controller's namespace (where its breaker record is)")
	return bind(cmd, o)
}

// resetBreakerOptions are the flags of `tether controller reset-breaker`.
type resetBreakerOptions struct {
	kubeconfig, kubeContext, namespace string

	// Set by Complete.
	client client.Client
	stdout io.Writer
}

func (o *resetBreakerOptions) Validate() error { return nil }

// Complete reads the kubeconfig and connects.
func (o *resetBreakerOptions) Complete(cmd *cobra.Command) error {
	rc, _, err := loadConfig(o.kubeconfig, o.kubeContext)
	if err != nil {
		return err
	}
	if o.client, err = clients.New(rc); err != nil {
		return err
	}
	o.stdout = cmd.OutOrStdout()
	return nil
}

// Run clears the breaker, saying who did and when it had tripped.
func (o *resetBreakerOptions) Run(ctx context.Context) error {
	before, err := findingrecord.Breaker(ctx, o.client, o.namespace)
	if err != nil {
		return err
	}
	who := "tether controller reset-breaker"
	if u := os.Getenv("USER"); u != "" {
		who += " (user " + u + ")"
	}
	cleared, err := findingrecord.ResetBreaker(ctx, client.WithFieldOwner(o.client, "tether-reset-breaker"), o.namespace, time.Now(), who)
	if err != nil {
		return fmt.Errorf("resetting the breaker %s/%s: %w", o.namespace, findingrecord.BreakerName, err)
	}
	if !cleared {
		fmt.Fprintf(o.stdout, "breaker %s/%s is not tripped: nothing to reset\n", o.namespace, findingrecord.BreakerName)
		return nil
	}
	fmt.Fprintf(o.stdout, "breaker %s/%s reset (it tripped at %s: %s); the controller acts again\n",
		o.namespace, findingrecord.BreakerName, before.TrippedAt.UTC().Format(time.RFC3339), before.Message)
	return nil
}
