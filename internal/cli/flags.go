package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/check"
	"github.com/tether-dev/tether/internal/observe"
)

// scopeFlags are the kubectl-style flags shared by audit and fix.
type scopeFlags struct {
	kubeconfig    string
	context       string
	namespace     string
	allNamespaces bool
	selector      string
	checks        []string
	volumePrefix  string
	tenants       []string
	output        string

	allowVMIOnly        bool
	tenantAuthoritative bool
	forceDetach         bool
	staleGrace          time.Duration
	blockedGrace        time.Duration
	fenceGoneAfter      time.Duration
	controllerNamespace string
	minSeverity         string
	tenantDriver        string
	matchNodesByName    bool
}

func (f *scopeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.context, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&f.namespace, "namespace", "n", "", "namespace to look at (default: the context's namespace)")
	fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "look at all namespaces")
	fs.StringVarP(&f.selector, "selector", "l", "", "label selector on VMIs (e.g. app=db,tier!=cache)")
	fs.StringSliceVar(&f.checks, "checks", nil, "checks to run, comma separated (default: all; see `tether checks`)")
	fs.StringVar(&f.volumePrefix, "volume-prefix", "", "only volumes whose name starts with this prefix")
	fs.StringArrayVar(&f.tenants, "tenant", nil, "tenant cluster evidence: NAME=KUBECONFIG[:NAMESPACE] (repeatable); NAMESPACE is the infra namespace of its VMs (required with -A); a path that contains ':' must be unambiguous (end it with ':' for no namespace)")
	fs.StringVar(&f.tenantDriver, "tenant-driver", "", "the tenants' KubeVirt CSI driver name (default csi.kubevirt.io)")
	fs.BoolVar(&f.matchNodesByName, "match-tenant-nodes-by-name", false, "opt-in: a tenant node with no providerID, infra-vm annotations or CSINode node ID is the VM of its own name in the tenant's namespace")
	fs.StringVarP(&f.output, "output", "o", "table", "output format: table, json or yaml")
	fs.BoolVar(&f.allowVMIOnly, "allow-vmi-only-detach", false, "treat VMI-only hot-plugs (not in the VM spec) as detachable without tenant evidence")
	fs.BoolVar(&f.tenantAuthoritative, "tenant-authoritative", false, "let reachable tenant evidence override the VM spec for CSI-driver volumes")
	fs.BoolVar(&f.forceDetach, "force-detach", false, "last resort on fenced nodes: allow deleting a stale VolumeAttachment or its attacher finalizer (counted as forced)")
	fs.DurationVar(&f.staleGrace, "stale-attachment-grace", check.DefaultStaleAttachmentGrace, "report a VolumeAttachment that no pod needs only after this long")
	fs.DurationVar(&f.fenceGoneAfter, "fence-gone-nodes-after", 0, "opt-in: treat a Node that tether controller has recorded as missing for longer than this as fenced (read from its Finding records; 0: only the out-of-service taint proves a node is down)")
	fs.StringVar(&f.controllerNamespace, "controller-namespace", v1alpha1.DefaultNamespace, "namespace of tether controller, whose Finding records --fence-gone-nodes-after reads (records elsewhere are no evidence)")
	fs.DurationVar(&f.blockedGrace, "blocked-deletion-grace", check.DefaultBlockedDeletionGrace, "report an object stuck terminating only after this long")
	fs.StringVar(&f.minSeverity, "min-severity", "info", "report findings of at least this severity: info or warning")
}

// options is the validated form of the flags.
type options struct {
	config    *rest.Config
	namespace string // "" = all
	policy    check.Policy
	observe   observe.Options
	output    string
	minSev    check.Severity
}

