package check

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// Ownership is how a VMI relates to a VirtualMachine.
type Ownership struct {
	// Owner is the VMI's VirtualMachine controller reference; nil means the
	// VMI is standalone.
	Owner *metav1.OwnerReference
	// VM is the owner if it exists with the owner's UID.
	VM *snapshot.VM
	// Other is a VM with the owner's name but another UID: a re-created VM,
	// which is not the owner.
	Other *snapshot.VM
}

// ResolveOwner finds the VMI's owning VM in the snapshot. An owner reference
// or a VM without a UID matches by name alone.
func ResolveOwner(ix *snapshot.Index, vmi *snapshot.VMI) Ownership {
	o := Ownership{Owner: VMOwner(vmi)}
	if o.Owner == nil {
		return o
	}
	found := ix.VM(vmi.Namespace, o.Owner.Name)
	switch {
	case found == nil:
	case o.Owner.UID == "" || found.UID == "" || found.UID == o.Owner.UID:
		o.VM = found
	default:
		o.Other = found
	}
	return o
}

// vmiFacts is what every hot-plug volume of one VMI shares, looked up once.
type vmiFacts struct {
	own     Ownership
	tenants []*snapshot.TenantIndex
	// nodes are, per tenant, the tenant nodes that are the VMI's VM,
	// looked up on first need (tenantNodes): through pass when it is set
	// (at is then the VMI's index in the snapshot), else directly.
	nodes      [][]snapshot.TenantNodeRef
	nodesKnown bool
	// said is the latest remedy that names only the VMI and its VM.
	said *vmiText
	pass *Input
	at   int
}

// passFacts are the facts of the pass's VMI i, looked up through the pass.
func passFacts(pass *Input, i int) vmiFacts {
	vmi := &pass.Snapshot.VMIs[i]
	return vmiFacts{own: pass.owner(i), tenants: pass.Index.TenantsFor(vmi.Namespace), pass: pass, at: i}
}

func lookupVMI(ix *snapshot.Index, vmi *snapshot.VMI) vmiFacts {
	return vmiFacts{own: ResolveOwner(ix, vmi), tenants: ix.TenantsFor(vmi.Namespace)}
}

// tenantNodes returns the nodes of tenant i (of f.tenants) that are vm.
func (f *vmiFacts) tenantNodes(i int, vm snapshot.InfraVM) []snapshot.TenantNodeRef {
	if !f.nodesKnown {
		if f.pass != nil {
			f.nodes = f.pass.vmiTenantNodes(f.at)
		} else {
			f.nodes = make([][]snapshot.TenantNodeRef, len(f.tenants))
			for j, t := range f.tenants {
				f.nodes[j] = t.NodesFor(vm)
			}
		}
		f.nodesKnown = true
	}
	return f.nodes[i]
}

// subject is one hot-plugged volume of one VMI and what the decision reads.
type subject struct {
	vmi    *snapshot.VMI
	status *snapshot.VolumeStatus
	vmiFacts
	claim     string
	claimDone bool
}

func (s *subject) volume() string { return s.status.Name }

// claimName is the PVC behind the volume: from the VMI spec volume, else
// from the volume status; "" when unknown.
func (s *subject) claimName() string {
	if !s.claimDone {
		s.claim = snapshot.ClaimName(snapshot.VMIVolume(s.vmi, s.status.Name))
		if s.claim == "" && s.status.PersistentVolumeClaimInfo != nil {
			s.claim = s.status.PersistentVolumeClaimInfo.ClaimName
		}
		s.claimDone = true
	}
	return s.claim
}

// FindOrphanHotplugVolumes proves that a hot-plugged VMI volume is wanted by
// nothing: not by the VM spec, a pending VM volume request or a tenant
// VolumeAttachment, or that its VM is gone.
//
// Decisions, in order (decideVolume):
//   - subject: a named VMI in scope, each hot-plug volume status in the
//     prefix scope, the first status entry of each name;
//   - owner (ResolveOwner), then classify: standalone, VM gone or VM owned;
//   - standalone (classifyStandalone): a finding only when the tenants no
//     longer attach it or are detaching it;
//   - VM gone (classifyVMGone): reported (OwnerGone, never acted on)
//     unless a tenant wants it;
//   - VM owned (classifyVMOwned): in the VM spec, wanted unless
//     Policy.TenantAuthoritative and no tenant attaches it (classifyInSpec,
//     VMRemoveVolume);
//     a pending addvolume or a tenant attachment wants it; under
//     declarative sync (snapshot.HotplugGates) reported only
//     (DeclarativeSync, with a diagnosis); otherwise a finding, the first
//     that applies: no tenant attaches it or a
//     removevolume is pending (Warning), tenant evidence unknown (held),
//     Policy.AllowVMIOnlyDetach (Warning), a VMI-only hot-plug (held);
//   - holds (volumeHolds): VMI or VM terminating, migrating, not Running,
//     a pending request, the volume phase, the verdict's own block, then
//     what the API refuses (hotpluggable flag, the gates of the KubeVirt
//     version); the first one is BlockedBy.
func FindOrphanHotplugVolumes(in Input) []drift.Finding {
	in, loud := in.ready().deferring() // deferred words are loud's
	var out []drift.Finding
	vmis := in.Snapshot.VMIs
	for i := range vmis {
		vmi := &vmis[i]
		if !named(vmi) || !in.scope.namespace(vmi.Namespace) || !in.scope.labels(vmi.Labels) {
			continue
		}
		var facts vmiFacts
		looked := false
		for j := range vmi.Status.VolumeStatus {
			vs := &vmi.Status.VolumeStatus[j]
			if vs.HotplugVolume == nil || !in.scope.volume(vs.Name) || !firstStatus(vmi, j) {
				continue
			}
			if !looked {
				facts, looked = passFacts(&in, i), true
			}
			if f, ok := decideVolume(in, vmi, vs, &facts); ok {
				if in.deferText {
					// The words again, from the same facts, when asked for.
					f.Defer(func() drift.Text {
						again := passFacts(&loud, i)
						f, _ := decideVolume(loud, vmi, vs, &again)
						return drift.TextOf(f)
					})
				}
				out = append(out, f)
			}
		}
	}
	return out
}

