package check

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// UnpersistedHotplug: a hot-plug of a VM-owned VMI that its VM spec lacks
// (or lists otherwise), which KubeVirt's declarative hot-plug sync unplugs
// from the running guest once it is in effect.
const UnpersistedHotplug = "UnpersistedHotplug"

// PersistHotplug puts a hot-plug into its VM's spec exactly as the VMI
// has it (volume and disk), as `virtctl addvolume --persist` records it, so
// that the declarative sync keeps it. Only on explicit request
// (Policy.PersistHotplugs: `tether fix --persist-hotplugs`); the controller
// has no setting for it.
const PersistHotplug drift.ActionType = "PersistHotplug"

// The holds of UnpersistedHotplug (what keeps the hot-plug today).
const (
	// KeptByHotplugVolumesGate: the hot-plug stays only while the
	// HotplugVolumes gate is on (or DeclarativeHotplugVolumes off).
	KeptByHotplugVolumesGate drift.BlockReason = "KeptByHotplugVolumesGate"
	// KeptByUpdateVolumesStrategy: the declarative sync is on, but skips
	// the VM while its updateVolumesStrategy is Migration.
	KeptByUpdateVolumesStrategy drift.BlockReason = "KeptByUpdateVolumesStrategy"
	// TenantDriverHotplug: a tenant's CSI driver made the hot-plug through
	// the VMI route and will remove it the same way; in the VM spec it
	// would outlive the driver's detach. Never persisted: the driver must
	// move to the VM route.
	TenantDriverHotplug drift.BlockReason = "TenantDriverHotplug"
)

// Unpersisted is one hot-plug the declarative sync would take from a
// running VMI: the VMI spec has it as a hotpluggable claim or DataVolume,
// and its VM's spec lacks a volume of that name (Differs false) or has
// another one under the name (Differs true: the sync unplugs the VMI's and
// plugs the VM's).
type Unpersisted struct {
	VMI    *snapshot.VMI
	VM     *snapshot.VM
	Volume *kubevirtv1.Volume
	// Differs: the VM spec lists a volume of that name, not this one.
	Differs bool
}

// FindUnpersisted lists, for every running VM-owned VMI in scope, the
// hot-plugs that KubeVirt v1.9's declarative sync removes: on every sync
// of a VM whose VMI runs (and whose updateVolumesStrategy is not
// Migration), virt-controller drops from the VMI spec each volume with a
// hotpluggable claim or DataVolume source that the VM template lacks, or
// lists with another source (pkg/storage/hotplug/hotplug.go:37-49,95-117,
// pkg/storage/types/volume.go:33-46 at v1.9.0), and virt-handler then
// unplugs it from the guest. A volume the VM has a pending addvolume
// request for is about to be in its spec and is left out.
func FindUnpersisted(in Input) []Unpersisted {
	in = in.ready()
	var out []Unpersisted
	for i := range in.Snapshot.VMIs {
		vmi := &in.Snapshot.VMIs[i]
		if !named(vmi) || vmi.Status.Phase != kubevirtv1.Running || IsTerminating(vmi) ||
			!in.scope.namespace(vmi.Namespace) || !in.scope.labels(vmi.Labels) {
			continue
		}
		vm := in.owner(i).VM
		if vm == nil || vm.Spec.Template == nil {
			continue
		}
		for j := range vmi.Spec.Volumes {
			v := &vmi.Spec.Volumes[j]
			if !snapshot.Hotpluggable(v) || !in.scope.volume(v.Name) || HasPendingAdd(vm, v.Name) {
				continue
			}
			switch had := snapshot.VMVolume(vm, v.Name); {
			case had == nil:
				out = append(out, Unpersisted{VMI: vmi, VM: vm, Volume: v})
			case snapshot.Hotpluggable(had) && !reflect.DeepEqual(had, v):
				out = append(out, Unpersisted{VMI: vmi, VM: vm, Volume: v, Differs: true})
			}
		}
	}
	return out
}

