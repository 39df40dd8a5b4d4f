package check

import (
	"fmt"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

func buildVolumeFinding(in Input, sub *subject, v verdict) drift.Finding {
	vmi := sub.vmi
	block, holdFacts := volumeHolds(in, sub, v)
	f := drift.Finding{
		Check:     OrphanHotplugVolume,
		Namespace: vmi.Namespace,
		Object:    drift.ObjectRef{Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID},
		Volume:    sub.volume(),
		Severity:  v.severity,
		Action:    drift.Action{Type: v.action, Safe: block == "", BlockedBy: block},
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	if !in.quiet {
		ev := make([]string, 0, 1+len(v.evidence)+len(holdFacts))
		ev = append(ev, sub.listFact())
		ev = append(ev, v.evidence...)
		ev = append(ev, holdFacts...)
		f.Message, f.Evidence, f.Action.Remedy = v.message, ev, volumeRemedy(in, sub, v, block)
	}
	return f
}

func (s *subject) listFact() string {
	hp, claim := s.status.HotplugVolume, ""
	if c := s.claimName(); c != "" {
		claim = fmt.Sprintf("claim %s, ", c)
	}
	return fmt.Sprintf("VMI %s/%s lists hot-plug volume %q (%sattachment pod %s, phase %s)",
		s.vmi.Namespace, s.vmi.Name, s.volume(), claim, orNone(hp.AttachPodName), orNone(string(s.status.Phase)))
}

// holds collects the reasons an action must wait; the first one recorded is
// the one reported as blockedBy, all of them become evidence.
type holds struct {
	first drift.BlockReason
	facts []string
	// quiet: only the reasons are kept, and facts given to note are not
	// written (Input.quiet).
	quiet bool
}

func (h *holds) add(r drift.BlockReason, fact string) {
	if h.first == "" {
		h.first = r
	}
	if fact != "" {
		h.facts = append(h.facts, fact)
	}
}

// note is add with a fact that fact writes, unless the holds are quiet.
func (h *holds) note(r drift.BlockReason, fact func() string) {
	if h.quiet {
		h.add(r, "")
		return
	}
	h.add(r, fact())
}

// volumeHolds applies the rules no policy turns off (terminating, migrating,
// not running, removal or detach under way, volume not ready), then the
// verdict's own block, then what the API would refuse (hotpluggable flag,
// feature gate), in that order.
func volumeHolds(in Input, sub *subject, v verdict) (drift.BlockReason, []string) {
	h := holds{quiet: in.quiet}
	vmi, vm, name := sub.vmi, sub.own.VM, sub.volume()
	if IsTerminating(vmi) {
		h.note(VMITerminating, func() string {
			return fmt.Sprintf("VMI %s/%s is terminating (deletionTimestamp %s)", vmi.Namespace, vmi.Name, vmi.DeletionTimestamp.UTC().Format(time.RFC3339))
		})
	}
	if vm != nil && IsTerminating(vm) {
		h.note(VMTerminating, func() string {
			return fmt.Sprintf("VM %s/%s is terminating (deletionTimestamp %s)", vm.Namespace, vm.Name, vm.DeletionTimestamp.UTC().Format(time.RFC3339))
		})
	}
	if IsMigrating(vmi) {
		ms := vmi.Status.MigrationState
		h.note(VMIMigrating, func() string {
			return fmt.Sprintf("VMI %s/%s is migrating (node %s to %s, migration uid %s)", vmi.Namespace, vmi.Name, orNone(ms.SourceNode), orNone(ms.TargetNode), orNone(string(ms.MigrationUID)))
		})
	}
	if vmi.Status.Phase != kubevirtv1.Running {
		h.note(VMINotRunning, func() string {
			return fmt.Sprintf("VMI %s/%s phase is %s, not Running", vmi.Namespace, vmi.Name, orNone(string(vmi.Status.Phase)))
		})
	}
	if vm != nil && HasPendingRemove(vm, name) {
		h.note(RemovalPending, func() string {
			return fmt.Sprintf("VM %s/%s has a pending removevolume request for %q", vm.Namespace, vm.Name, name)
		})
	}
	if vm != nil && HasPendingAdd(vm, name) {
		h.note(AdditionPending, func() string {
			return fmt.Sprintf("VM %s/%s has a pending addvolume request for %q", vm.Namespace, vm.Name, name)
		})
	}
	volumePhaseHolds(&h, sub)
	if v.block != "" {
		h.add(v.block, "")
	}
	apiHolds(&h, in, sub, v.action)
	return h.first, h.facts
}

func volumePhaseHolds(h *holds, sub *subject) {
	vmi, name, phase := sub.vmi, sub.volume(), sub.status.Phase
	switch {
	case isDetaching(phase):
		h.note(DetachInProgress, func() string { return fmt.Sprintf("volume %q phase is %s: detach in progress", name, phase) })
	case snapshot.VMIVolume(vmi, name) == nil:
		h.note(DetachInProgress, func() string {
			return fmt.Sprintf("VMI %s/%s spec no longer lists volume %q: detach in progress", vmi.Namespace, vmi.Name, name)
		})
	case phase != kubevirtv1.VolumeReady:
		h.note(VolumeNotReady, func() string { return fmt.Sprintf("volume %q phase is %s, not Ready", name, orNone(string(phase))) })
	}
}

// apiHolds records what the removevolume API itself would refuse.
func apiHolds(h *holds, in Input, sub *subject, action drift.ActionType) {
	vmi, name := sub.vmi, sub.volume()
	switch action {
	case VMRemoveVolume:
		vm := sub.own.VM
		if !snapshot.Hotpluggable(snapshot.VMVolume(vm, name)) {
			h.note(VolumeNotHotpluggable, func() string {
				return fmt.Sprintf("VM %s/%s spec volume %q is not marked hotpluggable", vm.Namespace, vm.Name, name)
			})
		}
		// pkg/virt-api/rest/volumes.go:63-65,138-141: neither gate, 400.
		if g := in.hotplugGates(); g.Known && !g.HotplugVolumes && !g.Declarative {
			h.add(HotplugGateDisabled, in.gateFact(noGateFact, g))
		}
	case VMIRemoveVolume:
		if vol := snapshot.VMIVolume(vmi, name); vol != nil && !snapshot.Hotpluggable(vol) {
			h.note(VolumeNotHotpluggable, func() string {
				return fmt.Sprintf("VMI %s/%s spec volume %q is not marked hotpluggable", vmi.Namespace, vmi.Name, name)
			})
		}
		vmiRouteHolds(h, in, in.hotplugGates(), sub.own.Owner != nil)
	}
}

// noGateFact begins the evidence that neither hot-plug gate is on.
const noGateFact = "neither hot-plug gate is on, so the volume API refuses every call (400): "

// vmiRouteHolds records whether virt-api serves the VMI-level call under
// the gates in effect (pkg/virt-api/rest/volumes.go:63-65,220-222). For a
// standalone VMI unknown gates are left to the server's dry run.
func vmiRouteHolds(h *holds, in Input, gates snapshot.HotplugGates, owned bool) {
	switch {
	case !gates.Known && owned:
		h.add(HotplugGateUnknown, "KubeVirt's hot-plug gates are unknown ("+gates.Basis+"): HotplugVolumes may be off, and the VMI-level removevolume API refuses VM-owned VMIs without it")
	case gates.VMIRoute(owned) || !gates.Known:
	case owned:
		h.add(HotplugGateDisabled, in.gateFact("the VMI-level removevolume API refuses VM-owned VMIs without the HotplugVolumes gate (400 \"owned by a VM\"): ", gates))
	default:
		h.add(HotplugGateDisabled, in.gateFact(noGateFact, gates))
	}
}
