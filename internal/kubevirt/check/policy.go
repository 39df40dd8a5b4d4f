package check

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultMinAttachmentPodAge is how old an attachment pod must be before it
// can be deleted: long enough for virt-controller to record a new pod in the
// VMI status.
const DefaultMinAttachmentPodAge = 2 * time.Minute

// DefaultTenantAttachGrace is how long a tenant VolumeAttachment and the
// VMI of its node must exist before PhantomAttach and AttachAlreadyPresent
// report them: longer than the 2 minutes the KubeVirt CSI driver's
// ControllerPublishVolume waits for the hot-plug to become Ready
// (kubevirt/csi-driver pkg/service/controller.go:465).
const DefaultTenantAttachGrace = 5 * time.Minute

// DefaultStuckPhaseGrace is how long a hot-plug volume must be known to
// stay in a phase before StuckHotplugPhase calls it stuck: a normal attach
// or detach moves on within seconds.
const DefaultStuckPhaseGrace = 10 * time.Minute

// Scope limits what the checks look at and may act on. The scope is a safety
// rule: nothing outside it is reported or touched.
type Scope struct {
	// Namespaces to look at; empty means all.
	Namespaces []string
	// Selector on VMI labels; nil means every VMI.
	Selector labels.Selector
	// VolumePrefix, when set, limits the checks to volumes whose name
	// starts with it (e.g. the prefix a CSI driver gives its volumes).
	VolumePrefix string
}

// Policy is everything an operator decides about the checks, with the
// defaults in DefaultPolicy.
type Policy struct {
	Scope Scope
	// Checks to run; empty means all. A check named here is also asked for
	// by name (DanglingVolumeReference's removal needs it).
	Checks []string
	// Except are checks left out of the run, as if they were not there:
	// the others keep the meaning Checks gives them (an audit of a support
	// bundle leaves out the checks whose inputs the bundle lacks, and asks
	// for no other by name).
	Except []string
	// AllowVMIOnlyDetach: the operator accepts detaching volumes that were
	// hot-plugged to a VM-owned VMI only, without tenant evidence.
	AllowVMIOnlyDetach bool
	// TenantAuthoritative: for a VM-owned VMI whose namespace has reachable
	// tenant evidence, a volume in the VM spec that the tenant does not
	// attach is an orphan, removed from the VM spec (VMRemoveVolume).
	TenantAuthoritative bool
	// DeleteAttachmentPods: the operator asked for orphaned attachment pods
	// to be deleted.
	DeleteAttachmentPods bool
	// PersistHotplugs: the operator asked for UnpersistedHotplug's
	// hot-plugs to be put into their VMs' specs (PersistHotplug).
	PersistHotplugs bool
	// DeleteMigrationSourcePods: the operator asked for
	// MigrationSourcePodLeftover's pods to be deleted (`tether fix
	// --delete-migration-source-pods`). The controller does not run the
	// check.
	DeleteMigrationSourcePods bool
	// MinAttachmentPodAge: younger attachment pods are never deleted. Zero
	// means DefaultMinAttachmentPodAge.
	MinAttachmentPodAge time.Duration
	// TenantAttachGrace: tenant attachments and VMIs younger than this,
	// and hot-plugs mid-lifecycle for less, are held (reported as info)
	// by the tenant attach checks. Zero means DefaultTenantAttachGrace.
	TenantAttachGrace time.Duration
	// StuckPhaseGrace: see DefaultStuckPhaseGrace (zero means it).
	StuckPhaseGrace time.Duration
	// StuckPublishGrace: see DefaultStuckPublishGrace (zero means it).
	StuckPublishGrace time.Duration
	// FenceAfter: see DefaultFenceAfter (zero means it).
	FenceAfter time.Duration
	// UnfenceSettle: see DefaultUnfenceSettle (zero means it).
	UnfenceSettle time.Duration
	// Storage holds the policy of the VolumeAttachment checks (staleva_policy.go).
	Storage StoragePolicy
}

// DefaultPolicy returns the conservative defaults: every check, everywhere,
// no opt-ins.
func DefaultPolicy() Policy {
	return Policy{MinAttachmentPodAge: DefaultMinAttachmentPodAge}
}