// CheckVolume re-runs the OrphanHotplugVolume decision for one VMI volume,
// typically on a snapshot built from freshly read objects. It returns false
// when the volume is wanted, out of scope or not a hot-plugged volume.
func CheckVolume(s *snapshot.Snapshot, p Policy, now time.Time, ns, vmiName, volume string) (drift.Finding, bool) {
	in := NewInput(s, p, now)
	vmi := in.Index.VMI(ns, vmiName)
	if vmi == nil || !named(vmi) || !in.scope.namespace(ns) || !in.scope.labels(vmi.Labels) || !in.scope.volume(volume) {
		return drift.Finding{}, false
	}
	for j := range vmi.Status.VolumeStatus {
		vs := &vmi.Status.VolumeStatus[j]
		if vs.Name == volume {
			if vs.HotplugVolume == nil {
				return drift.Finding{}, false
			}
			facts := lookupVMI(in.Index, vmi)
			return decideVolume(in, vmi, vs, &facts)
		}
	}
	return drift.Finding{}, false
}

// firstStatus reports whether status entry j is the first of its name; the
// API keeps one entry per volume, so later duplicates are ignored.
func firstStatus(vmi *snapshot.VMI, j int) bool {
	for i := 0; i < j; i++ {
		if vmi.Status.VolumeStatus[i].Name == vmi.Status.VolumeStatus[j].Name {
			return false
		}
	}
	return true
}

func decideVolume(in Input, vmi *snapshot.VMI, vs *snapshot.VolumeStatus, facts *vmiFacts) (drift.Finding, bool) {
	sub := &subject{vmi: vmi, status: vs, vmiFacts: *facts}
	v, ok := classify(in, sub)
	// Keep the tenant nodes classify looked up for the VMI's other volumes.
	facts.nodes, facts.nodesKnown = sub.nodes, sub.nodesKnown
	if !ok {
		return drift.Finding{}, false
	}
	f := buildVolumeFinding(in, sub, v)
	facts.said = sub.said
	return f, true
}

// verdict is the outcome of classify: why the volume looks unwanted and what
// would fix it.
type verdict struct {
	severity drift.Severity
	action   drift.ActionType
	// block is a reason from the evidence itself (e.g. VMIOnlyHotplug).
	block    drift.BlockReason
	message  string
	evidence []string
	tenants  []string
}

// classify decides whether anything wants the volume. ok is false when
// something does (no finding).
func classify(in Input, sub *subject) (verdict, bool) {
	switch {
	case sub.own.Owner == nil:
		return classifyStandalone(in, sub)
	case sub.own.VM == nil:
		return classifyVMGone(in, sub)
	}
	return classifyVMOwned(in, sub)
}

func (s *subject) tenants() tenantView {
	// A tenant that wants the volume by its name wants it whatever its
	// claim: the claim (a scan of the VMI spec) is looked up only when no
	// tenant does.
	vm := s.infraVM()
	for i, t := range s.vmiFacts.tenants {
		if state, _, _ := oneTenant(t, s.tenantNodes(i, vm), vm, s.volume(), "", false); state == tenantWants {
			return tenantView{state: tenantWants}
		}
	}
	return tenantEvidence(&s.vmiFacts, vm, s.volume(), s.claimName())
}

// tenantFacts is the evidence behind tv, built only for a finding.
func (s *subject) tenantFacts(tv tenantView) []string {
	return tenantFacts(&s.vmiFacts, tv, s.infraVM(), s.volume(), s.claimName())
}

func (s *subject) infraVM() snapshot.InfraVM {
	return snapshot.InfraVM{Namespace: s.vmi.Namespace, Name: s.vmi.Name}
}

