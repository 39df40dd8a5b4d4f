// Package controller is `tether controller`: the checks run continuously
// from informer caches, each open finding is kept as a durable Finding
// object, and safe findings are acted on once their grace period — counted
// from the durable first-observed time — has passed.
//
// It must never act from the cache: every action goes through package act,
// which re-reads live and re-checks first. Event handlers only enqueue; the
// reconcile decides from current state alone.
package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller/compactcache"
	"github.com/tether-dev/tether/internal/controller/gauges"
	"github.com/tether-dev/tether/internal/controller/guard"
	"github.com/tether-dev/tether/internal/controller/lease"
	"github.com/tether-dev/tether/internal/controller/metricsauth"
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/controller/tenant"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/plan"
	"github.com/tether-dev/tether/internal/protect"
)

// gaugeInterval is how often the gauges are recounted from the caches.
const gaugeInterval = 15 * time.Second

// LeaderElectionID names the Lease the replicas compete for.
const LeaderElectionID = "tether-controller.tether.dev"

// DefaultNamespace is the controller's namespace when Options.Namespace is
// empty.
const DefaultNamespace = v1alpha1.DefaultNamespace

// Options configure the controller process.
type Options struct {
	RestConfig *rest.Config
	Config     *config.Config
	// LeaderElect enables leader election in LeaderElectionNamespace.
	LeaderElect             bool
	LeaderElectionNamespace string
	// LeaseDuration etc. tune leader election; zero keeps the defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// MetricsAddr and ProbeAddr: "0" disables.
	MetricsAddr string
	ProbeAddr   string
	// MetricsInsecure serves metrics over plain HTTP to anyone. By default
	// they are served over HTTPS, and only to requests whose bearer token
	// the API server authenticates (TokenReview) and allows GET on the
	// path (SubjectAccessReview): ClusterRole tether-metrics-reader.
	MetricsInsecure bool
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint;
	// empty (or no such files) serves a self-signed certificate.
	MetricsCertDir string
	// LeaderElectionID overrides the Lease name (tests run several sets).
	LeaderElectionID string
	// Identity names this replica in its Events (reportingInstance).
	Identity string
	// Namespace is the controller's own namespace: it holds the Finding
	// records of cluster-scoped subjects that no claim ties to a namespace
	// (default tether-system).
	Namespace string
	// WebhookAddr is the address of the protection admission webhook
	// (host:port); "" or "0" disables it. It needs protection enabled.
	WebhookAddr string
	// WebhookCertDir holds the webhook's tls.crt and tls.key (reloaded
	// when they change); empty means controller-runtime's default.
	WebhookCertDir string
	// SkipNameValidation allows several controllers in one process (tests).
	SkipNameValidation bool
	// GuardInterval is how often the anomaly guard looks (0: every 15s;
	// tests look more often).
	GuardInterval time.Duration
	Log           logr.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// AllowSecond lets a process without leader election act although
	// another process holds the leader Lease (lease.go).
	AllowSecond bool
	// Faults, when set, are called at the points of an action where a
	// process may die (fault-injection tests stop the manager there).
	Faults *Faults
}

// Faults are test hooks at the points of an action where a real process
// may be killed: right after the Acting claim is stored, between the
// server's dry run and the write, and right after the action returned,
// before its outcome is stored.
type Faults struct {
	AfterClaim, AfterDryRun, AfterAction func(drift.Finding)
}