func (f *scopeFlags) resolve() (*options, error) {
	switch f.output {
	case "table", "json", "yaml":
	default:
		return nil, fmt.Errorf("--output %q is not supported: use table, json or yaml", f.output)
	}
	var minSev check.Severity
	switch f.minSeverity {
	case "info":
		minSev = check.SeverityInfo
	case "warning":
		minSev = check.SeverityWarning
	default:
		return nil, fmt.Errorf("--min-severity %q is not supported: use info or warning", f.minSeverity)
	}
	if f.allNamespaces && f.namespace != "" {
		return nil, fmt.Errorf("--namespace and --all-namespaces exclude each other: pass one of them")
	}
	sel, err := labels.Parse(f.selector)
	if err != nil {
		return nil, fmt.Errorf("--selector %q is not a valid label selector: %v", f.selector, err)
	}
	for _, c := range f.checks {
		if _, err := check.Lookup(c); err != nil {
			return nil, fmt.Errorf("--checks: %v", err)
		}
	}
	cfg, ns, err := loadConfig(f.kubeconfig, f.context)
	if err != nil {
		return nil, err
	}
	o := &options{config: cfg, output: f.output, minSev: minSev}
	switch {
	case f.allNamespaces:
	case f.namespace != "":
		o.namespace = f.namespace
	default:
		o.namespace = ns
	}
	o.policy = check.DefaultPolicy()
	o.policy.Scope.Selector = sel
	o.policy.Scope.VolumePrefix = f.volumePrefix
	if o.namespace != "" {
		o.policy.Scope.Namespaces = []string{o.namespace}
	}
	o.policy.Checks = f.checks
	o.policy.AllowVMIOnlyDetach = f.allowVMIOnly
	o.policy.TenantAuthoritative = f.tenantAuthoritative
	o.policy.Storage.ForceDetach = f.forceDetach
	o.policy.Storage.StaleAttachmentGrace = f.staleGrace
	o.policy.Storage.BlockedDeletionGrace = f.blockedGrace
	o.policy.Storage.FenceGoneNodesAfter = f.fenceGoneAfter
	if f.fenceGoneAfter > 0 {
		if errs := validation.IsDNS1123Label(f.controllerNamespace); len(errs) > 0 {
			return nil, fmt.Errorf("--controller-namespace %q is not a namespace name: %s", f.controllerNamespace, strings.Join(errs, "; "))
		}
		o.observe.GoneNodeRecordsIn = f.controllerNamespace
	}
	o.observe.Namespace = o.namespace
	for _, spec := range f.tenants {
		t, err := ParseTenant(spec)
		if err != nil {
			return nil, err
		}
		switch {
		case t.Namespace == "" && o.namespace != "":
			t.Namespace = o.namespace // the one namespace in scope
		case t.Namespace == "":
			return nil, fmt.Errorf("--tenant %s: name the infra namespace of its VMs (NAME=KUBECONFIG:NAMESPACE, the driver's --infra-cluster-namespace): with --all-namespaces it cannot be guessed", spec)
		}
		if f.tenantDriver != "" {
			if msgs := validation.IsDNS1123Subdomain(f.tenantDriver); len(msgs) > 0 || len(f.tenantDriver) > 63 {
				return nil, fmt.Errorf("--tenant-driver %q is not a CSI driver name (a DNS subdomain of at most 63 characters, e.g. csi.kubevirt.io)", f.tenantDriver)
			}
		}
		t.Driver, t.MatchNodesByName = f.tenantDriver, f.matchNodesByName
		if t.Config, err = loadTenantConfig(t.kubeconfig); err != nil {
			return nil, fmt.Errorf("--tenant %s: %v", t.Name, err)
		}
		o.observe.Tenants = append(o.observe.Tenants, t.TenantSource)
	}
	if err := o.policy.Validate(); err != nil {
		return nil, err
	}
	return o, nil
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

func loadTenantConfig(path string) (*rest.Config, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("kubeconfig %s cannot be read: %v", path, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %v", path, err)
	}
	cfg.UserAgent = "tether"
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

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

func parseTenant(spec string, exists func(string) bool) (Tenant, error) {
	const form = "use NAME=KUBECONFIG[:NAMESPACE], e.g. guest1=/etc/tether/guest1.kubeconfig:tenant-a (a trailing ':' means no namespace)"
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