// classifyStandalone: a standalone VMI is never orphaned for lack of a VM;
// only reachable tenant evidence can say its volume is unwanted.
func classifyStandalone(in Input, sub *subject) (verdict, bool) {
	tv := sub.tenants()
	if tv.state != tenantNotWanted && tv.state != tenantDetaching {
		return verdict{}, false
	}
	ev := []string{fmt.Sprintf("VMI %s/%s has no VirtualMachine controller owner (standalone)", sub.vmi.Namespace, sub.vmi.Name)}
	if tv.state == tenantDetaching {
		return detachingVerdict(sub, tv, ev), true
	}
	return verdict{severity: drift.SeverityWarning, action: VMIRemoveVolume, message: sub.describe("no tenant attaches it"),
		evidence: append(ev, sub.tenantFacts(tv)...), tenants: tv.names}, true
}

// classifyVMGone: the owner reference names a VM that does not exist with
// that UID: the VMI is garbage, and goes with its volumes (reported, never
// acted on), unless a tenant still wants the volume.
func classifyVMGone(in Input, sub *subject) (verdict, bool) {
	tv := sub.tenants()
	if tv.state == tenantWants {
		return verdict{}, false
	}
	ev := []string{sub.vmGoneFact()}
	if tv.state == tenantDetaching {
		return detachingVerdict(sub, tv, ev), true
	}
	return ownerGoneVerdict(sub, tv, ev), true
}

// classifyVMOwned: the owning VM exists. The volume is wanted if the VM spec
// lists it (unless the tenant is authoritative and does not want it), if a
// VM volume request adds it, or if a tenant attaches it; otherwise it is a
// VMI-only hot-plug, legitimate until evidence says otherwise.
func classifyVMOwned(in Input, sub *subject) (verdict, bool) {
	vm, name := sub.own.VM, sub.volume()
	if snapshot.VMVolume(vm, name) != nil {
		return classifyInSpec(in, sub)
	}
	if HasPendingAdd(vm, name) {
		return verdict{}, false
	}
	tv := sub.tenants()
	if tv.state == tenantWants {
		return verdict{}, false
	}
	ev := []string{fmt.Sprintf("VM %s/%s spec does not list volume %q", vm.Namespace, vm.Name, name)}
	if tv.state == tenantDetaching {
		return detachingVerdict(sub, tv, ev), true
	}
	if gates := in.hotplugGates(); gates.DeclarativeSync() {
		return declarativeVerdict(in, sub, gates, append(ev, sub.tenantFacts(tv)...)), true
	}
	v := verdict{severity: drift.SeverityWarning, action: VMIRemoveVolume, evidence: append(ev, sub.tenantFacts(tv)...), tenants: tv.names}
	switch {
	case tv.state == tenantNotWanted:
		v.message = sub.describe("not in the VM spec and no tenant attaches it")
	case HasPendingRemove(vm, name):
		v.message = sub.describe("its VM has a pending removevolume request")
	case tv.state == tenantUnknown:
		v.severity, v.block = drift.SeverityInfo, tv.block
		v.message = sub.describe("VMI-only hot-plug; tenant evidence is not available")
	case in.Policy.AllowVMIOnlyDetach:
		v.message = sub.describe("VMI-only hot-plug; policy allows detaching those")
		v.evidence = append(v.evidence, "policy allows detaching VMI-only hot-plugs without tenant evidence")
	default:
		v.severity, v.block = drift.SeverityInfo, VMIOnlyHotplug
		v.message = sub.describe("VMI-only hot-plug (not in the VM spec)")
	}
	return v, true
}

// classifyInSpec: the VM spec lists the volume, so it is wanted, unless the
// operator made reachable tenant evidence authoritative and no tenant
// attaches it; then it leaves the VM spec through the VM-level API.
func classifyInSpec(in Input, sub *subject) (verdict, bool) {
	if !in.Policy.TenantAuthoritative {
		return verdict{}, false
	}
	tv := sub.tenants()
	if tv.state != tenantNotWanted {
		return verdict{}, false
	}
	vm := sub.own.VM
	ev := []string{
		fmt.Sprintf("VM %s/%s spec lists volume %q", vm.Namespace, vm.Name, sub.volume()),
		"policy makes tenant evidence authoritative over the VM spec",
	}
	return verdict{severity: drift.SeverityWarning, action: VMRemoveVolume, message: sub.describe("in the VM spec but no tenant attaches it"),
		evidence: append(ev, sub.tenantFacts(tv)...), tenants: tv.names}, true
}

func detachingVerdict(sub *subject, tv tenantView, ev []string) verdict {
	return verdict{severity: drift.SeverityInfo, action: VMIRemoveVolume, block: DetachInProgress,
		message: sub.describe("being detached by its tenant"), evidence: append(ev, sub.tenantFacts(tv)...), tenants: tv.names}
}

func (s *subject) describe(why string) string {
	return fmt.Sprintf("hot-plug volume %q of VMI %s/%s: %s", s.volume(), s.vmi.Namespace, s.vmi.Name, why)
}

func (s *subject) vmGoneFact() string {
	ref := s.own.Owner
	if s.own.Other != nil {
		return fmt.Sprintf("VM %s/%s exists with uid %s, not the owner uid %s: it was re-created, the owner is gone",
			s.vmi.Namespace, ref.Name, s.own.Other.UID, ref.UID)
	}
	return fmt.Sprintf("owner VM %s/%s (uid %s) does not exist", s.vmi.Namespace, ref.Name, orNone(string(ref.UID)))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
