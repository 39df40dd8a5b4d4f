package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/report/reportapi"
)

// positiveDurations are the durations that must be above zero. Every other
// duration must not be negative.
var positiveDurations = []string{"blastRadius.interval", "backoff.base", "backoff.max", "actionTimeout", "policyReports.interval"}

// Validate reports every problem at once, each naming its field and the fix.
// Parse runs it on every file; a Config built in code (Default and edits)
// must be checked with it before use.
func (c *Config) Validate() error {
	var errs []error
	if c.APIVersion != "" && c.APIVersion != APIVersion {
		errs = append(errs, fmt.Errorf("apiVersion: %q is not supported: use %q", c.APIVersion, APIVersion))
	}
	if c.Kind != "" && c.Kind != Kind {
		errs = append(errs, fmt.Errorf("kind: %q is not supported: use %q", c.Kind, Kind))
	}
	errs = append(errs, c.validateChecks()...)
	errs = append(errs, c.validateDurations()...)
	errs = append(errs, c.validateStorage()...)
	errs = append(errs, c.Scope.validate()...)
	errs = append(errs, validateTenants(c.Tenants, c.Scope.Namespaces)...)
	if c.Enabled(check.TenantNodeDown) && len(c.Tenants) == 0 {
		errs = append(errs, errors.New("checks.TenantNodeDown.enabled: fences tenant nodes, and no tenant is configured: add the tenant clusters under tenants, or set enabled: false"))
	}
	if c.TenantAuthoritative && len(c.Tenants) == 0 {
		errs = append(errs, errors.New("tenantAuthoritative: has no effect without tenants: add a tenant under tenants or set it to false"))
	}
	if c.AnomalyGuard.MaxSafe < 0 {
		errs = append(errs, fmt.Errorf("anomalyGuard.maxSafe: must not be negative, got %d (0 means the default, 25)", c.AnomalyGuard.MaxSafe))
	}
	if s := c.AnomalyGuard.Share; s < 0 || s > 1 {
		errs = append(errs, fmt.Errorf("anomalyGuard.share: a share of the subjects between 0 and 1, got %g (0 means the default, 0.10)", s))
	}
	if c.BlastRadius.MaxActions < 1 {
		errs = append(errs, fmt.Errorf("blastRadius.maxActions: must be at least 1, got %d (to never act, set dryRun: true)", c.BlastRadius.MaxActions))
	}
	if _, err := reportapi.Parse(string(c.PolicyReports.API)); err != nil {
		errs = append(errs, fmt.Errorf("policyReports.api: %w", err))
	}
	if b, m := c.Backoff.Base.Duration, c.Backoff.Max.Duration; b > 0 && m > 0 && b > m {
		errs = append(errs, fmt.Errorf("backoff: base %s is longer than max %s: make base at most max", b, m))
	}
	return errors.Join(errs...)
}

// validateChecks: every listed check exists, and only the controller's
// checks are enabled, and none that scope.selector cannot limit.
func (c *Config) validateChecks() []error {
	var errs []error
	for _, name := range sortedKeys(c.Checks) {
		if _, err := check.Lookup(name); err != nil {
			errs = append(errs, fmt.Errorf("checks.%s: %w", name, err))
		} else if c.Checks[name].Enabled && !slices.Contains(controllerChecks, name) {
			errs = append(errs, fmt.Errorf("checks.%s.enabled: the controller runs only %s; %s runs in `tether audit` and `tether fix` only: remove it or set enabled: false",
				name, strings.Join(controllerChecks, ", "), name))
		}
	}
	if c.Scope.Selector != "" {
		for _, name := range []string{check.StaleVolumeAttachment, check.BlockedDeletion} {
			if c.Enabled(name) {
				// VolumeAttachments, PVs and claims carry no VMI labels:
				// with a selector the check would silently see nothing.
				errs = append(errs, fmt.Errorf("checks.%s.enabled: %s cannot be limited by scope.selector (a label selector on VMIs): set enabled: false, or scope it with scope.namespaces instead", name, name))
			}
		}
	}
	return errs
}

// validateDurations checks every duration of c (found by eachDuration, so
// that none is left out): the positiveDurations above zero, the others not
// negative.
func (c *Config) validateDurations() []error {
	var errs []error
	eachDuration(reflect.ValueOf(*c), "", func(path string, d time.Duration) {
		switch {
		case slices.Contains(positiveDurations, path):
			positive(&errs, path, d)
		case d < 0:
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", path, d))
		}
	})
	return errs
}

// validateStorage checks the fencing rule and the opt-ins that need
// StaleVolumeAttachment.
func (c *Config) validateStorage() []error {
	var errs []error
	if d := c.Storage.FenceGoneNodesAfter.Duration; d > 0 && d < check.MinFenceGoneNodesAfter {
		errs = append(errs, fmt.Errorf("storage.fenceGoneNodesAfter: %s is too short: a live machine whose Node object was deleted re-registers within seconds to a minute; use at least %s (6m or more is advised, like the attach/detach controller's own wait), or 0 to turn the rule off", d, check.MinFenceGoneNodesAfter))
	}
	if !c.Enabled(check.StaleVolumeAttachment) {
		if c.Storage.ForceDetach {
			errs = append(errs, errors.New("storage.forceDetach: has no effect without checks.StaleVolumeAttachment.enabled: true: enable that check or remove it"))
		}
		if c.Storage.FenceGoneNodesAfter.Duration > 0 {
			errs = append(errs, errors.New("storage.fenceGoneNodesAfter: has no effect without checks.StaleVolumeAttachment.enabled: true: enable that check or set it to 0s"))
		}
	}
	return errs
}

// eachDuration calls fn with the YAML path and the value of every duration
// in v (a Config or part of one): every metav1.Duration field, and every
// *metav1.Duration field that is set, through structs, map values (in key
// order) and list items.
func eachDuration(v reflect.Value, path string, fn func(path string, d time.Duration)) {
	switch {
	case v.Type() == durationType:
		fn(path, v.Interface().(metav1.Duration).Duration)
	case v.Kind() == reflect.Pointer:
		if !v.IsNil() {
			eachDuration(v.Elem(), path, fn)
		}
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if name := fieldName(v.Type().Field(i)); name != "" {
				eachDuration(v.Field(i), join(path, name), fn)
			}
		}
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			eachDuration(v.MapIndex(k), join(path, k.String()), fn)
		}
	case v.Kind() == reflect.Slice:
		for i := range v.Len() {
			eachDuration(v.Index(i), fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
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
			errs = append(errs, fmt.Errorf("%s.name: is required: name the tenant, e.g. \"tenant1\"", field))
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
			errs = append(errs, fmt.Errorf("%s.kubeconfig: is required: the path of the tenant cluster's kubeconfig, e.g. \"/etc/tether/tenants/%s.kubeconfig\"", field, nameOr(t.Name, "tenant1")))
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
