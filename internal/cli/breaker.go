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
	return newResetSwitch(resetSwitch{
		use: "reset-breaker", what: "breaker", name: findingrecord.BreakerName,
		short: "Let the controller act again after its blast-radius limit tripped",
		long: `The blast-radius breaker is the Finding "` + findingrecord.BreakerName + `" in the controller's namespace
(kubectl get finding -n tether-system ` + findingrecord.BreakerName + `). Once tripped, every controller process
that records into that namespace stops acting, across restarts and changes of leader.
Investigate first (kubectl get findings -A; the controller's Events), then reset: acting
resumes, and the actions before the reset no longer count towards the limit.`,
		read:  findingrecord.Breaker,
		reset: findingrecord.ResetBreaker,
	})
}

// newResetGuard is `tether controller reset-guard`: the operator's step
// that lets the controller act again after its anomaly guard tripped.
func newResetGuard() *cobra.Command {
	return newResetSwitch(resetSwitch{
		use: "reset-guard", what: "anomaly guard", name: findingrecord.GuardName,
		short: "Let the controller act again after its anomaly guard tripped",
		long: `The anomaly guard is the Finding "` + findingrecord.GuardName + `" in the controller's namespace
(kubectl get finding -n tether-system ` + findingrecord.GuardName + `). It trips when the picture the
controller acts from looks wrong: a tenant that listed VolumeAttachments lists none while its
VMIs hold hot-plugs, the VMIs vanish from the caches, or more findings become safe to act on
at once than its limit. Every controller process that records into that namespace then stops
acting. Check the picture first (tether audit; the record's message says what was seen), then
reset: acting resumes, and the picture as it is now is accepted (the guard trips again only
when it changes for the worse).`,
		read: func(ctx context.Context, r client.Reader, ns string) (findingrecord.BreakerState, error) {
			g, err := findingrecord.Guard(ctx, r, ns)
			return g.BreakerState, err
		},
		reset: findingrecord.ResetGuard,
	})
}

// resetSwitch describes one of the controller's switch records and its
// reset command.
type resetSwitch struct {
	use, what, name, short, long string
	read                         func(context.Context, client.Reader, string) (findingrecord.BreakerState, error)
	reset                        func(context.Context, client.Client, string, time.Time, string) (bool, error)
}

func newResetSwitch(sw resetSwitch) *cobra.Command {
	o := &resetBreakerOptions{sw: sw}
	cmd := &cobra.Command{Use: sw.use, Short: sw.short, Long: sw.long, Args: cobra.NoArgs}
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: in-cluster, $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.kubeContext, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&o.namespace, "namespace", "n", v1alpha1.DefaultNamespace, "the controller's namespace (where its "+sw.what+" record is)")
	return bind(cmd, o)
}

// resetBreakerOptions are the flags of `tether controller reset-breaker`.
type resetBreakerOptions struct {
	kubeconfig, kubeContext, namespace string
	sw                                 resetSwitch

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

// Run clears the switch, saying who did and when it had tripped.
func (o *resetBreakerOptions) Run(ctx context.Context) error {
	before, err := o.sw.read(ctx, o.client, o.namespace)
	if err != nil {
		return err
	}
	who := "tether controller " + o.sw.use
	if u := os.Getenv("USER"); u != "" {
		who += " (user " + u + ")"
	}
	cleared, err := o.sw.reset(ctx, client.WithFieldOwner(o.client, "tether-"+o.sw.use), o.namespace, time.Now(), who)
	if err != nil {
		return fmt.Errorf("resetting the %s %s/%s: %w", o.sw.what, o.namespace, o.sw.name, err)
	}
	if !cleared {
		fmt.Fprintf(o.stdout, "%s %s/%s is not tripped: nothing to reset\n", o.sw.what, o.namespace, o.sw.name)
		return nil
	}
	fmt.Fprintf(o.stdout, "%s %s/%s reset (it tripped at %s: %s); the controller acts again\n",
		o.sw.what, o.namespace, o.sw.name, before.TrippedAt.UTC().Format(time.RFC3339), before.Message)
	return nil
}
