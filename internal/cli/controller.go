package cli

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
)

func newController() *cobra.Command {
	var (
		kubeconfig, kubeContext, configPath string
		dryRun, leaderElect                 bool
		leaderNS, metricsAddr, probeAddr    string
	)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the continuous reconciler (opt-in per check; see docs/controller.md)",
		Long: `Watches VMIs and the storage state (Nodes, VolumeAttachments, PVs, claims, pods),
keeps one Finding object per open finding, and acts on the checks
enabled in --config once their grace period has passed. --dry-run records findings and
never acts. Runs in cluster (service account) or out of cluster (--kubeconfig).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(configPath)
			if err != nil {
				return err
			}
			if dryRun {
				cfg.DryRun = true
			}
			rc, _, err := loadConfig(kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			rc.UserAgent = "tether-controller"
			if leaderNS == "" {
				leaderNS = os.Getenv("POD_NAMESPACE")
			}
			if leaderElect && leaderNS == "" {
				leaderNS = "tether-system"
			}
			log := zap.New(zap.UseDevMode(false), zap.WriteTo(cmd.ErrOrStderr()))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return controller.Run(ctx, controller.Options{
				RestConfig: rc, Config: cfg, LeaderElect: leaderElect, LeaderElectionNamespace: leaderNS,
				// Records of cluster-scoped subjects go to the pod's own
				// namespace (default tether-system).
				Namespace:   os.Getenv("POD_NAMESPACE"),
				MetricsAddr: metricsAddr, ProbeAddr: probeAddr, Log: logr.Logger(log),
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: in-cluster, $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&kubeContext, "context", "", "the kubeconfig context to use")
	fs.StringVar(&configPath, "config", "", "the controller configuration file (default: built-in defaults, every check off)")
	fs.BoolVar(&dryRun, "dry-run", false, "record findings, never act (overrides the config file)")
	fs.BoolVar(&leaderElect, "leader-elect", false, "elect a leader among replicas (Lease "+controller.LeaderElectionID+")")
	fs.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the leader-election Lease (default: $POD_NAMESPACE, else tether-system)")
	fs.StringVar(&metricsAddr, "metrics-bind-address", "0", "address of the Prometheus metrics endpoint (0 disables)")
	fs.StringVar(&probeAddr, "health-probe-bind-address", "0", "address of /healthz and /readyz (0 disables)")
	return cmd
}
