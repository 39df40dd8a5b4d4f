// Package config holds the configuration file of `tether controller`: one
// typed struct, its defaults in one place (Default), strict decoding (an
// unknown or misspelt field is an error, never silently ignored) and
// validation that names the field and the fix.
//
// config.go holds the types, the defaults and what is derived from a valid
// Config; decode.go turns a file into a Config; validate.go checks one.
//
// The package only reads and checks; it never talks to a cluster and never
// reads the files a configuration points to (tenant kubeconfigs).
package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/report/reportapi"
)

// APIVersion and Kind identify the file format.
const (
	APIVersion = "tether.dev/v1alpha1"
	Kind       = "ControllerConfig"
)

// Defaults (contract: documented in docs/controller.md).
const (
	// DefaultGracePeriod is a check's gracePeriod ("act after") when the
	// file does not set one.
	DefaultGracePeriod   = 10 * time.Minute
	DefaultActionTimeout = 2 * time.Minute
	// DefaultControllerMaxActions is blastRadius.maxActions: actions of the
	// controller per DefaultBlastRadiusInterval, across all checks.
	DefaultControllerMaxActions = 5
	DefaultBlastRadiusInterval  = 10 * time.Minute
	DefaultBackoffBase          = 5 * time.Second
	DefaultBackoffMax           = 5 * time.Minute
)

// controllerChecks are the checks the controller runs: those whose row
// names a controller loop (check.All). OrphanHotplugVolume and the tenant
// attach checks are decided per VMI (the VMI, its VM, the KubeVirt feature
// gates and the tenants' attachments); the storage checks from
// cluster-wide caches of Nodes, VolumeAttachments, PVs, claims and pods;
// the report-only StuckHotplugPhase, SharedClaimConflict and
// InterruptedVolumeMigration per namespace. The other checks run in
// `tether audit` and `tether fix` only.
var controllerChecks = check.InLoop()

// storageChecks are the controller checks decided from the storage caches.
var storageChecks = check.InLoop(check.LoopStorage)

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
	// does not run. The controller runs the checks ControllerChecks names;
	// enabling any other check is an error (they run in `tether audit/fix`).
	Checks map[string]CheckConfig `json:"checks"`
	// Storage is the policy of the storage checks.
	Storage StorageConfig `json:"storage"`
	// Hotplug holds the report-after graces of the hot-plug checks of the
	// drift users report now.
	Hotplug HotplugConfig `json:"hotplug"`
	// Fencing is TenantNodeDown's policy (docs/checks/TenantNodeDown.md).
	Fencing FencingConfig `json:"fencing"`
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
	// AnomalyGuard bounds the findings safe to act on at once before the
	// controller's anomaly guard trips (docs/controller.md).
	AnomalyGuard AnomalyGuardConfig `json:"anomalyGuard"`
	// PolicyReports also writes the open findings as policy reports
	// (docs/reports.md).
	PolicyReports PolicyReportsConfig `json:"policyReports"`
}

// AnomalyGuardConfig is the limit of the controller's anomaly guard on the
// findings safe to act on at once: the larger of MaxSafe and Share of the
// subjects (VMIs and tenant nodes). Zero values mean the defaults of
// `tether fix`'s guard: 25 and 0.10.
type AnomalyGuardConfig struct {
	MaxSafe int     `json:"maxSafe"`
	Share   float64 `json:"share"`
}

// PolicyReportsConfig configures the policy reports the controller keeps in
// step with its open findings: one namespaced report per namespace with
// findings, and the cluster report.
type PolicyReportsConfig struct {
	// Enabled writes them (opt-in; `tether controller --policy-reports`).
	Enabled bool `json:"enabled"`
	// API is the report API: wgpolicyk8s.io/v1alpha2 (PolicyReport, the
	// default when empty) or openreports.io/v1alpha1 (Report). Validate
	// checks it; what reads a valid Config uses it as it is.
	API reportapi.API `json:"api"`
	// Interval is the shortest time between two writes of one report: the
	// changes of a busy cluster are batched into one write per report per
	// interval. Default 10s.
	Interval metav1.Duration `json:"interval"`
}

