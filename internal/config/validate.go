package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tether-dev/tether/internal/check"
)

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
