package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// clusterFlags are the kubectl-style flags that pick the cluster, the
// namespaces and the output format: audit, fix and protect share them.
type clusterFlags struct {
	kubeconfig    string
	context       string
	namespace     string
	allNamespaces bool
	selector      string
	output        string
	// formats are the output formats a command takes beyond table, json
	// and yaml.
	formats []string
}

// register binds the flags; selectorHelp says what --selector selects.
func (f *clusterFlags) register(fs *pflag.FlagSet, selectorHelp string) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.context, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&f.namespace, "namespace", "n", "", "namespace to look at (default: the context's namespace)")
	fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "look at all namespaces")
	fs.StringVarP(&f.selector, "selector", "l", "", selectorHelp)
	fs.StringVarP(&f.output, "output", "o", "table", "output format: table, json or yaml")
}

// checkOutput checks that --output names a supported format.
func (f *clusterFlags) checkOutput() error {
	switch f.output {
	case "table", "json", "yaml":
		return nil
	}
	if slices.Contains(f.formats, f.output) {
		return nil
	}
	return fmt.Errorf("--output %q is not supported: use %s", f.output, strings.Join(append([]string{"table", "json", "yaml"}, f.formats...), ", "))
}

// checkNamespaces checks that --namespace and --all-namespaces are not both given.
func (f *clusterFlags) checkNamespaces() error {
	if f.allNamespaces && f.namespace != "" {
		return fmt.Errorf("--namespace and --all-namespaces exclude each other: pass one of them")
	}
	return nil
}

// parseSelector parses --selector.
func (f *clusterFlags) parseSelector() (labels.Selector, error) {
	sel, err := labels.Parse(f.selector)
	if err != nil {
		return nil, fmt.Errorf("--selector %q is not a valid label selector: %v", f.selector, err)
	}
	return sel, nil
}

// restConfig reads the kubeconfig and returns it with the namespace in
// scope: "" for --all-namespaces, else --namespace, else the context's.
func (f *clusterFlags) restConfig() (*rest.Config, string, error) {
	cfg, ns, err := loadConfig(f.kubeconfig, f.context)
	if err != nil {
		return nil, "", err
	}
	oneShotLimits(cfg)
	switch {
	case f.allNamespaces:
		ns = ""
	case f.namespace != "":
		ns = f.namespace
	}
	return cfg, ns, nil
}

// scopeFlags are the flags shared by audit and fix: the cluster flags, what
// to check and the policy knobs.
type scopeFlags struct {
	clusterFlags
	checks       []string
	volumePrefix string
	tenants      []string

	allowVMIOnly        bool
	tenantAuthoritative bool
	forceDetach         bool
	// durations are the checks' settings that have a flag, by row of
	// check.Settings.
	durations           []time.Duration
	controllerNamespace string
	minSeverity         string
	tenantDriver        string
	matchNodesByName    bool
	chunkSize           int64
	cbor                bool
}