// DefaultPolicyReportInterval is the default policyReports.interval.
const DefaultPolicyReportInterval = 10 * time.Second

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
//
// Its *Grace fields say when a check first reports ("report after"); a
// check's gracePeriod says when the controller acts on what is reported
// ("act after"). For StaleVolumeAttachment they add up: with the defaults,
// a VolumeAttachment no pod needs is reported after 5m and acted on 10m
// later at the earliest, 15m in all (one whose node or PV is gone is
// reported at once).
type StorageConfig struct {
	// StaleAttachmentGrace (report after): a VolumeAttachment no pod needs
	// is reported as StaleVolumeAttachment only after this long. Zero means
	// check.DefaultStaleAttachmentGrace (5m).
	StaleAttachmentGrace metav1.Duration `json:"staleAttachmentGrace"`
	// MultiAttachGrace (report after): a pod waiting for a volume held
	// elsewhere is reported as MultiAttachConflict only once it is this
	// old. Zero means check.DefaultMultiAttachGrace (1m).
	MultiAttachGrace metav1.Duration `json:"multiAttachGrace"`
	// BlockedDeletionGrace (report after): an object stuck terminating is
	// reported as BlockedDeletion only after this long. Zero means
	// check.DefaultBlockedDeletionGrace (1m).
	BlockedDeletionGrace metav1.Duration `json:"blockedDeletionGrace"`
	// FenceGoneNodesAfter, when set, turns on the rule "a Node object that
	// the controller has seen missing for longer than this is fenced"
	// (opt-in; 0 keeps it off, and only the out-of-service taint fences).
	FenceGoneNodesAfter metav1.Duration `json:"fenceGoneNodesAfter"`
	// ForceDetach accepts the last resort on fenced nodes: deleting a stale
	// VolumeAttachment, or its attacher finalizer (counted as forced).
	ForceDetach bool `json:"forceDetach"`
}

// HotplugConfig holds the report-after graces of the tenant attach checks
// and StuckHotplugPhase (the CLI's --tenant-attach-grace and
// --stuck-phase-grace).
type HotplugConfig struct {
	// TenantAttachGrace (report after): PhantomAttach and
	// AttachAlreadyPresent hold tenant VolumeAttachments and VMIs younger
	// than this. Zero means check.DefaultTenantAttachGrace (5m).
	TenantAttachGrace metav1.Duration `json:"tenantAttachGrace"`
	// StuckPhaseGrace (report after): StuckHotplugPhase calls a phase stuck
	// only after this long. Zero means check.DefaultStuckPhaseGrace (10m).
	StuckPhaseGrace metav1.Duration `json:"stuckPhaseGrace"`
}

// FencingConfig is TenantNodeDown's report-after time (the CLI's
// --fence-after). The check runs when checks.TenantNodeDown is enabled; it
// reads the tenants, and its action writes to them (the opt-in tenant-side
// role config/rbac/tenant-fencer.yaml, `tether manifests tenant --fence`).
type FencingConfig struct {
	// FenceAfter (report after): a tenant Node whose infra VM is down is
	// fenced only once it has been NotReady this long. Zero means
	// check.DefaultFenceAfter (1m).
	FenceAfter metav1.Duration `json:"fenceAfter"`
	// UnfenceSettle: once tether removed its out-of-service taint, the
	// tenant Node stays cordoned this long before tether uncordons it, so
	// that the controllers reading the taint from their caches have seen
	// it go. Zero means check.DefaultUnfenceSettle (1m).
	UnfenceSettle metav1.Duration `json:"unfenceSettle"`
}

// ProtectionConfig configures the protection of VM dependents.
type ProtectionConfig struct {
	// Enabled runs the protection reconciler (opt-in). It protects the
	// dependents of the VMs in scope.namespaces whose labels match
	// scope.selector.
	Enabled bool `json:"enabled"`
	// ReleaseDelay holds the release of a protected object being deleted
	// until this long after its deletion, so that the final live LIST of
	// VMs starts after every VM write admitted before the deletion has been
	// stored. It must exceed the longest timeoutSeconds of the validating
	// webhooks that see VM writes (at most 30s) plus the clock skew between
	// the API server and the controller (docs/protection.md). Default 35s;
	// 0s releases at once.
	ReleaseDelay metav1.Duration `json:"releaseDelay"`
}

