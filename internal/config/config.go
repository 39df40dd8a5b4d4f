// Package config holds the configuration file of `tether controller`: one
// typed struct, its defaults in one place (Default), strict decoding (an
// unknown or misspelt field is an error, never silently ignored) and
// validation that names the field and the fix.
//
// The package only reads and checks; it never talks to a cluster and never
// reads the files a configuration points to (tenant kubeconfigs).
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/check"
)

// APIVersion and Kind identify the file format.
const (
	APIVersion = "tether.dev/v1alpha1"
	Kind       = "ControllerConfig"
)

// Defaults (contract: documented in docs/controller.md).
const (
	DefaultGracePeriod         = 10 * time.Minute
	DefaultActionTimeout       = 2 * time.Minute
	DefaultMaxActions          = 5
	DefaultBlastRadiusInterval = 10 * time.Minute
	DefaultBackoffBase         = 5 * time.Second
	DefaultBackoffMax          = 5 * time.Minute
)

// controllerChecks are the checks the controller runs. OrphanHotplugVolume
// is decided per VMI (the VMI, its VM, the KubeVirt feature gates and the
// tenants' attachments); the storage checks are decided from cluster-wide
// caches of Nodes, VolumeAttachments, PVs, claims and pods. The other checks
// run in `tether audit` and `tether fix` only.
var controllerChecks = []string{check.OrphanHotplugVolume, check.StaleVolumeAttachment, check.MultiAttachConflict, check.BlockedDeletion}

// storageChecks are the controller checks decided from the storage caches.
var storageChecks = []string{check.StaleVolumeAttachment, check.MultiAttachConflict, check.BlockedDeletion}

// ControllerChecks returns the names of the checks the controller runs.
func ControllerChecks() []string { return slices.Clone(controllerChecks) }

// StorageChecks returns the names of the controller checks that are decided
// from the storage caches (Nodes, VolumeAttachments, PVs, claims, pods).
func StorageChecks() []string { return slices.Clone(storageChecks) }

// ErrNoChecks is returned by Policy when no check is enabled. The check
// package reads an empty list as "every check", so a policy is never built
// from it; a controller may treat this as "nothing to do".
var ErrNoChecks = errors.New("no check is enabled: set checks.<name>.enabled: true for " +
	strings.Join(controllerChecks, ", "))

// Config is the controller's configuration file.
type Config struct {
	// APIVersion must be "tether.dev/v1alpha1"; empty means that.
	APIVersion string `json:"apiVersion"`
	// Kind must be "ControllerConfig"; empty means that.
	Kind string `json:"kind"`
	// DryRun: record findings, never act.
	DryRun bool `json:"dryRun"`
	// Checks by check name. A check that is not listed, or not enabled,
	// does not run. The controller runs OrphanHotplugVolume and the storage
	// checks (StaleVolumeAttachment, MultiAttachConflict, BlockedDeletion);
	// enabling any other check is an error (they run in `tether audit/fix`).
	Checks map[string]CheckConfig `json:"checks"`
	// Storage is the policy of the storage checks.
	Storage StorageConfig `json:"storage"`
	// Scope limits what is looked at and acted on.
	Scope ScopeConfig `json:"scope"`
	// AllowVMIOnlyDetach: see check.Policy.
	AllowVMIOnlyDetach bool `json:"allowVMIOnlyDetach"`
	// TenantAuthoritative: see check.Policy; needs at least one tenant.
	TenantAuthoritative bool `json:"tenantAuthoritative"`
	// Tenants are clusters whose VolumeAttachments are evidence.
	Tenants []TenantConfig `json:"tenants"`
	// BlastRadius bounds how many actions happen in a time window.
	BlastRadius BlastRadiusConfig `json:"blastRadius"`
	// Backoff between failed attempts on one finding.
	Backoff BackoffConfig `json:"backoff"`
	// ActionTimeout bounds one action, including waiting for convergence.
	ActionTimeout metav1.Duration `json:"actionTimeout"`
	// Protection keeps the tether.dev/in-use finalizer on what VMs in
	// scope use (docs/protection.md).
	Protection ProtectionConfig `json:"protection"`
	// DanglingOnRestart removes dangling hot-plugged references of VMs in
	// scope that are about to start (docs/controller.md).
	DanglingOnRestart DanglingOnRestartConfig `json:"danglingOnRestart"`
}