// FindUnpersistedHotplugs reports each hot-plug FindUnpersisted lists,
// with what keeps it today and who made it. It never acts.
//
// Decisions, per hot-plug:
//   - the tenants prove nobody wants it (NobodyWants): no finding, it is an
//     orphan, and losing it loses nothing;
//   - the gates unknown: info, HotplugGateUnknown;
//   - the declarative sync in effect (DeclarativeHotplugVolumes on,
//     HotplugVolumes off): warning; held KeptByUpdateVolumesStrategy while
//     the VM's updateVolumesStrategy is Migration, else DeclarativeSync
//     (virt-controller is taking it now);
//   - otherwise warning, KeptByHotplugVolumesGate: it goes with the gate
//     change (HotplugVolumes is deprecated in v1.9, and HCO's next release
//     no longer lists it).
func FindUnpersistedHotplugs(in Input) []drift.Finding {
	in = in.ready()
	gates := in.hotplugGates()
	var out []drift.Finding
	for _, u := range FindUnpersisted(in) {
		if !NobodyWants(in, u) {
			out = append(out, unpersistedFinding(in, gates, u))
		}
	}
	return out
}

// NobodyWants reports whether the tenants' evidence proves that no tenant
// wants the hot-plug (every tenant that speaks for its volume was read
// whole and attaches it nowhere on this VM's node): then it is an orphan
// (OrphanHotplugVolume), and the sync taking it loses nothing. A volume no
// tenant speaks for, or evidence that is incomplete, is never "not wanted".
func NobodyWants(in Input, u Unpersisted) bool {
	_, tv := hotplugTenants(in, u)
	return tv.state == tenantNotWanted || tv.state == tenantDetaching
}

// hotplugTenants is what the tenants say of the hot-plug's volume on this
// VM's node (tenantEvidence), and which tenant attaches it there, if one
// does (its driver made the hot-plug).
func hotplugTenants(in Input, u Unpersisted) (*snapshot.TenantIndex, tenantView) {
	infra := snapshot.InfraVM{Namespace: u.VMI.Namespace, Name: u.VMI.Name}
	claim := snapshot.ClaimName(u.Volume)
	tenants := in.Index.TenantsFor(u.VMI.Namespace)
	facts := &vmiFacts{own: Ownership{VM: u.VM}, tenants: tenants}
	for i, t := range tenants {
		if state, _, _ := oneTenant(t, facts.tenantNodes(i, infra), infra, u.Volume.Name, claim, false); state == tenantWants {
			return t, tenantView{state: tenantWants}
		}
	}
	return nil, tenantEvidence(facts, infra, u.Volume.Name, claim)
}