// register binds the flags to fs.
func (f *scopeFlags) register(fs *pflag.FlagSet) {
	f.clusterFlags.register(fs, "label selector on VMIs (e.g. app=db,tier!=cache)")
	fs.StringSliceVar(&f.checks, "checks", nil, "checks to run, comma separated (default: all; see `tether checks`)")
	fs.StringVar(&f.volumePrefix, "volume-prefix", "", "only volumes whose name starts with this prefix")
	fs.StringArrayVar(&f.tenants, "tenant", nil, "tenant cluster evidence: NAME=KUBECONFIG[:NAMESPACE] (repeatable); NAMESPACE is the infra namespace of its VMs (required with -A); a path that contains ':' must be unambiguous (end it with ':' for no namespace)")
	fs.StringVar(&f.tenantDriver, "tenant-driver", "", "the tenants' KubeVirt CSI driver name (default csi.kubevirt.io)")
	fs.BoolVar(&f.matchNodesByName, "match-tenant-nodes-by-name", false, "opt-in: a tenant node with no providerID, infra-vm annotations or CSINode node ID is the VM of its own name in the tenant's namespace")
	fs.BoolVar(&f.allowVMIOnly, "allow-vmi-only-detach", false, "treat VMI-only hot-plugs (not in the VM spec) as detachable without tenant evidence")
	fs.BoolVar(&f.tenantAuthoritative, "tenant-authoritative", false, "let reachable tenant evidence override the VM spec for CSI-driver volumes")
	fs.BoolVar(&f.forceDetach, "force-detach", false, "last resort on fenced nodes: allow deleting a stale VolumeAttachment or its attacher finalizer (counted as forced)")
	settings := check.Settings()
	f.durations = make([]time.Duration, len(settings))
	for i, st := range settings {
		if st.Flag != "" {
			fs.DurationVar(&f.durations[i], st.Flag, st.Default, st.Usage)
		}
	}
	fs.StringVar(&f.controllerNamespace, "controller-namespace", v1alpha1.DefaultNamespace, "namespace of tether controller, whose Finding records --fence-gone-nodes-after reads (records elsewhere are no evidence)")
	fs.StringVar(&f.minSeverity, "min-severity", "info", "report findings of at least this severity: info, warning or critical")
	fs.BoolVar(&f.cbor, "cbor", false, "opt-in: ask the API server for VMIs and VMs in CBOR, which costs it less than half the CPU of JSON; only a server with the CBORServingAndStorage feature gate (alpha) offers it, any other answers JSON as without this flag")
	fs.Int64Var(&f.chunkSize, "chunk-size", observe.DefaultPageSize, "read large lists in chunks of this many objects, as kubectl does; 0 reads each kind in one LIST (less work for the API server, more memory on both sides)")
}

// options is the validated form of the flags.
type options struct {
	config    *rest.Config
	namespace string // "" = all
	policy    check.Policy
	observe   observe.Options
	output    string
	minSev    drift.Severity
	// extraKinds are read beyond what the checks decide from (what an
	// output format shows).
	extraKinds snapshot.Kinds
}

