package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/report/reportapi"
)

// newController is `tether controller`: the command binds the flags to a
// controllerOptions and runs it.
func newController() *cobra.Command {
	o := &controllerOptions{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the continuous reconciler (opt-in per check; see docs/controller.md)",
		Long: `Watches VMIs and the storage state (Nodes, VolumeAttachments, PVs, claims, pods),
keeps one Finding object per open finding, and acts on the checks
enabled in --config once their grace period has passed. --dry-run records findings and
never acts. Runs in cluster (service account) or out of cluster (--kubeconfig).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newResetBreaker(), newResetGuard())
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: in-cluster, $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.kubeContext, "context", "", "the kubeconfig context to use")
	fs.StringVar(&o.configPath, "config", "", "the controller configuration file (default: built-in defaults, every check off)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "record findings, never act (overrides the config file)")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader among replicas (Lease "+controller.LeaderElectionID+")")
	fs.BoolVar(&o.allowSecond, "allow-second-controller", false, "act although another controller holds the leader Lease (without it, a process started without --leader-elect joins the election instead)")
	fs.StringVar(&o.leaderNS, "leader-election-namespace", "", "namespace of the leader-election Lease (default: $POD_NAMESPACE, else tether-system)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "address of the Prometheus metrics endpoint, e.g. :8443 (0 disables)")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS, only to bearer tokens the API server authenticates and allows GET /metrics (ClusterRole tether-metrics-reader); false serves plain HTTP to anyone")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory with tls.crt and tls.key for the metrics endpoint (default: a self-signed certificate)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", "0", "address of /healthz and /readyz (0 disables)")
	fs.StringVar(&o.webhookAddr, "webhook-bind-address", "0", "address (host:port, e.g. :9443) of the protection admission webhook, which refuses VM writes that reference a PVC or DataVolume being deleted (0 disables; needs protection.enabled; see docs/protection.md)")
	fs.BoolVar(&o.policyReports, "policy-reports", false, "also write the open findings as policy reports, kept in step as they change (overrides policyReports.enabled in the config file; needs the report CRDs and config/rbac/policyreports; see docs/reports.md)")
	fs.StringVar(&o.reportAPI, "report-api", "", fmt.Sprintf("with --policy-reports, the API to write: %s (PolicyReport, the default) or %s (Report) (overrides policyReports.api)", reportapi.WGPolicy, reportapi.OpenReports))
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "directory holding the webhook's tls.crt and tls.key, reloaded when they change (default: $TMPDIR/k8s-webhook-server/serving-certs)")
	return bind(cmd, o)
}

// controllerOptions are the flags of `tether controller` and, once
// completed, what it runs with.
type controllerOptions struct {
	kubeconfig, kubeContext, configPath string
	dryRun, leaderElect, allowSecond    bool
	metricsSecure                       bool
	leaderNS, metricsAddr, probeAddr    string
	metricsCertDir                      string
	webhookAddr, webhookCertDir         string
	policyReports                       bool
	reportAPI                           string

	// Set by Complete.
	run    controller.Options
	stderr io.Writer
}

// Validate checks the flags alone, before any file or the cluster is read.
func (o *controllerOptions) Validate() error {
	if o.metricsCertDir != "" && !o.metricsSecure {
		return errors.New("--metrics-cert-dir is for HTTPS: drop it, or drop --metrics-secure=false")
	}
	return nil
}

// Complete reads the configuration file and the kubeconfig, and picks the
// namespace of the leader-election Lease.
func (o *controllerOptions) Complete(cmd *cobra.Command) error {
	cfg, err := config.Load(o.configPath)
	if err != nil {
		return err
	}
	if o.dryRun {
		cfg.DryRun = true
	}
	if err := o.reports(cmd, cfg); err != nil {
		return err
	}
	rc, _, err := loadConfig(o.kubeconfig, o.kubeContext)
	if err != nil {
		return err
	}
	rc.UserAgent = "tether-controller"
	leaderNS := o.leaderNS
	if leaderNS == "" {
		leaderNS = os.Getenv("POD_NAMESPACE")
	}
	if o.leaderElect && leaderNS == "" {
		leaderNS = "tether-system"
	}
	o.run = controller.Options{
		RestConfig: rc, Config: cfg, LeaderElect: o.leaderElect, LeaderElectionNamespace: leaderNS, AllowSecond: o.allowSecond,
		// Records of cluster-scoped subjects go to the pod's own
		// namespace (default tether-system).
		Namespace:   os.Getenv("POD_NAMESPACE"),
		MetricsAddr: o.metricsAddr, ProbeAddr: o.probeAddr,
		MetricsInsecure: !o.metricsSecure, MetricsCertDir: o.metricsCertDir,
		WebhookAddr: o.webhookAddr, WebhookCertDir: o.webhookCertDir,
	}

	o.stderr = cmd.ErrOrStderr()
	return nil
}

// reports applies --policy-reports and --report-api to cfg.
func (o *controllerOptions) reports(cmd *cobra.Command, cfg *config.Config) error {
	if cmd.Flags().Changed("policy-reports") {
		cfg.PolicyReports.Enabled = o.policyReports
	}
	if o.reportAPI == "" {
		return nil
	}
	if !cfg.PolicyReports.Enabled {
		return errors.New("--report-api is for policy reports: add --policy-reports (or set policyReports.enabled: true in the config file), or drop it")
	}
	api, err := reportapi.Parse(o.reportAPI)
	if err != nil {
		return fmt.Errorf("--report-api: %v", err)
	}
	cfg.PolicyReports.API = api
	return nil
}

// Run runs the controller until ctx ends, SIGINT or SIGTERM.
func (o *controllerOptions) Run(ctx context.Context) error {
	log := zap.New(zap.UseDevMode(false), zap.WriteTo(o.stderr))
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := o.run
	opts.Log = logr.Logger(log)
	return controller.Run(ctx, opts)
}