// DanglingOnRestartConfig configures the "on restart" mode: when a VM in
// scope is about to start, or fails to start, and its spec refers to a
// hot-plugged PVC or DataVolume that is gone, the reference is removed with
// KubeVirt's VM-level removevolume (DanglingVolumeReference's action, with
// its live re-check). Boot and other non-hot-pluggable disks are only
// reported.
type DanglingOnRestartConfig struct {
	// Enabled runs the mode (opt-in). It may be enabled with no check
	// enabled; it does not enable DanglingVolumeReference for running VMs.
	Enabled bool `json:"enabled"`
	// Settle is how long a reference must stay dangling, seen on two passes
	// at least this far apart, before it is removed: a claim missing for a
	// moment (a restore, a GitOps apply of the VM before its PVC) is left
	// alone. Default 30s.
	Settle metav1.Duration `json:"settle"`
}

// DefaultDanglingSettle is the default danglingOnRestart.settle.
const DefaultDanglingSettle = 30 * time.Second

// StorageConfig is check.StoragePolicy in file form: when the storage
// checks report, and the two opt-ins about fencing and forcing.
type StorageConfig struct {
	// StaleAttachmentGrace: a VolumeAttachment no pod needs is reported
	// after this long (default 5m).
	StaleAttachmentGrace metav1.Duration `json:"staleAttachmentGrace"`
	// MultiAttachGrace: a pod waiting for a volume held elsewhere is
	// reported after this long (default 1m).
	MultiAttachGrace metav1.Duration `json:"multiAttachGrace"`
	// BlockedDeletionGrace: an object stuck terminating is reported after
	// this long (default 1m).
	BlockedDeletionGrace metav1.Duration `json:"blockedDeletionGrace"`
	// FenceGoneNodesAfter, when set, turns on the rule "a Node object that
	// the controller has seen missing for longer than this is fenced"
	// (opt-in; 0 keeps it off, and only the out-of-service taint fences).
	FenceGoneNodesAfter metav1.Duration `json:"fenceGoneNodesAfter"`
	// ForceDetach accepts the last resort on fenced nodes: deleting a stale
	// VolumeAttachment, or its attacher finalizer (counted as forced).
	ForceDetach bool `json:"forceDetach"`
}

// ProtectionConfig configures the protection of VM dependents.
type ProtectionConfig struct {
	// Enabled runs the protection reconciler (opt-in). It protects the
	// dependents of the VMs in scope.namespaces whose labels match
	// scope.selector.
	Enabled bool `json:"enabled"`
}

// CheckConfig configures one check.
type CheckConfig struct {
	// Enabled runs the check (opt-in).
	Enabled bool `json:"enabled"`
	// GracePeriod is how long a finding must persist, counted from its
	// first observation, before its action is taken. Zero is allowed.
	GracePeriod metav1.Duration `json:"gracePeriod"`
}

// ScopeConfig is check.Scope in file form.
type ScopeConfig struct {
	// Namespaces to look at; empty means all.
	Namespaces []string `json:"namespaces"`
	// Selector on VMI labels, in kubectl -l syntax; empty means all.
	Selector string `json:"selector"`
	// VolumePrefix limits the checks to volumes whose name starts with it.
	VolumePrefix string `json:"volumePrefix"`
}

// TenantConfig is a tenant cluster, like the CLI's --tenant flag.
type TenantConfig struct {
	// Name identifies the tenant in findings (a DNS-1123 label).
	Name string `json:"name"`
	// Kubeconfig is the path of the tenant cluster's kubeconfig.
	Kubeconfig string `json:"kubeconfig"`
	// Namespace is the infra namespace whose VMs are the tenant's nodes
	// (the driver's --infra-cluster-namespace). It may be left empty only
	// when scope.namespaces names exactly one namespace, and then is that
	// namespace. When scope.namespaces is set, it must be one of them.
	Namespace string `json:"namespace"`
	// Driver is the name of the tenant's KubeVirt CSI driver; empty means
	// csi.kubevirt.io.
	Driver string `json:"driver,omitempty"`
	// MatchNodesByName lets a tenant node that names no infra VM (no
	// providerID kubevirt://, no infra-vm annotations, no CSINode node ID)
	// be the VM of its own name in Namespace. Needs Namespace.
	MatchNodesByName bool `json:"matchNodesByName,omitempty"`
}