func unpersistedFinding(in Input, gates snapshot.HotplugGates, u Unpersisted) drift.Finding {
	vmi, vm, v := u.VMI, u.VM, u.Volume
	f := drift.Finding{
		Check:     UnpersistedHotplug,
		Namespace: vmi.Namespace,
		Object:    drift.ObjectRef{Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID},
		Volume:    v.Name,
		Severity:  drift.SeverityWarning,
	}
	f.ID = f.DerivedID()
	what := fmt.Sprintf("VM %s/%s spec does not list volume %q", vm.Namespace, vm.Name, v.Name)
	if u.Differs {
		what = fmt.Sprintf("VM %s/%s spec lists volume %q with another source than the VMI's", vm.Namespace, vm.Name, v.Name)
	}
	f.Evidence = []string{
		fmt.Sprintf("VMI %s/%s (Running) has hot-plug %q of %s", vmi.Namespace, vmi.Name, v.Name, ClaimFact(v)),
		what,
		WhoHotplugged(in, u),
		"gates: " + gates.Basis,
	}
	if vs := hotplugStatus(vmi, v.Name); vs != nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("VMI status: volume %q phase %s", v.Name, orNone(string(vs.Phase))))
	}
	f.Action = drift.Action{Type: PersistHotplug, Safe: true, Remedy: PersistRemedy(u)}
	unplug := "unplugs it from the running guest"
	if u.Differs {
		unplug = "unplugs it from the running guest and plugs the VM spec's volume instead"
	}
	// What keeps it today: the reason the finding is held by unless the
	// operator asked to persist it (then only a fact).
	var keep drift.BlockReason
	var keepFact string
	switch {
	case !gates.Known:
		f.Severity = drift.SeverityInfo
		f.Message = fmt.Sprintf("hot-plug %q of VMI %s/%s is not in its VM's spec; whether KubeVirt's declarative hot-plug sync removes it cannot be told", v.Name, vmi.Namespace, vmi.Name)
		f.Block(HotplugGateUnknown, "KubeVirt's hot-plug gates are unknown ("+gates.Basis+")")
		return f
	case gates.DeclarativeSync() && vm.Spec.UpdateVolumesStrategy != nil && *vm.Spec.UpdateVolumesStrategy == kubevirtv1.UpdateVolumesStrategyMigration:
		f.Message = fmt.Sprintf("hot-plug %q of VMI %s/%s is not in its VM's spec: the declarative hot-plug sync, in effect, %s as soon as VM %s's updateVolumesStrategy is no longer Migration", v.Name, vmi.Namespace, vmi.Name, unplug, vm.Name)
		keep, keepFact = KeptByUpdateVolumesStrategy, fmt.Sprintf("VM %s/%s has updateVolumesStrategy Migration: virt-controller skips its declarative hot-plug sync", vm.Namespace, vm.Name)
	case gates.DeclarativeSync():
		f.Message = fmt.Sprintf("hot-plug %q of VMI %s/%s is not in its VM's spec: the declarative hot-plug sync, in effect, %s", v.Name, vmi.Namespace, vmi.Name, unplug)
		keep, keepFact = DeclarativeSync, "DeclarativeHotplugVolumes is on and HotplugVolumes off: virt-controller syncs the VMI's hot-plugs from the VM spec"
	default:
		f.Message = fmt.Sprintf("hot-plug %q of VMI %s/%s is not in its VM's spec: it stays only while HotplugVolumes is on; once DeclarativeHotplugVolumes is in effect without it (HotplugVolumes is deprecated in KubeVirt v1.9), virt-controller %s", v.Name, vmi.Namespace, vmi.Name, unplug)
		keep, keepFact = KeptByHotplugVolumesGate, "HotplugVolumes is on: virt-controller does not sync the VMI's hot-plugs from the VM spec"
	}
	switch tenant := tenantMade(in, u); {
	case tenant != "":
		f.Block(TenantDriverHotplug, fmt.Sprintf("tenant %q's CSI driver detaches it through the VMI route when its pod goes: in the VM spec it would outlive that detach (and the next sync would plug it again), so tether never persists it", tenant))
		f.Action.Remedy = fmt.Sprintf("move tenant %q's CSI driver to the VM route (kubevirt/csi-driver with #130) before the declarative sync is in effect, and keep HotplugVolumes listed until then: %s", tenant, fixGateHint)
	case IsMigrating(vmi):
		f.Block(VMIMigrating, fmt.Sprintf("VMI %s/%s is migrating: its spec is persisted once the migration ended", vmi.Namespace, vmi.Name))
	case !in.Policy.PersistHotplugs:
		f.Block(keep, keepFact)
		f.Evidence = append(f.Evidence, "persisting it was not requested (tether fix --check UnpersistedHotplug --persist-hotplugs)")
	default:
		f.Evidence = append(f.Evidence, keepFact)
	}
	return f
}

// CheckUnpersistedHotplug re-runs the UnpersistedHotplug decision for one
// VMI volume, typically on a snapshot of freshly read objects; false when
// there is no finding.
func CheckUnpersistedHotplug(s *snapshot.Snapshot, p Policy, now time.Time, ns, vmiName, volume string) (drift.Finding, bool) {
	in := NewInput(s, p, now)
	gates := in.hotplugGates()
	for _, u := range FindUnpersisted(in) {
		if u.VMI.Namespace == ns && u.VMI.Name == vmiName && u.Volume.Name == volume {
			return unpersistedFinding(in, gates, u), true
		}
	}
	return drift.Finding{}, false
}

