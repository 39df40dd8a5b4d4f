package emulator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator/apiserver"
	"github.com/tether-dev/tether/internal/testing/emulator/crds"
	"github.com/tether-dev/tether/internal/testing/virthandler"
)

// Options configure Start. Defaults are filled in by Start.
type Options struct {
	// Config is an admin configuration for the apiserver. Required.
	Config *rest.Config
	// Namespace holds the Service, the KubeVirt object and the fault
	// ConfigMap. Default "kubevirt".
	Namespace string
	// ListenAddr is the TLS listener; it must be reachable as localhost from
	// the apiserver. Default "127.0.0.1:0" (a free port).
	ListenAddr string
	// NodeName is where new VMIs run. Default "node-1".
	NodeName string
	// TargetNodeName is where migrations go. Default "node-2".
	TargetNodeName string
	// NoNodes stops the emulator from creating Node objects for NodeName and
	// TargetNodeName and keeping them Ready.
	NoNodes bool
	// MigrationDuration is how long a migration runs. Default 3s.
	MigrationDuration time.Duration
	// ServiceName is the Service behind the APIService. Default "virt-api".
	ServiceName string
	// KubeVirtName is the KubeVirt object whose feature gates apply. Default
	// "kubevirt".
	KubeVirtName string
	// KubeVirtVersion is the status.observedKubeVirtVersion given to a
	// KubeVirt object that has none. Default DefaultKubeVirtVersion.
	KubeVirtVersion string
	// LifecycleStep is the least time between two writes of the emulator to
	// one VM/VMI name, so that every phase of the VMI and volume lifecycle
	// can be observed. Default 20ms.
	LifecycleStep time.Duration
	// HandlersDown lists nodes whose virt-handler starts out down (see
	// Emulator.SetHandlerDown).
	HandlersDown []string
	// AvailableTimeout bounds the wait for the APIService. Default 60s.
	AvailableTimeout time.Duration
	// Log receives the emulator's log lines. Default: discarded.
	Log logr.Logger
}

func (o *Options) defaults() error {
	if o.Config == nil {
		return errors.New("emulator: Options.Config is required")
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.Namespace, "kubevirt")
	def(&o.ListenAddr, "127.0.0.1:0")
	def(&o.NodeName, "node-1")
	def(&o.TargetNodeName, "node-2")
	def(&o.ServiceName, "virt-api")
	def(&o.KubeVirtName, "kubevirt")
	def(&o.KubeVirtVersion, DefaultKubeVirtVersion)
	if o.MigrationDuration <= 0 {
		o.MigrationDuration = 3 * time.Second
	}
	if o.LifecycleStep <= 0 {
		o.LifecycleStep = 20 * time.Millisecond
	}
	if o.AvailableTimeout <= 0 {
		o.AvailableTimeout = 60 * time.Second
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	return nil
}

// Emulator is a running KubeVirt emulator.
type Emulator struct {
	o      Options
	log    logr.Logger
	client client.Client // live reads and writes, no cache
	api    *apiserver.Server
	certs  *apiserver.ServingCerts
	faults apiserver.Faults
	// faultCMTaken is the UID/resourceVersion of the fault ConfigMap whose
	// faults were last queued, so that a retried delete queues them once.
	faultCMTaken string
	// handlers holds the nodes whose emulated virt-handler is down.
	handlers virthandler.Switch
	ctrl     *controller

	migMu     sync.Mutex
	migStarts map[types.UID]time.Time // precise migration starts

	ln      net.Listener
	srv     *http.Server
	cancel  context.CancelFunc
	stopped chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

// Scheme knows the core Kubernetes, KubeVirt and CDI types.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, virtv1.AddToScheme, cdiv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// InstallCRDs installs the KubeVirt and CDI CRDs and waits until they are
// Established.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error { return crds.Install(ctx, cfg) }

// Start installs the CRDs and the KubeVirt object (no feature gates listed),
// starts the TLS server and the controller, registers the APIService and
// returns once the apiserver reports it Available. The emulator runs until
// Stop is called or ctx ends.
func Start(ctx context.Context, o Options) (*Emulator, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(o.Config)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "kubevirt-emulator"
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	e := &Emulator{o: o, log: o.Log, client: cl, cancel: cancel, stopped: make(chan struct{})}
	e.api = apiserver.New(cl, o.Log, e.gates, &e.faults, e.stopped)
	for _, n := range o.HandlersDown {
		e.handlers.SetDown(n, true)
	}
	ok := false
	defer func() {
		if !ok {
			e.Stop()
		}
	}()
	if err := InstallCRDs(ctx, cfg); err != nil {
		return nil, err
	}
	if err := e.ensureNamespace(ctx); err != nil {
		return nil, err
	}
	if err := e.ensureKubeVirt(ctx); err != nil {
		return nil, err
	}
	if err := e.api.LoadAuth(ctx); err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	if err := e.serve(); err != nil {
		return nil, err
	}
	if !o.NoNodes {
		if err := e.ensureNodes(ctx); err != nil {
			return nil, err
		}
		e.goRun(func() { e.heartbeatLoop(runCtx) })
	}
	if e.ctrl, err = newController(runCtx, e, cfg, scheme); err != nil {
		return nil, err
	}
	e.goRun(func() { e.ctrl.run(runCtx) })
	if err := e.ctrl.waitForSync(ctx); err != nil {
		return nil, err
	}
	if err := e.register(ctx); err != nil {
		return nil, err
	}
	if err := e.waitAvailable(ctx); err != nil {
		return nil, err
	}
	e.log.Info("kubevirt emulator ready", "addr", e.Addr(), "namespace", o.Namespace, "node", o.NodeName)
	ok = true
	return e, nil
}

// serve starts the TLS listener.
func (e *Emulator) serve() error {
	host, _, err := net.SplitHostPort(e.o.ListenAddr)
	if err != nil {
		return fmt.Errorf("emulator: listen address %q: %w", e.o.ListenAddr, err)
	}
	svc := e.o.ServiceName + "." + e.o.Namespace + ".svc"
	names := []string{svc, svc + ".cluster.local", e.o.ServiceName + "." + e.o.Namespace, "localhost"}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		ips = append(ips, ip)
	}
	if e.certs, err = apiserver.NewServingCerts(names, ips); err != nil {
		return err
	}
	if e.ln, err = net.Listen("tcp", e.o.ListenAddr); err != nil {
		return fmt.Errorf("emulator: %w", err)
	}
	e.srv = &http.Server{
		Handler:           e.api.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{e.certs.Cert},
			// Verified per request against the requestheader CA, which may
			// rotate; /healthz needs no certificate.
			ClientAuth: tls.RequestClientCert,
		},
	}
	e.goRun(func() {
		if err := e.srv.ServeTLS(e.ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error(err, "TLS server stopped")
		}
	})
	return nil
}