// BlastRadiusConfig allows at most MaxActions actions per Interval.
type BlastRadiusConfig struct {
	MaxActions int             `json:"maxActions"`
	Interval   metav1.Duration `json:"interval"`
}

// BackoffConfig is an exponential backoff from Base, capped at Max.
type BackoffConfig struct {
	Base metav1.Duration `json:"base"`
	Max  metav1.Duration `json:"max"`
}

// Default returns the defaults: no check enabled (each one is opt-in, with
// a 10m grace period once enabled), everything in scope, no opt-ins, at
// most 5 actions per 10m, backoff from 5s to 5m, 2m per action.
func Default() Config {
	return Config{
		APIVersion:    APIVersion,
		Kind:          Kind,
		Checks:        map[string]CheckConfig{},
		BlastRadius:   BlastRadiusConfig{MaxActions: DefaultMaxActions, Interval: metav1.Duration{Duration: DefaultBlastRadiusInterval}},
		Backoff:       BackoffConfig{Base: metav1.Duration{Duration: DefaultBackoffBase}, Max: metav1.Duration{Duration: DefaultBackoffMax}},
		ActionTimeout: metav1.Duration{Duration: DefaultActionTimeout},
		DanglingOnRestart: DanglingOnRestartConfig{
			Settle: metav1.Duration{Duration: DefaultDanglingSettle},
		},
	}
}

// Load reads the file at path, decodes it strictly over the defaults and
// validates it. An empty path gives the defaults. Errors name the file.
func Load(path string) (*Config, error) {
	if path == "" {
		c := Default()
		return &c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML (or JSON) strictly over the defaults and validates the
// result. Unknown and duplicate fields are errors that name the field.
func Parse(data []byte) (*Config, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if err := checkDurations(js); err != nil {
		return nil, err
	}
	c := Default()
	strict, err := sigsjson.UnmarshalStrict(js, &c)
	if err != nil {
		return nil, decodeError(js, err)
	}
	if len(strict) > 0 {
		errs := make([]error, len(strict))
		for i, e := range strict {
			errs[i] = fmt.Errorf("%w (see docs/controller.md for the fields)", e)
		}
		return nil, errors.Join(errs...)
	}
	if err := defaultGracePeriods(js, &c); err != nil {
		return nil, err
	}
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = Kind
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// decodeError rewords the decoder's type errors to lead with the field path
// (the decoder drops map keys and list indexes from it) and to speak YAML.
func decodeError(js []byte, err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("decoding: %w", err)
	}
	got, want := yamlKind(te.Value), yamlType(te.Type)
	field := te.Field
	if field == "" {
		return fmt.Errorf("the file must be a mapping of fields (apiVersion, kind, checks, ...), got a %s", got)
	}
	field = locate(js, field)
	return fmt.Errorf("%s: got a %s, want a %s", field, got, want)
}

// locate adds the map key or list index the decoder leaves out of a field
// path inside checks or tenants.
func locate(js []byte, field string) string {
	var raw struct {
		Checks  map[string]json.RawMessage `json:"checks"`
		Tenants []json.RawMessage          `json:"tenants"`
	}
	if json.Unmarshal(js, &raw) != nil {
		return field
	}
	top, sub, _ := strings.Cut(field, ".")
	if sub != "" {
		sub = "." + sub
	}
	switch top {
	case "checks":
		for _, name := range sortedKeys(raw.Checks) {
			var cc CheckConfig
			if json.Unmarshal(raw.Checks[name], &cc) != nil {
				return "checks." + name + sub
			}
		}
	case "tenants":
		for i, t := range raw.Tenants {
			var tc TenantConfig
			if json.Unmarshal(t, &tc) != nil {
				return fmt.Sprintf("tenants[%d]%s", i, sub)
			}
		}
	}
	return field
}

// yamlKind names a JSON value kind as YAML users know it.
func yamlKind(v string) string {
	switch {
	case v == "object":
		return "mapping"
	case v == "array":
		return "list"
	case strings.HasPrefix(v, "number"):
		return "number"
	default:
		return v
	}
}

// yamlType names what a Go type accepts, in YAML terms.
func yamlType(t reflect.Type) string {
	if t == nil {
		return "value of another type"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "list"
	case reflect.Map, reflect.Struct:
		return "mapping"
	default:
		return t.String()
	}
}

// checkDurations reports duration fields whose value does not parse, with
// their path; the decoder's own error would not name the field.
func checkDurations(js []byte) error {
	var raw map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &raw); err != nil {
		return nil // not an object: the typed decode reports it
	}
	var errs []error
	at := func(path string, v any, ok bool) {
		if !ok || v == nil {
			return
		}
		s, isString := v.(string)
		if !isString {
			errs = append(errs, fmt.Errorf("%s: %v is not a duration: write it as a string with a unit, e.g. \"90s\" or \"10m\"", path, v))
			return
		}
		if _, err := time.ParseDuration(s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a duration: write it with a unit, e.g. \"90s\" or \"10m\"", path, s))
		}
	}
	field := func(parent any, name string) (any, bool) {
		m, ok := parent.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok := m[name]
		return v, ok
	}
	v, ok := field(raw, "actionTimeout")
	at("actionTimeout", v, ok)
	br, _ := field(raw, "blastRadius")
	v, ok = field(br, "interval")
	at("blastRadius.interval", v, ok)
	bo, _ := field(raw, "backoff")
	v, ok = field(bo, "base")
	at("backoff.base", v, ok)
	v, ok = field(bo, "max")
	at("backoff.max", v, ok)
	st, _ := field(raw, "storage")
	for _, name := range []string{"staleAttachmentGrace", "multiAttachGrace", "blockedDeletionGrace", "fenceGoneNodesAfter"} {
		v, ok = field(st, name)
		at("storage."+name, v, ok)
	}
	if checks, ok := raw["checks"].(map[string]any); ok {
		for _, name := range sortedKeys(checks) {
			v, ok := field(checks[name], "gracePeriod")
			at("checks."+name+".gracePeriod", v, ok)
		}
	}
	return errors.Join(errs...)
}