// withDefaults fills zero values with their defaults.
func (p Policy) withDefaults() Policy {
	if p.MinAttachmentPodAge == 0 {
		p.MinAttachmentPodAge = DefaultMinAttachmentPodAge
	}
	if p.TenantAttachGrace == 0 {
		p.TenantAttachGrace = DefaultTenantAttachGrace
	}
	if p.StuckPhaseGrace == 0 {
		p.StuckPhaseGrace = DefaultStuckPhaseGrace
	}
	if p.StuckPublishGrace == 0 {
		p.StuckPublishGrace = DefaultStuckPublishGrace
	}
	if p.FenceAfter == 0 {
		p.FenceAfter = DefaultFenceAfter
	}
	if p.UnfenceSettle == 0 {
		p.UnfenceSettle = DefaultUnfenceSettle
	}
	p.Storage = p.Storage.withDefaults()
	return p
}

// RecheckAfter is, for a hold that only time lifts, the longest wait
// before the finding must be decided again (the grace it waits out); zero
// for a hold an object's change lifts, whose event wakes the controller.
func (p Policy) RecheckAfter(r drift.BlockReason) time.Duration {
	p = p.withDefaults()
	switch r {
	case TenantAttachTooRecent:
		return p.TenantAttachGrace
	case NotReadyTooRecent:
		return p.FenceAfter
	case UnfenceSettling:
		return p.UnfenceSettle
	case TenantNodeReleasing, TenantNodeReleaseUnknown:
		return releasePoll
	}
	return 0
}

// selected names the checks a run runs, for drift.Run: Checks (every
// check when empty) but Except; ok is false when Except leaves none.
func (p Policy) selected() (names []string, ok bool) {
	if len(p.Except) == 0 {
		return p.Checks, true
	}
	from := p.Checks
	if len(from) == 0 {
		from = Names()
	}
	for _, n := range from {
		if !slices.Contains(p.Except, n) {
			names = append(names, n)
		}
	}
	return names, len(names) > 0
}

// Validate reports every problem with the policy, or nil.
func (p Policy) Validate() error {
	var errs []error
	for _, ns := range p.Scope.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("scope: namespace %q is not valid: %s", ns, msgs[0]))
		}
	}
	for _, name := range append(slices.Clip(p.Checks), p.Except...) {
		if _, err := Lookup(name); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, p.Storage.validate()...)
	if p.MinAttachmentPodAge < 0 {
		errs = append(errs, fmt.Errorf("minimum attachment pod age must not be negative, got %s", p.MinAttachmentPodAge))
	}
	if p.TenantAttachGrace < 0 {
		errs = append(errs, fmt.Errorf("tenant attach grace must not be negative, got %s", p.TenantAttachGrace))
	}
	if p.StuckPhaseGrace < 0 {
		errs = append(errs, fmt.Errorf("stuck phase grace must not be negative, got %s", p.StuckPhaseGrace))
	}
	if p.FenceAfter < 0 {
		errs = append(errs, fmt.Errorf("fence-after must not be negative, got %s", p.FenceAfter))
	}
	if p.UnfenceSettle < 0 {
		errs = append(errs, fmt.Errorf("unfence-settle must not be negative, got %s", p.UnfenceSettle))
	}
	if p.StuckPublishGrace < 0 {
		errs = append(errs, fmt.Errorf("stuck publish grace must not be negative, got %s", p.StuckPublishGrace))
	}
	return errors.Join(errs...)
}

// inScope is the scope compiled for fast lookups.
type inScope struct {
	namespaces map[string]bool
	selector   labels.Selector
	prefix     string
}

func (s Scope) compile() inScope {
	c := inScope{selector: s.Selector, prefix: s.VolumePrefix}
	if len(s.Namespaces) > 0 {
		c.namespaces = make(map[string]bool, len(s.Namespaces))
		for _, ns := range s.Namespaces {
			c.namespaces[ns] = true
		}
	}
	if c.selector != nil && c.selector.Empty() {
		c.selector = nil
	}
	return c
}

func (c inScope) namespace(ns string) bool {
	return c.namespaces == nil || c.namespaces[ns]
}

// labels reports whether an object with these labels is selected.
func (c inScope) labels(l map[string]string) bool {
	return c.selector == nil || c.selector.Matches(labels.Set(l))
}

func (c inScope) volume(name string) bool {
	return c.prefix == "" || (len(name) >= len(c.prefix) && name[:len(c.prefix)] == c.prefix)
}