// resolve turns the flags into options: first the checks that need only
// the flags, then the kubeconfig, the policy and the tenants. The first bad
// flag stops it with an error that names the flag.
func (f *scopeFlags) resolve() (*options, error) {
	sel, minSev, err := f.parse()
	if err != nil {
		return nil, err
	}
	cfg, ns, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	o := &options{config: cfg, namespace: ns, output: f.output, minSev: minSev, policy: f.policy(sel, ns)}
	if o.observe, err = f.observeOptions(ns); err != nil {
		return nil, err
	}
	if err := o.policy.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// parse checks the flags that need nothing else and returns the selector
// and the minimum severity they name.
func (f *scopeFlags) parse() (labels.Selector, drift.Severity, error) {
	if err := f.checkOutput(); err != nil {
		return nil, "", err
	}
	minSev, err := f.severity()
	if err != nil {
		return nil, "", err
	}
	if err := f.checkNamespaces(); err != nil {
		return nil, "", err
	}
	sel, err := f.parseSelector()
	if err != nil {
		return nil, "", err
	}
	for _, c := range f.checks {
		if _, err := check.Lookup(c); err != nil {
			return nil, "", fmt.Errorf("--checks: %v", err)
		}
	}
	return sel, minSev, nil
}

// severity parses --min-severity.
func (f *scopeFlags) severity() (drift.Severity, error) {
	switch f.minSeverity {
	case "info":
		return drift.SeverityInfo, nil
	case "warning":
		return drift.SeverityWarning, nil
	case "critical":
		return drift.SeverityCritical, nil
	}
	return "", fmt.Errorf("--min-severity %q is not supported: use info, warning or critical", f.minSeverity)
}

// policy is the check policy the flags ask for, scoped to namespace ns
// ("" = all). It is validated by the caller.
func (f *scopeFlags) policy(sel labels.Selector, ns string) check.Policy {
	p := check.DefaultPolicy()
	p.Scope.Selector = sel
	p.Scope.VolumePrefix = f.volumePrefix
	if ns != "" {
		p.Scope.Namespaces = []string{ns}
	}
	p.Checks = f.checks
	p.AllowVMIOnlyDetach = f.allowVMIOnly
	p.TenantAuthoritative = f.tenantAuthoritative
	p.Storage.ForceDetach = f.forceDetach
	f.setDurations(&p)
	return p
}

// observeOptions says what to read for namespace ns ("" = all): the
// controller's records of gone nodes when --fence-gone-nodes-after asks for
// them, and each --tenant with its kubeconfig loaded.
func (f *scopeFlags) observeOptions(ns string) (observe.Options, error) {
	if f.chunkSize < 0 {
		return observe.Options{}, fmt.Errorf("--chunk-size %d: use a positive count, or 0 for no chunks", f.chunkSize)
	}
	o := observe.Options{Namespace: ns, PageSize: f.chunkSize, CBOR: f.cbor}
	if f.chunkSize == 0 {
		o.PageSize = observe.Unpaged
	}
	var p check.Policy
	if f.setDurations(&p); p.Storage.FenceGoneNodesAfter > 0 {
		if errs := validation.IsDNS1123Label(f.controllerNamespace); len(errs) > 0 {
			return o, fmt.Errorf("--controller-namespace %q is not a namespace name: %s", f.controllerNamespace, strings.Join(errs, "; "))
		}
		o.GoneNodeRecordsIn = f.controllerNamespace
	}
	for _, spec := range f.tenants {
		t, err := f.tenant(spec, ns)
		if err != nil {
			return o, err
		}
		o.Tenants = append(o.Tenants, t)
	}
	return o, nil
}

// tenant parses one --tenant flag and loads its kubeconfig. Without a
// namespace of its own, a tenant's VMs live in the one namespace in scope
// ns; with --all-namespaces (ns "") that cannot be guessed.
func (f *scopeFlags) tenant(spec, ns string) (observe.TenantSource, error) {
	t, err := ParseTenant(spec)
	if err != nil {
		return observe.TenantSource{}, err
	}
	switch {
	case t.Namespace == "" && ns != "":
		t.Namespace = ns
	case t.Namespace == "":
		return observe.TenantSource{}, fmt.Errorf("--tenant %s: name the infra namespace of its VMs (NAME=KUBECONFIG:NAMESPACE, the driver's --infra-cluster-namespace): with --all-namespaces it cannot be guessed", spec)
	}
	if f.tenantDriver != "" {
		if msgs := validation.IsDNS1123Subdomain(f.tenantDriver); len(msgs) > 0 || len(f.tenantDriver) > 63 {
			return observe.TenantSource{}, fmt.Errorf("--tenant-driver %q is not a CSI driver name (a DNS subdomain of at most 63 characters, e.g. csi.kubevirt.io)", f.tenantDriver)
		}
	}
	t.Driver, t.MatchNodesByName = f.tenantDriver, f.matchNodesByName
	if t.Config, err = loadTenantConfig(t.kubeconfig); err != nil {
		return observe.TenantSource{}, fmt.Errorf("--tenant %s: %v", t.Name, err)
	}
	return t.TenantSource, nil
}

// loadConfig follows kubectl: --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config; --context picks the context. It returns the context's
// namespace ("default" when unset).
func loadConfig(path, context string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, "", fmt.Errorf("--kubeconfig %s cannot be read: %v", path, err)
		}
		rules.ExplicitPath = path
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading the kubeconfig: %v (pass --kubeconfig or set KUBECONFIG)", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	cfg.UserAgent = "tether"
	return cfg, ns, nil
}

// One-shot commands send a few LISTs per kind (one per page), never one
// request per object, so the client's own limit only slows them: client-go's
// default (5/s, burst 10) alone made a 10,000-VMI audit wait seconds between
// pages. They take the limits kubectl gives its discovery client instead,
// unless the kubeconfig set its own. The API server's priority and fairness
// still applies.
const (
	oneShotQPS   = 50
	oneShotBurst = 300
)