func (e *Emulator) goRun(f func()) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
}

// Addr is the address the TLS listener is bound to.
func (e *Emulator) Addr() string {
	if e.ln == nil {
		return ""
	}
	return e.ln.Addr().String()
}

// Port is the TLS listener's port.
func (e *Emulator) Port() int {
	_, p, _ := net.SplitHostPort(e.Addr())
	n, _ := strconv.Atoi(p)
	return n
}

// CABundle is the PEM CA that signed the serving certificate.
func (e *Emulator) CABundle() []byte { return append([]byte(nil), e.certs.CAPEM...) }

// Namespace is where the emulator's Service and KubeVirt object live.
func (e *Emulator) Namespace() string { return e.o.Namespace }

// Stop stops the server and the controller. It leaves cluster objects
// (CRDs, APIService, VMIs, pods) as they are; see Unregister.
func (e *Emulator) Stop() {
	e.once.Do(func() {
		close(e.stopped)
		e.cancel()
		if e.srv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = e.srv.Shutdown(sctx)
			cancel()
		}
		e.wg.Wait()
	})
}

func (e *Emulator) ensureNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.o.Namespace}}
	if err := e.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("emulator: namespace %s: %w", e.o.Namespace, err)
	}
	return nil
}

// ensureKubeVirt creates the KubeVirt object if missing (leaving an existing
// one and its gates alone), marks it Deployed and, if it reports no version,
// gives it Options.KubeVirtVersion as observed and target version.
func (e *Emulator) ensureKubeVirt(ctx context.Context) error {
	kv := &virtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: e.o.Namespace, Name: e.o.KubeVirtName}}
	kv.Spec.Configuration.DeveloperConfiguration = &virtv1.DeveloperConfiguration{}
	if err := e.client.Create(ctx, kv); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("emulator: KubeVirt %s/%s: %w", e.o.Namespace, e.o.KubeVirtName, err)
	}
	if err := e.client.Get(ctx, client.ObjectKeyFromObject(kv), kv); err != nil {
		return err
	}
	if kv.Status.Phase == virtv1.KubeVirtPhaseDeployed && kv.Status.ObservedKubeVirtVersion != "" {
		return nil
	}
	kv.Status.Phase = virtv1.KubeVirtPhaseDeployed
	if kv.Status.ObservedKubeVirtVersion == "" {
		kv.Status.ObservedKubeVirtVersion = e.o.KubeVirtVersion
		kv.Status.TargetKubeVirtVersion = e.o.KubeVirtVersion
	}
	return e.client.Status().Update(ctx, kv)
}