// ClaimFact names a volume's claim or DataVolume.
func ClaimFact(v *kubevirtv1.Volume) string {
	if v.DataVolume != nil {
		return fmt.Sprintf("DataVolume %s", v.DataVolume.Name)
	}
	return fmt.Sprintf("claim %s", snapshot.ClaimName(v))
}

// WhoHotplugged says, as far as the evidence tells, who made a hot-plug
// the VM spec lacks: a tenant's CSI driver through the VMI route (one of
// the tenants attaches the volume to this VM's node), or a hand-made
// VMI-level `virtctl addvolume` without --persist (no tenant attaches it,
// or it is not a tenant's volume).
func WhoHotplugged(in Input, u Unpersisted) string {
	maker, tv := hotplugTenants(in, u)
	if maker != nil {
		return fmt.Sprintf("made by tenant %q's CSI driver (%s) through the VMI route: it attaches the volume to this VM's node", maker.Name, maker.Driver)
	}
	switch tv.state {
	case tenantNone:
		return "no tenant speaks for this volume: a hot-plug made by hand through the VMI route (`virtctl addvolume` without --persist)"
	case tenantNotWanted, tenantDetaching:
		return "no tenant attaches it to this VM's node: an orphan (OrphanHotplugVolume), or a hand-made `virtctl addvolume` without --persist"
	default:
		return "who made it cannot be told: the tenant evidence is incomplete (" + string(tv.block) + ")"
	}
}

// PersistRemedy is how to keep a hot-plug across the change: add it to the
// VM spec exactly as the VMI has it, volume and disk (what `virtctl
// addvolume --persist` records), so that the sync finds them equal; or
// for a tenant's hot-plug, move the driver to the VM route.
func PersistRemedy(u Unpersisted) string {
	vol, _ := json.Marshal(u.Volume)
	vm := u.VM
	op := "add"
	path := "/spec/template/spec/volumes/-"
	if u.Differs {
		for i := range vm.Spec.Template.Spec.Volumes {
			if vm.Spec.Template.Spec.Volumes[i].Name == u.Volume.Name {
				op, path = "replace", fmt.Sprintf("/spec/template/spec/volumes/%d", i)
			}
		}
	}
	return fmt.Sprintf("to keep it in the guest, put it in the VM spec as the VMI has it before the declarative sync is in effect: `kubectl patch vm %s -n %s --type=json -p '[{\"op\":\"%s\",\"path\":\"%s\",\"value\":%s}]'` and add its disk `%s` from `kubectl get vmi %s -n %s -o jsonpath='{.spec.domain.devices.disks[?(@.name==\"%s\")]}'` to /spec/template/spec/domain/devices/disks unless the VM spec has it; "+
		"a tenant's CSI driver's hot-plug is kept by moving the driver to the VM route (kubevirt/csi-driver with #130) and keeping HotplugVolumes listed until then; or let it go, and the guest loses the disk",
		vm.Name, vm.Namespace, op, path, vol, u.Volume.Name, u.VMI.Name, u.VMI.Namespace, u.Volume.Name)
}

// tenantMade is the tenant whose CSI driver attaches the hot-plug's volume
// to this VM's node (so made it, through the VMI route), or "".
func tenantMade(in Input, u Unpersisted) string {
	if maker, _ := hotplugTenants(in, u); maker != nil {
		return maker.Name
	}
	return ""
}

// fixGateHint is how HotplugVolumes stays listed.
const fixGateHint = "`kubectl edit kubevirt -n kubevirt` (spec.configuration.developerConfiguration.featureGates); under HCO, its kubevirt.kubevirt.io/jsonpatch annotation"
