package check

import (
	"fmt"
	"strings"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// DefaultStuckPublishGrace is how far apart a one-shot run must see a
// StuckPublish finding twice before acting on it: longer than the KubeVirt
// CSI driver's publish (five addvolume tries with back-off, about 31 s,
// then a two-minute wait for the hot-plug to turn Ready:
// kubevirt/csi-driver pkg/service/controller.go:443-462 at 27b52aa2).
const DefaultStuckPublishGrace = 5 * time.Minute

// FindStuckPublishes proves that a publish of the KubeVirt CSI driver was
// abandoned half-way: the driver's addvolume wrote the hot-plug into the
// VM spec, the VMI never got it Ready, and no tenant VolumeAttachment
// wants it on this VM any more (the publish timed out and the attachment
// went, or moved to another node). The guest never had the disk, so the
// VM-level removevolume takes nothing the guest uses; until then the
// driver's check that a ReadWriteOnce volume is on no other VMI (any
// status entry of that name counts: controller.go:956-990) refuses every
// attach of the volume elsewhere.
//
// Decisions, in order, per VM-owned VMI in scope whose namespace has
// tenants, and per volume of its VM's spec:
//   - the volume: hotpluggable, backed by a claim or DataVolume, in the
//     prefix scope; a Ready hot-plug of it in the VMI status, or a status
//     entry that is no hot-plug: no finding;
//   - the tenants: one attaches or uses it on this VM's node, or none has a
//     PV of the driver with that handle (not a tenant volume): no finding;
//     one is detaching it: held (DetachInProgress); one cannot be read or
//     its nodes not mapped: held (its reason);
//   - held as info: the VMI or VM terminating, the VMI not Running or
//     migrating, a pending addvolume or removevolume, the status phase
//     detaching, the hot-plug gates off;
//   - otherwise the action VMRemoveVolume is safe, critical when a tenant
//     attachment of the volume waits on another node, else warning; the
//     fix command acts only on a finding seen twice Policy.StuckPublishGrace
//     apart (the status has no time a never-Ready hot-plug started), the
//     controller after the check's gracePeriod from its durable first
//     sighting.
func FindStuckPublishes(in Input) []drift.Finding {
	in = in.ready()
	var out []drift.Finding
	for i := range in.Snapshot.VMIs {
		vmi := &in.Snapshot.VMIs[i]
		if !named(vmi) || !in.scope.namespace(vmi.Namespace) || !in.scope.labels(vmi.Labels) || len(in.Index.TenantsFor(vmi.Namespace)) == 0 {
			continue
		}
		own := in.owner(i)
		if own.VM == nil || own.VM.Spec.Template == nil {
			continue
		}
		var facts *vmiFacts
		for j := range own.VM.Spec.Template.Spec.Volumes {
			v := &own.VM.Spec.Template.Spec.Volumes[j]
			if !stuckPublishCandidate(in, vmi, v) {
				continue
			}
			if facts == nil {
				facts = &vmiFacts{own: own, tenants: in.Index.TenantsFor(vmi.Namespace), pass: &in, at: i}
			}
			if f, ok := decideStuckPublish(in, vmi, v, facts); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

// CheckStuckPublish re-runs the StuckPublish decision for one VMI volume,
// typically on a snapshot built from freshly read objects; false when
// there is no finding.
func CheckStuckPublish(s *snapshot.Snapshot, p Policy, now time.Time, ns, vmiName, volume string) (drift.Finding, bool) {
	in := NewInput(s, p, now).ready()
	vmi := in.Index.VMI(ns, vmiName)
	if vmi == nil || !named(vmi) || !in.scope.namespace(ns) || !in.scope.labels(vmi.Labels) {
		return drift.Finding{}, false
	}
	facts := lookupVMI(in.Index, vmi)
	v := snapshot.VMVolume(facts.own.VM, volume)
	if v == nil || len(facts.tenants) == 0 || !stuckPublishCandidate(in, vmi, v) {
		return drift.Finding{}, false
	}
	return decideStuckPublish(in, vmi, v, &facts)
}

// stuckPublishCandidate: a hotpluggable claim volume of the VM spec, in
// scope, with no Ready hot-plug (and no volume that is not hot-plugged) of
// it in the VMI status.
func stuckPublishCandidate(in Input, vmi *snapshot.VMI, v *kubevirtv1.Volume) bool {
	// The VMI status first: most volumes have a Ready hot-plug or a status
	// entry that is no hot-plug, and their source is then never read.
	if !in.scope.volume(v.Name) {
		return false
	}
	if vs := hotplugStatus(vmi, v.Name); vs != nil && (vs.HotplugVolume == nil || vs.Phase == kubevirtv1.VolumeReady) {
		return false
	}
	return snapshot.Hotpluggable(v) && snapshot.ClaimName(v) != ""
}

func decideStuckPublish(in Input, vmi *snapshot.VMI, v *kubevirtv1.Volume, facts *vmiFacts) (drift.Finding, bool) {
	infra := snapshot.InfraVM{Namespace: vmi.Namespace, Name: vmi.Name}
	claim := snapshot.ClaimName(v)
	tv := tenantEvidence(facts, infra, v.Name, claim)
	if tv.state == tenantWants || tv.state == tenantNone {
		return drift.Finding{}, false
	}
	vm, vs := facts.own.VM, hotplugStatus(vmi, v.Name)
	f := drift.Finding{
		Check:     StuckPublish,
		Namespace: vmi.Namespace,
		Object:    drift.ObjectRef{Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID},
		Volume:    v.Name,
		Severity:  drift.SeverityWarning,
		Message: fmt.Sprintf("hot-plug %q is in the spec of VM %s/%s but never became Ready in VMI %s/%s, and no tenant VolumeAttachment wants it there: an abandoned publish",
			v.Name, vm.Namespace, vm.Name, vmi.Namespace, vmi.Name),
		Evidence: []string{
			fmt.Sprintf("VM %s/%s spec lists hotpluggable volume %q (claim %s)", vm.Namespace, vm.Name, v.Name, claim),
			vmiSideFact(vmi, v.Name, vs),
		},
	}
	if snapshot.VMIVolume(vmi, v.Name) == nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("VMI %s/%s spec does not list %q either: virt-controller has not carried it over", vmi.Namespace, vmi.Name, v.Name))
	}
	f.Evidence = append(f.Evidence, tenantFacts(facts, tv, infra, v.Name, claim)...)
	if waiting := waitingElsewhere(in, vmi, v.Name, claim, facts); len(waiting) > 0 {
		f.Severity = drift.SeverityCritical
		f.Evidence = append(f.Evidence, waiting...)
		f.Evidence = append(f.Evidence, fmt.Sprintf("the CSI driver refuses to attach a ReadWriteOnce volume that any other VMI lists in its status (\"volume is attached to another VM\"): VMI %s/%s blocks it", vmi.Namespace, vmi.Name))
	}
	block, holdFacts := stuckPublishHolds(in, vmi, vm, v, vs, tv)
	f.Evidence = append(f.Evidence, holdFacts...)
	f.Action = drift.Action{Type: VMRemoveVolume, Safe: block == "", BlockedBy: block, Remedy: stuckPublishRemedy(in, vm, v.Name, block)}
	if block != "" {
		f.Severity = drift.SeverityInfo
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	return f, true
}

// waitingElsewhere states the tenant attachments of the volume on nodes
// that are not this VM: attaches the stuck hot-plug blocks.
func waitingElsewhere(in Input, vmi *snapshot.VMI, volume, claim string, facts *vmiFacts) []string {
	infra := snapshot.InfraVM{Namespace: vmi.Namespace, Name: vmi.Name}
	var out []string
	for i, t := range facts.tenants {
		if !t.Reachable || t.DriverMissing {
			continue
		}
		mine := map[string]bool{}
		for _, n := range facts.tenantNodes(i, infra) {
			mine[n.Name] = true
		}
		for _, h := range []string{volume, claim} {
			as := t.Attachments(h)
			for j := range as {
				a := &as[j]
				if mine[a.Node] || a.Attached || a.Deleting {
					continue
				}
				fact := fmt.Sprintf("tenant %q VolumeAttachment %s wants %q on node %s and is not attached", t.Name, a.Name, a.Handle, a.Node)
				if a.AttachError != "" {
					fact += fmt.Sprintf(" (attach error %q)", a.AttachError)
				}
				out = append(out, fact)
			}
			if claim == volume {
				break
			}
		}
	}
	return out
}

// stuckPublishHolds: what must change before the VM-level removevolume.
func stuckPublishHolds(in Input, vmi *snapshot.VMI, vm *snapshot.VM, v *kubevirtv1.Volume, vs *snapshot.VolumeStatus, tv tenantView) (drift.BlockReason, []string) {
	var h holds
	ref := vmi.Namespace + "/" + vmi.Name
	if IsTerminating(vmi) {
		h.add(VMITerminating, fmt.Sprintf("VMI %s is terminating", ref))
	}
	if IsTerminating(vm) {
		h.add(VMTerminating, fmt.Sprintf("VM %s/%s is terminating", vm.Namespace, vm.Name))
	}
	if vmi.Status.Phase != kubevirtv1.Running {
		h.add(VMINotRunning, fmt.Sprintf("VMI %s phase is %s, not Running: its hot-plugs are attached once it runs", ref, orNone(string(vmi.Status.Phase))))
	}
	if IsMigrating(vmi) {
		h.add(VMIMigrating, fmt.Sprintf("VMI %s is migrating: its hot-plugs move with it", ref))
	}
	if HasPendingAdd(vm, v.Name) {
		h.add(AdditionPending, fmt.Sprintf("VM %s/%s has a pending addvolume request for %q", vm.Namespace, vm.Name, v.Name))
	}
	if HasPendingRemove(vm, v.Name) {
		h.add(RemovalPending, fmt.Sprintf("VM %s/%s has a pending removevolume request for %q", vm.Namespace, vm.Name, v.Name))
	}
	if vs != nil && isDetaching(vs.Phase) {
		h.add(DetachInProgress, fmt.Sprintf("volume %q phase is %s: detach in progress", v.Name, vs.Phase))
	}
	switch tv.state {
	case tenantDetaching, tenantUnknown:
		h.add(tv.block, "")
	}
	// pkg/virt-api/rest/volumes.go:63-65,138-141: neither gate, 400.
	if g := in.hotplugGates(); g.Known && !g.HotplugVolumes && !g.Declarative {
		h.add(HotplugGateDisabled, in.gateFact(noGateFact, g))
	}
	return h.first, h.facts
}

func stuckPublishRemedy(in Input, vm *snapshot.VM, volume string, block drift.BlockReason) string {
	persist := ""
	if in.before19() {
		persist = " --persist"
	}
	cmd := fmt.Sprintf("virtctl removevolume %s -n %s --volume-name=%s%s", vm.Name, vm.Namespace, volume, persist)
	fix := fmt.Sprintf("remove the abandoned hot-plug from the VM spec (the guest never had it): `%s --dry-run && %s`; "+
		"then the tenant's attach of the volume, on this node or another, can succeed", cmd, cmd)
	var b strings.Builder
	switch block {
	case "":
		return fix
	case TenantUnreachable, TenantIncomplete, TenantNodeUnmapped:
		fmt.Fprintf(&b, "first make every tenant of namespace %s readable and its nodes mapped to infra VMs (so that no VolumeAttachment can want it unseen); then %s", vm.Namespace, fix)
	case DetachInProgress:
		fmt.Fprintf(&b, "wait for the detach in progress to finish, then re-run the audit; if it stays: %s", fix)
	case HotplugGateDisabled:
		fmt.Fprintf(&b, "turn on a hot-plug feature gate (DeclarativeHotplugVolumes or HotplugVolumes) in the KubeVirt CR, then %s", fix)
	default:
		fmt.Fprintf(&b, "wait until it no longer holds (%s), then re-run the audit; if it stays: %s", block, fix)
	}
	return b.String()
}