// defaultGracePeriods gives every listed check without a gracePeriod field
// the default one. (The decoder starts each map value from zero, so the
// default cannot be put in place before decoding.)
func defaultGracePeriods(js []byte, c *Config) error {
	var raw struct {
		Checks map[string]map[string]any `json:"checks"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &raw); err != nil {
		return fmt.Errorf("checks: %w", err)
	}
	for name, fields := range raw.Checks {
		if _, set := fields["gracePeriod"]; set {
			continue
		}
		cc := c.Checks[name]
		cc.GracePeriod = metav1.Duration{Duration: DefaultGracePeriod}
		c.Checks[name] = cc
	}
	return nil
}

// Validate reports every problem at once, each naming its field and the fix.
func (c *Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.APIVersion != "" && c.APIVersion != APIVersion {
		add("apiVersion", "%q is not supported: use %q", c.APIVersion, APIVersion)
	}
	if c.Kind != "" && c.Kind != Kind {
		add("kind", "%q is not supported: use %q", c.Kind, Kind)
	}
	for _, name := range sortedKeys(c.Checks) {
		if _, err := check.Lookup(name); err != nil {
			add("checks."+name, "%v", err)
		} else if c.Checks[name].Enabled && !slices.Contains(controllerChecks, name) {
			add("checks."+name+".enabled", "the controller runs only %s; %s runs in `tether audit` and `tether fix` only: remove it or set enabled: false",
				strings.Join(controllerChecks, ", "), name)
		}
		if g := c.Checks[name].GracePeriod.Duration; g < 0 {
			add("checks."+name+".gracePeriod", "must not be negative, got %s", g)
		}
	}
	if d := c.DanglingOnRestart.Settle.Duration; d < 0 {
		add("danglingOnRestart.settle", "must not be negative, got %s", d)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"storage.staleAttachmentGrace", c.Storage.StaleAttachmentGrace.Duration},
		{"storage.multiAttachGrace", c.Storage.MultiAttachGrace.Duration},
		{"storage.blockedDeletionGrace", c.Storage.BlockedDeletionGrace.Duration},
		{"storage.fenceGoneNodesAfter", c.Storage.FenceGoneNodesAfter.Duration},
	} {
		if d.v < 0 {
			add(d.field, "must not be negative, got %s", d.v)
		}
	}
	if d := c.Storage.FenceGoneNodesAfter.Duration; d > 0 && d < check.MinFenceGoneNodesAfter {
		add("storage.fenceGoneNodesAfter", "%s is too short: a live machine whose Node object was deleted re-registers within seconds to a minute; use at least %s (6m or more is advised, like the attach/detach controller's own wait), or 0 to turn the rule off", d, check.MinFenceGoneNodesAfter)
	}
	if !c.Enabled(check.StaleVolumeAttachment) {
		if c.Storage.ForceDetach {
			add("storage.forceDetach", "has no effect without checks.StaleVolumeAttachment.enabled: true: enable that check or remove it")
		}
		if c.Storage.FenceGoneNodesAfter.Duration > 0 {
			add("storage.fenceGoneNodesAfter", "has no effect without checks.StaleVolumeAttachment.enabled: true: enable that check or set it to 0s")
		}
	}
	if c.Scope.Selector != "" {
		for _, name := range []string{check.StaleVolumeAttachment, check.BlockedDeletion} {
			if c.Enabled(name) {
				// VolumeAttachments, PVs and claims carry no VMI labels:
				// with a selector the check would silently see nothing.
				add("checks."+name+".enabled", "%s cannot be limited by scope.selector (a label selector on VMIs): set enabled: false, or scope it with scope.namespaces instead", name)
			}
		}
	}
	errs = append(errs, c.Scope.validate()...)
	errs = append(errs, validateTenants(c.Tenants, c.Scope.Namespaces)...)
	if c.TenantAuthoritative && len(c.Tenants) == 0 {
		add("tenantAuthoritative", "has no effect without tenants: add a tenant under tenants or set it to false")
	}
	if c.BlastRadius.MaxActions < 1 {
		add("blastRadius.maxActions", "must be at least 1, got %d (to never act, set dryRun: true)", c.BlastRadius.MaxActions)
	}
	positive(&errs, "blastRadius.interval", c.BlastRadius.Interval.Duration)
	positive(&errs, "backoff.base", c.Backoff.Base.Duration)
	positive(&errs, "backoff.max", c.Backoff.Max.Duration)
	if b, m := c.Backoff.Base.Duration, c.Backoff.Max.Duration; b > 0 && m > 0 && b > m {
		add("backoff", "base %s is longer than max %s: make base at most max", b, m)
	}
	positive(&errs, "actionTimeout", c.ActionTimeout.Duration)
	return errors.Join(errs...)
}

func positive(errs *[]error, field string, d time.Duration) {
	if d <= 0 {
		*errs = append(*errs, fmt.Errorf("%s: must be positive, got %s (write e.g. \"30s\" or \"5m\")", field, d))
	}
}

func (s ScopeConfig) validate() []error {
	var errs []error
	for i, ns := range s.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("scope.namespaces[%d]: %q is not a valid namespace name: %s", i, ns, msgs[0]))
		}
	}
	if _, err := labels.Parse(s.Selector); err != nil {
		errs = append(errs, fmt.Errorf("scope.selector: %q does not parse: %v (use kubectl -l syntax, e.g. \"app=db,tier!=test\")", s.Selector, err))
	}
	return errs
}

func validateTenants(ts []TenantConfig, scope []string) []error {
	var errs []error
	seen := map[string]int{}
	for i, t := range ts {
		field := fmt.Sprintf("tenants[%d]", i)
		switch {
		case t.Name == "":
			errs = append(errs, fmt.Errorf("%s.name: is required: name the tenant, e.g. \"guest1\"", field))
		case len(validation.IsDNS1123Label(t.Name)) > 0:
			errs = append(errs, fmt.Errorf("%s.name: %q is not valid: %s", field, t.Name, validation.IsDNS1123Label(t.Name)[0]))
		default:
			if j, dup := seen[t.Name]; dup {
				errs = append(errs, fmt.Errorf("%s.name: %q is already the name of tenants[%d]: give each tenant its own name", field, t.Name, j))
			} else {
				seen[t.Name] = i
			}
		}
		if t.Kubeconfig == "" {
			errs = append(errs, fmt.Errorf("%s.kubeconfig: is required: the path of the tenant cluster's kubeconfig, e.g. \"/etc/tether/tenants/%s.kubeconfig\"", field, nameOr(t.Name, "guest1")))
		}
		if t.Driver != "" {
			if msgs := validation.IsDNS1123Subdomain(t.Driver); len(msgs) > 0 || len(t.Driver) > 63 {
				errs = append(errs, fmt.Errorf("%s.driver: %q is not a CSI driver name (a DNS subdomain of at most 63 characters, e.g. \"csi.kubevirt.io\")", field, t.Driver))
			}
		}
		if t.Namespace == "" && len(scope) != 1 {
			errs = append(errs, fmt.Errorf("%s.namespace: is required when scope.namespaces does not name exactly one namespace: give the infra namespace whose VMs are %s's nodes (the driver's --infra-cluster-namespace), e.g. \"tenant-a\"",
				field, nameOr(t.Name, "the tenant")))
		}
		if t.MatchNodesByName && t.Namespace == "" {
			errs = append(errs, fmt.Errorf("%s.matchNodesByName: needs %s.namespace: nodes are matched by name in that namespace only", field, field))
		}
		if t.Namespace != "" {
			if msgs := validation.IsDNS1123Label(t.Namespace); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s.namespace: %q is not a valid namespace name: %s", field, t.Namespace, msgs[0]))
			} else if len(scope) > 0 && !slices.Contains(scope, t.Namespace) {
				// The caches hold only the scope's namespaces: the tenant's
				// VMIs could never be read.
				errs = append(errs, fmt.Errorf("%s.namespace: %q is not in scope.namespaces (%s): add it there, or leave the tenant's namespace empty to mean those namespaces",
					field, t.Namespace, strings.Join(scope, ", ")))
			}
		}
	}
	return errs
}

func nameOr(name, alt string) string {
	if name == "" || len(validation.IsDNS1123Label(name)) > 0 {
		return alt
	}
	return name
}

// Enabled reports whether the check is enabled.
func (c *Config) Enabled(name string) bool {
	return c.Checks[name].Enabled
}

// Grace is the check's grace period; DefaultGracePeriod for a check that is
// not listed.
func (c *Config) Grace(name string) time.Duration {
	if cc, ok := c.Checks[name]; ok {
		return cc.GracePeriod.Duration
	}
	return DefaultGracePeriod
}

// VMSelector is scope.selector parsed, for VM labels (protection).
func (c *Config) VMSelector() (labels.Selector, error) {
	sel, err := labels.Parse(c.Scope.Selector)
	if err != nil {
		return nil, fmt.Errorf("scope.selector: %w", err)
	}
	return sel, nil
}

// Policy builds the checks' policy: the enabled checks (in check.Names
// order), the scope and the opt-ins. It validates the configuration first,
// and returns ErrNoChecks when no check is enabled.
func (c *Config) Policy() (check.Policy, error) {
	if err := c.Validate(); err != nil {
		return check.Policy{}, err
	}
	p := check.DefaultPolicy()
	for _, name := range check.Names() {
		if c.Enabled(name) {
			p.Checks = append(p.Checks, name)
		}
	}
	if len(p.Checks) == 0 {
		return check.Policy{}, ErrNoChecks
	}
	return c.withScope(p)
}

// DanglingPolicy is the policy of the "on restart" mode: only
// DanglingVolumeReference, named (which makes its removal of a hot-plugged
// reference eligible), with the configuration's scope and opt-ins. It does
// not depend on checks.
func (c *Config) DanglingPolicy() (check.Policy, error) {
	if err := c.Validate(); err != nil {
		return check.Policy{}, err
	}
	p := check.DefaultPolicy()
	p.Checks = []string{check.DanglingVolumeReference}
	return c.withScope(p)
}

// withScope adds the scope and the opt-ins to p and validates it.
func (c *Config) withScope(p check.Policy) (check.Policy, error) {
	sel, err := labels.Parse(c.Scope.Selector)
	if err != nil { // unreachable after Validate; kept for safety
		return check.Policy{}, fmt.Errorf("scope.selector: %w", err)
	}
	p.Scope = check.Scope{
		Namespaces:   slices.Clone(c.Scope.Namespaces),
		Selector:     sel,
		VolumePrefix: c.Scope.VolumePrefix,
	}
	p.AllowVMIOnlyDetach = c.AllowVMIOnlyDetach
	p.TenantAuthoritative = c.TenantAuthoritative
	p.Storage = check.StoragePolicy{
		StaleAttachmentGrace: c.Storage.StaleAttachmentGrace.Duration,
		MultiAttachGrace:     c.Storage.MultiAttachGrace.Duration,
		BlockedDeletionGrace: c.Storage.BlockedDeletionGrace.Duration,
		FenceGoneNodesAfter:  c.Storage.FenceGoneNodesAfter.Duration,
		ForceDetach:          c.Storage.ForceDetach,
	}
	if err := p.Validate(); err != nil {
		return check.Policy{}, err
	}
	return p, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