// oneShotLimits sets the one-shot client limits on cfg where it has none.
func oneShotLimits(cfg *rest.Config) {
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = oneShotQPS, oneShotBurst
	}
}

// loadTenantConfig reads a tenant's kubeconfig file.
func loadTenantConfig(path string) (*rest.Config, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("kubeconfig %s cannot be read: %v", path, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %v", path, err)
	}
	cfg.UserAgent = "tether"
	oneShotLimits(cfg)
	return cfg, nil
}

// Tenant is a parsed --tenant flag.
type Tenant struct {
	observe.TenantSource
	kubeconfig string
}

// ParseTenant parses NAME=KUBECONFIG[:NAMESPACE]. A kubeconfig path may
// itself contain ':', so where the part after the last ':' could be a
// namespace (a DNS-1123 label, no path separator), both readings are
// checked against the file system and exactly one must name a file:
//
//   - only KUBECONFIG:NAMESPACE's KUBECONFIG exists: that file, that namespace;
//   - only the whole rest exists: that file, no namespace;
//   - both, or neither: an error that names both readings and the fix.
//
// A trailing ':' says "no namespace" explicitly (NAME=/path/with:colon:), so
// every file can be named without ambiguity.
func ParseTenant(spec string) (Tenant, error) { return parseTenant(spec, isFile) }

// isFile says whether path names a file that is not a directory.
func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// parseTenant is ParseTenant with the file system check as a parameter, so
// tests can say which paths exist.
func parseTenant(spec string, exists func(string) bool) (Tenant, error) {
	const form = "use NAME=KUBECONFIG[:NAMESPACE], e.g. tenant1=/etc/tether/tenant1.kubeconfig:tenant-a (a trailing ':' means no namespace)"
	name, rest, ok := strings.Cut(spec, "=")
	if !ok {
		return Tenant{}, fmt.Errorf("--tenant %q has no '=': %s", spec, form)
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return Tenant{}, fmt.Errorf("--tenant %q: name %q is not valid (%s): %s", spec, name, msgs[0], form)
	}
	tenant := func(path, ns string) (Tenant, error) {
		if path == "" {
			return Tenant{}, fmt.Errorf("--tenant %q has no kubeconfig path: %s", spec, form)
		}
		return Tenant{TenantSource: observe.TenantSource{Name: name, Namespace: ns}, kubeconfig: path}, nil
	}
	if path, ok := strings.CutSuffix(rest, ":"); ok {
		return tenant(path, "") // explicitly no namespace
	}
	i := strings.LastIndex(rest, ":")
	if i < 0 {
		return tenant(rest, "")
	}
	path, ns := rest[:i], rest[i+1:]
	if path == "" && ns != "" && len(validation.IsDNS1123Label(ns)) == 0 {
		return tenant("", ns) // a namespace with no path
	}
	if path == "" || strings.ContainsRune(ns, filepath.Separator) || len(validation.IsDNS1123Label(ns)) > 0 {
		return tenant(rest, "") // the part after ':' cannot be a namespace
	}
	split, whole := exists(path), exists(rest)
	switch {
	case split && !whole:
		return tenant(path, ns)
	case whole && !split:
		return tenant(rest, "")
	case split && whole:
		return Tenant{}, fmt.Errorf("--tenant %q is ambiguous: both %s (with namespace %s) and %s exist; write %s=%s:%s for the first, or %s=%s: (trailing ':') for the second",
			spec, path, ns, rest, name, path, ns, name, rest)
	}
	return Tenant{}, fmt.Errorf("--tenant %q: no kubeconfig file: neither %s (read as KUBECONFIG:NAMESPACE with namespace %s) nor %s exists; give the path of an existing file",
		spec, path, ns, rest)
}

// setDurations sets p's fields of the checks' settings to their flags'
// values.
func (f *scopeFlags) setDurations(p *check.Policy) {
	for i, st := range check.Settings() {
		if st.Flag != "" && i < len(f.durations) {
			*st.Of(p) = f.durations[i]
		}
	}
}
