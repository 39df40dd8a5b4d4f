package check

import (
	"fmt"
	"strings"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// The grid below enumerates every combination of the inputs the
// OrphanHotplugVolume decision reads, and compares the check with a second,
// literal reading of tether's decision table (expectVolume, as
// docs/checks/OrphanHotplugVolume.md states it: which combinations are
// findings, their severity, and which block reason is reported first).
// That table is tether's own design, so the grid also hands every safe
// finding to the platform oracle (unsafeVolume, oracle_test.go), which does
// not share the table's assumptions. Hand-written cases with readable
// names live in hotplug_test.go; this test makes sure no combination falls
// between them.

var (
	gridOwners  = []string{"standalone", "vm present", "vm gone", "vm re-created"}
	gridTenants = []string{"no tenant", "tenant attaches it", "tenant detaching", "tenant does not attach it", "tenant unreachable", "tenant incomplete"}
	// KubeVirt v1.9.0: HotplugVolumes listed; the defaults (declarative
	// sync); DeclarativeHotplugVolumes disabled (both off); unknown.
	gridGates = []string{"gate on", "declarative", "both off", "gate unknown"}
	gridHolds = []string{"no hold", "vmi terminating", "vm terminating", "vmi migrating", "vmi not running", "volume detaching", "volume not ready"}
)

type combo struct {
	owner, tenant, gate, hold         string
	inSpec, pendingAdd, pendingRemove bool
	allowVMIOnly, tenantAuthoritative bool
}

func (c combo) String() string {
	return fmt.Sprintf("%s, in spec=%v, pending add=%v, pending remove=%v, %s, %s, %s, allow vmi-only=%v, tenant authoritative=%v",
		c.owner, c.inSpec, c.pendingAdd, c.pendingRemove, c.tenant, c.gate, c.hold, c.allowVMIOnly, c.tenantAuthoritative)
}

func forEachCombo(fn func(combo)) {
	bools := []bool{false, true}
	for _, owner := range gridOwners {
		for _, inSpec := range bools {
			for _, add := range bools {
				for _, rm := range bools {
					for _, tenant := range gridTenants {
						for _, gate := range gridGates {
							for _, hold := range gridHolds {
								for _, allow := range bools {
									for _, ta := range bools {
										fn(combo{owner, tenant, gate, hold, inSpec, add, rm, allow, ta})
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

func (c combo) build() (*snapshot.Snapshot, Policy) {
	vmOpts := []f.Option{f.Running()}
	if c.inSpec {
		vmOpts = append(vmOpts, f.WithVolume("v1", f.PVC("v1"), f.Hotpluggable()))
	}
	if c.pendingAdd {
		vmOpts = append(vmOpts, f.PendingAdd("v1", f.PVC("v1")))
	}
	if c.pendingRemove {
		vmOpts = append(vmOpts, f.PendingRemove("v1"))
	}
	if c.hold == "vm terminating" {
		vmOpts = append(vmOpts, f.Terminating(now))
	}
	vm := f.VM("a", vmOpts...)
	hp := []f.HotplugOption{}
	vmiOpts := []f.Option{}
	switch c.hold {
	case "vmi terminating":
		vmiOpts = append(vmiOpts, f.Terminating(now))
	case "vmi migrating":
		vmiOpts = append(vmiOpts, f.Migrating())
	case "vmi not running":
		vmiOpts = append(vmiOpts, f.Phase(kubevirtv1.Failed))
	case "volume detaching":
		hp = append(hp, f.VolumePhase(kubevirtv1.HotplugVolumeDetaching))
	case "volume not ready":
		hp = append(hp, f.VolumePhase(kubevirtv1.VolumeBound))
	}
	items := []any{}
	switch c.owner {
	case "vm present":
		items = append(items, vm)
		vmiOpts = append(vmiOpts, f.OwnedBy(vm))
	case "vm gone":
		vmiOpts = append(vmiOpts, f.OwnedBy(vm))
	case "vm re-created":
		vmiOpts = append(vmiOpts, f.OwnedBy(f.VM("a", f.WithUID("old-uid"))))
		items = append(items, vm)
	}
	items = append(items, f.VMI("a", append(vmiOpts, f.WithHotplug("v1", hp...))...))
	switch c.tenant {
	case "tenant attaches it":
		items = append(items, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Attaches("a", "v1")))
	case "tenant detaching":
		items = append(items, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Attaches("a", "v1", f.Terminating(now))))
	case "tenant does not attach it":
		items = append(items, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Attaches("a", "v2"), f.Attaches("b", "v1")))
	case "tenant unreachable":
		items = append(items, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.Unreachable("x")))
	case "tenant incomplete":
		items = append(items, f.Tenant("t1", f.Nodes("a", "b", "vm-a"), f.WithAttachment(f.VolumeAttachment("va", "a", "pv-missing"))))
	}
	switch c.gate {
	case "gate on":
		items = append(items, hotplugGate())
	case "declarative":
		items = append(items, f.Gates())
	case "both off":
		g := f.Gates()
		g.Disabled = []string{snapshot.DeclarativeHotplugVolumesGate}
		items = append(items, g)
	}
	p := DefaultPolicy()
	p.AllowVMIOnlyDetach, p.TenantAuthoritative = c.allowVMIOnly, c.tenantAuthoritative
	return f.Snapshot(items...), p
}

// expectVolume reads the rules literally. nil means no finding.
func expectVolume(c combo) *outcome {
	o, evBlock := expectVerdict(c)
	if o == nil {
		return nil
	}
	vmExists := c.owner == "vm present"
	var holds []drift.BlockReason
	add := func(ok bool, r drift.BlockReason) {
		if ok {
			holds = append(holds, r)
		}
	}
	add(c.hold == "vmi terminating", VMITerminating)
	add(c.hold == "vm terminating" && vmExists, VMTerminating)
	add(c.hold == "vmi migrating", VMIMigrating)
	add(c.hold == "vmi not running", VMINotRunning)
	add(vmExists && c.pendingRemove, RemovalPending)
	add(vmExists && c.pendingAdd, AdditionPending)
	add(c.hold == "volume detaching", DetachInProgress)
	add(c.hold == "volume not ready", VolumeNotReady)
	add(evBlock != "", evBlock)
	// The VMI route: standalone VMIs under either gate, VM-owned ones only
	// with HotplugVolumes (pkg/virt-api/rest/volumes.go:63-65,220-222);
	// unknown gates hold only VM-owned VMIs (a standalone one's dry run
	// decides).
	owned := c.owner != "standalone"
	vmiRoute := o.action == VMIRemoveVolume
	add(vmiRoute && owned && (c.gate == "declarative" || c.gate == "both off"), HotplugGateDisabled)
	add(vmiRoute && !owned && c.gate == "both off", HotplugGateDisabled)
	add(vmiRoute && owned && c.gate == "gate unknown", HotplugGateUnknown)
	add(o.action == VMRemoveVolume && c.gate == "both off", HotplugGateDisabled)
	if len(holds) == 0 {
		o.safe = true
	} else {
		o.blocked = holds[0]
	}
	return o
}

func expectVerdict(c combo) (*outcome, drift.BlockReason) {
	warn := func(a drift.ActionType) *outcome { return &outcome{severity: drift.SeverityWarning, action: a} }
	info := &outcome{severity: drift.SeverityInfo, action: VMIRemoveVolume}
	unknown := map[string]drift.BlockReason{"tenant unreachable": TenantUnreachable, "tenant incomplete": TenantIncomplete}
	switch {
	case c.tenant == "tenant attaches it":
		return nil, ""
	case c.owner == "standalone" && c.tenant == "tenant does not attach it":
		return warn(VMIRemoveVolume), ""
	case c.owner == "standalone" && c.tenant == "tenant detaching":
		return info, DetachInProgress
	case c.owner == "standalone":
		return nil, ""
	case c.owner != "vm present" && c.tenant == "tenant detaching":
		return info, DetachInProgress
	case c.owner != "vm present":
		// The kube garbage collector deletes a VMI whose VM is gone.
		return &outcome{severity: drift.SeverityInfo, action: drift.None}, OwnerGone
	case c.inSpec && c.tenantAuthoritative && c.tenant == "tenant does not attach it":
		return warn(VMRemoveVolume), ""
	case c.inSpec || c.pendingAdd:
		return nil, ""
	case c.tenant == "tenant detaching":
		return info, DetachInProgress
	case c.gate == "declarative":
		// virt-controller removes VMI-only hot-plugs itself
		// (pkg/storage/hotplug/hotplug.go:95-120); a VMI not Running is
		// why it has not (hotplug.go:52-54).
		sev := drift.SeverityInfo
		if c.hold == "vmi not running" {
			sev = drift.SeverityWarning
		}
		return &outcome{severity: sev, action: drift.None}, DeclarativeSync
	case c.tenant == "tenant does not attach it" || c.pendingRemove:
		return warn(VMIRemoveVolume), ""
	case unknown[c.tenant] != "":
		return info, unknown[c.tenant]
	case c.allowVMIOnly:
		return warn(VMIRemoveVolume), ""
	}
	return info, VMIOnlyHotplug
}

func describe(o *outcome) string {
	if o == nil {
		return "no finding"
	}
	if o.safe {
		return fmt.Sprintf("%s, safe %s", o.severity, o.action)
	}
	return fmt.Sprintf("%s, %s blocked %s", o.severity, o.action, o.blocked)
}

func TestOrphanHotplugVolumeEveryCombination(t *testing.T) {
	n, failures := 0, 0
	forEachCombo(func(c combo) {
		n++
		s, p := c.build()
		fs := only(Run(s, p, now), OrphanHotplugVolume, "a", "v1")
		want := expectVolume(c)
		var got *outcome
		if len(fs) > 1 {
			t.Fatalf("%s -> %d findings", c, len(fs))
		}
		if len(fs) == 1 {
			got = &outcome{severity: fs[0].Severity, action: fs[0].Action.Type, safe: fs[0].Action.Safe, blocked: fs[0].Action.BlockedBy}
			assertWellFormed(t, fs[0])
			if why := unsafeVolume(s, p, fs[0]); fs[0].Action.Safe && why != "" {
				t.Errorf("%s -> safe %s although %s", c, fs[0].Action.Type, why)
			}
		}
		if describe(got) != describe(want) {
			failures++
			if failures <= 20 {
				msg := ""
				if len(fs) == 1 {
					msg = "\n  " + strings.Join(fs[0].Evidence, "\n  ")
				}
				t.Errorf("%s -> %s, want %s%s", c, describe(got), describe(want), msg)
			}
		}
	})
	if failures > 0 {
		t.Errorf("%d of %d combinations differ", failures, n)
	}
	t.Logf("%d combinations checked", n)
}