// DefaultReleaseDelay is the default protection.releaseDelay: the longest
// timeout a validating webhook may have (30s) and 5s for skew.
const DefaultReleaseDelay = 35 * time.Second

// CheckConfig configures one check.
type CheckConfig struct {
	// Enabled runs the check (opt-in).
	Enabled bool `json:"enabled"`
	// GracePeriod (act after): the controller takes a reported finding's
	// action only once it has been safe this long without interruption
	// (from the Finding's status.safeSince), on top of any "report after"
	// time (see StorageConfig). DefaultGracePeriod when the file leaves it
	// out; an explicit 0s is kept.
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
// a 10m gracePeriod once enabled), everything in scope, the storage checks'
// own "report after" defaults, no opt-ins, at most 5 actions per 10m,
// backoff from 5s to 5m, 2m per action.
func Default() Config {
	return Config{
		APIVersion:    APIVersion,
		Kind:          Kind,
		Checks:        map[string]CheckConfig{},
		BlastRadius:   BlastRadiusConfig{MaxActions: DefaultControllerMaxActions, Interval: metav1.Duration{Duration: DefaultBlastRadiusInterval}},
		Backoff:       BackoffConfig{Base: metav1.Duration{Duration: DefaultBackoffBase}, Max: metav1.Duration{Duration: DefaultBackoffMax}},
		ActionTimeout: metav1.Duration{Duration: DefaultActionTimeout},
		Protection:    ProtectionConfig{ReleaseDelay: metav1.Duration{Duration: DefaultReleaseDelay}},
		DanglingOnRestart: DanglingOnRestartConfig{
			Settle: metav1.Duration{Duration: DefaultDanglingSettle},
		},
		PolicyReports: PolicyReportsConfig{Interval: metav1.Duration{Duration: DefaultPolicyReportInterval}},
	}
}

// Enabled reports whether the check is enabled.
func (c *Config) Enabled(name string) bool {
	return c.Checks[name].Enabled
}

// Grace is the check's gracePeriod ("act after"); DefaultGracePeriod for a
// check that is not listed.
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
// order), the scope and the opt-ins. It returns ErrNoChecks when no check is
// enabled. c must be valid: from Parse or Load, or built in code and
// checked with Validate; Policy does not validate it again.
func (c *Config) Policy() (check.Policy, error) {
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
// not depend on checks. Like Policy, it expects a valid c.
func (c *Config) DanglingPolicy() (check.Policy, error) {
	p := check.DefaultPolicy()
	p.Checks = []string{check.DanglingVolumeReference}
	return c.withScope(p)
}

// withScope adds the scope and the opt-ins to p and checks the result with
// check.Policy.Validate (the check package's own rules for a policy).
func (c *Config) withScope(p check.Policy) (check.Policy, error) {
	sel, err := labels.Parse(c.Scope.Selector)
	if err != nil { // a valid c always parses
		return check.Policy{}, fmt.Errorf("scope.selector: %w", err)
	}
	p.Scope = check.Scope{
		Namespaces:   slices.Clone(c.Scope.Namespaces),
		Selector:     sel,
		VolumePrefix: c.Scope.VolumePrefix,
	}
	p.AllowVMIOnlyDetach = c.AllowVMIOnlyDetach
	p.TenantAuthoritative = c.TenantAuthoritative
	p.TenantAttachGrace = c.Hotplug.TenantAttachGrace.Duration
	p.StuckPhaseGrace = c.Hotplug.StuckPhaseGrace.Duration
	p.FenceAfter = c.Fencing.FenceAfter.Duration
	p.UnfenceSettle = c.Fencing.UnfenceSettle.Duration
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

// durationType is the type of every duration of the file.
var durationType = reflect.TypeFor[metav1.Duration]()

// fieldName is the name of a struct field in the file, "" for a field the
// file cannot set.
func fieldName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch {
	case !f.IsExported() || name == "-":
		return ""
	case name == "":
		return f.Name
	}
	return name
}

// join adds a field name or map key to a YAML path.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