// Run builds the manager and runs until ctx ends.
func Run(ctx context.Context, o Options) error {
	mgr, err := New(o)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// New builds the manager with the reconcilers registered.
func New(o Options) (manager.Manager, error) {
	o, policy, checks, err := complete(o)
	if err != nil {
		return nil, err
	}
	ctrllog.SetLogger(o.Log)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := checkAccess(ctx, o, checks); err != nil {
		return nil, err
	}
	o = oneAtATime(o)
	mgr, err := newManager(o)
	if err != nil {
		return nil, err
	}
	if err := setupProtection(mgr, o); err != nil {
		return nil, err
	}
	if o.LeaderElect {
		name := o.LeaderElectionNamespace + "/" + o.LeaderElectionID
		if err := mgr.Add(lease.StandbyReport{Mgr: mgr, Log: o.Log.WithName("election"), Lease: name, Every: time.Minute}); err != nil {
			return nil, err
		}
	}
	if checks || o.Config.DanglingOnRestart.Enabled {
		if err := requireFindingCRD(mgr.GetRESTMapper()); err != nil {
			return nil, err
		}
	}
	rs, err := newRecords(mgr, o)
	if err != nil {
		return nil, err
	}
	if checks || o.Config.DanglingOnRestart.Enabled {
		if err := mgr.Add(publishLimits(rs, o)); err != nil {
			return nil, err
		}
	}
	var tenants []*tenant.Watch
	if checks {
		if tenants, err = setupChecks(mgr, o, policy, rs); err != nil {
			return nil, err
		}
	}
	if o.Config.DanglingOnRestart.Enabled {
		if err := setupRestart(mgr, o, rs); err != nil {
			return nil, err
		}
	}
	if o.Config.PolicyReports.Enabled {
		if err := addReportWriter(mgr, o); err != nil {
			return nil, err
		}
	}
	if checks {
		ag := guard.Guard{Cache: mgr.GetClient(), Informers: mgr.GetCache(), Live: rs.Live, Namespace: o.Namespace, Tenants: tenants,
			Guard: plan.Guard{MaxSafe: o.Config.AnomalyGuard.MaxSafe, Share: o.Config.AnomalyGuard.Share}, Log: o.Log.WithName("anomaly-guard"), Now: o.Now,
			Every: cmp.Or(o.GuardInterval, guard.Interval)}
		if err := mgr.Add(ag); err != nil {
			return nil, err
		}
	}
	if checks || o.Config.DanglingOnRestart.Enabled {
		g := gauges.Gauges{Cache: mgr.GetClient(), Interval: gaugeInterval, Namespace: o.Namespace, Budget: rs.Budget, Tenants: gauges.HealthOf(tenants), Now: o.Now}
		if err := mgr.Add(g); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// setupProtection registers the sweep of finalizers left outside what
// protection now covers (protect.Sweeper) and, when protection is on, its
// reconciler and, where enabled, its webhook.
func setupProtection(mgr manager.Manager, o Options) error {
	if err := protect.AddSweeper(mgr, protect.SweepOptions{Coverage: protect.Coverage{Enabled: o.Config.Protection.Enabled, Namespaces: o.Config.Scope.Namespaces}, Identity: o.Identity, Log: o.Log}); err != nil {
		return err
	}
	if !o.Config.Protection.Enabled {
		return nil
	}
	sel, err := o.Config.VMSelector()
	if err != nil {
		return err
	}
	po := protect.Options{Selector: sel, Identity: o.Identity, Log: o.Log, ReleaseDelay: o.Config.Protection.ReleaseDelay.Duration, Now: o.Now}
	if err := protect.Setup(mgr, po); err != nil {
		return err
	}
	if webhookEnabled(o) {
		protect.SetupWebhook(mgr, protect.WebhookOptions{Namespaces: o.Config.Scope.Namespaces, Log: o.Log})
	}
	return nil
}

// publishLimits records, on the leader, the blast-radius limit beside the
// breaker (findingrecord.PublishLimits), for `tether fix` to say what its
// actions do to this controller's window. A failure is logged: the limit
// still holds here, only fix cannot tell it.
func publishLimits(rs *records.Keeper, o Options) manager.RunnableFunc {
	return func(ctx context.Context) error {
		l := findingrecord.Limits{Max: o.Config.BlastRadius.MaxActions, Interval: o.Config.BlastRadius.Interval.Duration}
		if err := findingrecord.PublishLimits(ctx, rs.Live, o.Namespace, l); err != nil {
			o.Log.Error(err, "the blast-radius limit was not published for tether fix", "record", o.Namespace+"/"+findingrecord.LimitsName)
		}
		return nil
	}
}

// oneAtATime turns leader election on for a process started without it
// while another process holds the leader Lease, unless AllowSecond.
func oneAtATime(o Options) Options {
	if o.LeaderElect || o.AllowSecond {
		return o
	}
	ns := o.LeaderElectionNamespace
	if ns == "" {
		ns = DefaultNamespace
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	holder := lease.OtherHolder(ctx, o.RestConfig, ns, o.LeaderElectionID, o.Now(), o.Log)
	if holder == "" {
		return o
	}
	o.Log.Info("another tether controller holds the leader Lease: joining the election instead of acting alongside it (--allow-second-controller acts anyway)",
		"lease", ns+"/"+o.LeaderElectionID, "holder", holder)
	o.LeaderElect, o.LeaderElectionNamespace = true, ns
	return o
}

// complete validates the configuration and fills the options' defaults. It
// returns the checks' policy and whether any check runs: protection or the
// "on restart" mode alone, without any check, is a valid configuration.
func complete(o Options) (Options, check.Policy, bool, error) {
	if o.Config == nil {
		return o, check.Policy{}, false, errors.New("controller: no configuration")
	}
	// The one validation of a Config built in code; Policy does not repeat it.
	if err := o.Config.Validate(); err != nil {
		return o, check.Policy{}, false, err
	}
	policy, err := o.Config.Policy()
	checks := err == nil
	if errors.Is(err, config.ErrNoChecks) && (o.Config.Protection.Enabled || o.Config.DanglingOnRestart.Enabled) {
		err = nil
	}
	if err != nil {
		return o, check.Policy{}, false, err
	}
	if webhookEnabled(o) && !o.Config.Protection.Enabled {
		return o, check.Policy{}, false, errors.New("controller: the admission webhook (--webhook-bind-address) is part of protection: set protection.enabled: true in the configuration, or disable it with --webhook-bind-address=0")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = LeaderElectionID
	}
	if o.Identity == "" {
		o.Identity = "tether-controller"
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = "0"
	}
	if o.ProbeAddr == "" {
		o.ProbeAddr = "0"
	}
	return o, policy, checks, nil
}

// newManager builds the manager, its caches and its health checks.
func newManager(o Options) (manager.Manager, error) {
	hooks, err := webhookServer(o)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(o.RestConfig, ctrl.Options{
		Scheme:        clients.Scheme(),
		WebhookServer: hooks,
		Cache:         cacheOptions(o),
		// Every write names the controller's field manager: a record's
		// times count only when the controller wrote its status
		// (v1alpha1.Finding.StatusWrittenBy).
		Client:                        client.Options{FieldOwner: v1alpha1.FieldManager},
		Metrics:                       metricsOptions(o),
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 durPtr(o.LeaseDuration),
		RenewDeadline:                 durPtr(o.RenewDeadline),
		RetryPeriod:                   durPtr(o.RetryPeriod),
		Logger:                        o.Log,
		Controller:                    ctrlconfig.Controller{SkipNameValidation: &o.SkipNameValidation},
	})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if hooks != nil {
		// Not ready until the webhook serves: the Service sends reviews
		// only to ready replicas.
		if err := mgr.AddReadyzCheck("webhook", hooks.StartedChecker()); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// metricsOptions serves metrics over HTTPS with authentication and
// authorization through the API server (package metricsauth), unless
// o.MetricsInsecure.
func metricsOptions(o Options) metricsserver.Options {
	if o.MetricsInsecure {
		return metricsserver.Options{BindAddress: o.MetricsAddr}
	}
	return metricsserver.Options{
		BindAddress:    o.MetricsAddr,
		SecureServing:  true,
		CertDir:        o.MetricsCertDir,
		FilterProvider: metricsauth.Provider(metricsauth.Options{}),
	}
}

// cacheOptions says what the informers hold: everything the checks read,
// within the configured namespaces, stripped of managedFields and, for the
// kinds the checks read, of every field they do not (leanCache).
func cacheOptions(o Options) cache.Options {
	cacheOpts := cache.Options{
		DefaultTransform: leanCache,
		// VMs and VMIs are stored compact (leanCache) and read expanded.
		NewInformer: compactcache.NewInformer,
		ByObject:    map[client.Object]cache.ByObject{},
	}
	if reads := gathered(o.Config); !reads.Has(snapshot.KindPods) {
		// When no loop reads every pod, the only pods the controller reads
		// are hot-plug attachment pods: the pod cache holds those alone.
		cacheOpts.ByObject[&corev1.Pod{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{snapshot.AttachmentPodLabel: snapshot.AttachmentPodLabelValue})}
	}
	// Records keep who wrote their status (v1alpha1.Finding.StatusWriters),
	// which decides whether their times are evidence; nothing else of their
	// managedFields.
	records := cache.ByObject{Transform: keepStatusWriters}
	if ns := o.Config.Scope.Namespaces; len(ns) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, n := range ns {
			cacheOpts.DefaultNamespaces[n] = cache.Config{}
		}
		// The kinds read in any namespace (the KubeVirt CR and its feature
		// gates live in KubeVirt's own, outside the scope) are read wherever
		// they are.
		for _, row := range snapshot.AllKinds.Rows() {
			for _, res := range row.Resources {
				if row.AnyNamespace && res.Namespaced {
					cacheOpts.ByObject[objectOf(res)] = cache.ByObject{Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}}
				}
			}
		}
		// Records of cluster-scoped subjects live in the controller's own
		// namespace.
		records.Namespaces = map[string]cache.Config{o.Namespace: {}}
		for _, n := range ns {
			records.Namespaces[n] = cache.Config{}
		}
	}
	cacheOpts.ByObject[&v1alpha1.Finding{}] = records
	return cacheOpts
}

var stripManagedFields = cache.TransformStripManagedFields()

// leanCache is the transform of every cache but the records': it drops the
// managedFields of any object and, of the kinds the checks read, what no
// check, gatherer or reconciler reads (snapshot.Lean), which is most of a
// VM or VMI; VMs and VMIs it then stores compact (snapshot.Compact), which
// the caches' informers expand again for every reader and event handler
// (compactcache.NewInformer). Cached objects are never written back: every write
// re-reads live or patches with preconditions (package act,
// protect.AddPatch).
func leanCache(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return obj, err
	}
	return snapshot.Compact(snapshot.Lean(obj)), nil
}

// keepStatusWriters is the cache transform of Finding records: of their
// managedFields it keeps one entry per manager that owns status fields.
func keepStatusWriters(obj any) (any, error) {
	f, ok := obj.(*v1alpha1.Finding)
	if !ok {
		return obj, nil
	}
	writers := f.StatusWriters()
	f.ManagedFields = nil
	for _, m := range writers {
		f.ManagedFields = append(f.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: statusOnly}})
	}
	return f, nil
}

var statusOnly = []byte(`{"f:status":{}}`)

func durPtr(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

func requireFindingCRD(m meta.RESTMapper) error {
	if _, err := m.RESTMapping(v1alpha1.GroupVersion.WithKind("Finding").GroupKind(), v1alpha1.GroupVersion.Version); err != nil {
		return fmt.Errorf("the Finding CRD (findings.tether.dev) is not installed: apply it with `kubectl apply -k config/default` (or config/crd): %v", err)
	}
	return nil
}

func sameName(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
}

func recordTampered() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		UpdateFunc:  func(e event.UpdateEvent) bool { return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
