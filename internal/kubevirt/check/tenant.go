package check

import (
	"fmt"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// tenantState is what the tenant clusters say about one VMI volume, ordered
// from weakest to strongest: the strongest state of any tenant wins.
type tenantState int

const (
	// tenantNone: no tenant is configured for the VMI's namespace.
	tenantNone tenantState = iota
	// tenantNotWanted: every applicable tenant was read and none attaches it.
	tenantNotWanted
	// tenantUnknown: a tenant could not be read or its evidence is incomplete.
	tenantUnknown
	// tenantDetaching: a tenant attachment exists but is being deleted.
	tenantDetaching
	// tenantWants: a tenant attaches the volume to the VMI's node.
	tenantWants
)

// tenantView is the combined tenant evidence for one VMI volume.
type tenantView struct {
	state tenantState
	// block is TenantUnreachable or TenantIncomplete when state is unknown,
	// DetachInProgress when detaching.
	block drift.BlockReason
	names []string
}

// tenantEvidence asks the tenants that apply to the VMI's namespace whether
// they attach the volume (by its name or its claim) to a tenant node that
// is the VMI's VM (snapshot.ResolveTenantNode). It builds no text: that is
// tenantFacts' work.
func tenantEvidence(facts *vmiFacts, vm snapshot.InfraVM, volume, claim string) tenantView {
	var v tenantView
	for i, t := range facts.tenants {
		state, block, _ := oneTenant(t, facts.tenantNodes(i, vm), vm, volume, claim, false)
		if state == tenantWants {
			return tenantView{state: tenantWants}
		}
		if state == tenantNone {
			continue
		}
		v.names = append(v.names, t.Name)
		if state > v.state {
			v.state, v.block = state, block
		} else if state == tenantUnknown && block == TenantUnreachable {
			v.block = TenantUnreachable
		}
	}
	return v
}

// tenantFacts returns the facts behind tv, the view tenantEvidence gave
// for these arguments, tenant by tenant: nil when no tenant speaks about the
// volume (or one wants it).
func tenantFacts(facts *vmiFacts, tv tenantView, vm snapshot.InfraVM, volume, claim string) []string {
	if tv.state == tenantNone || tv.state == tenantWants {
		return nil
	}
	var out []string
	for i, t := range facts.tenants {
		if state, _, ev := oneTenant(t, facts.tenantNodes(i, vm), vm, volume, claim, true); state != tenantNone {
			out = append(out, ev...)
		}
	}
	return out
}

// oneTenant judges one tenant, refusing to call a volume "not wanted"
// unless every step is certain: the tenant was read whole, its CSI driver
// exists, every one of its nodes maps to one infra VM, one of its nodes
// (nodes: those that map to vm) is this VM, the volume is one of the
// tenant's volumes (a PV of its driver has the handle), and neither a
// VolumeAttachment nor the kubelet of that node wants it. Only with explain
// does it say why (wanted volumes never need to).
func oneTenant(t *snapshot.TenantIndex, nodes []snapshot.TenantNodeRef, vm snapshot.InfraVM, volume, claim string, explain bool) (tenantState, drift.BlockReason, []string) {
	var ev []string
	if !t.Reachable {
		if explain {
			ev = []string{fmt.Sprintf("tenant %q is unreachable: %s", t.Name, orUnknown(t.Error))}
		}
		return tenantUnknown, TenantUnreachable, ev
	}
	if t.DriverMissing {
		if explain {
			ev = []string{fmt.Sprintf("tenant %q has no CSIDriver %q: its VolumeAttachments cannot be read as the driver's", t.Name, t.Driver)}
		}
		return tenantUnknown, TenantIncomplete, ev
	}
	wanted, detaching, deleting := tenantUse(t, nodes, volume, claim, explain)
	if wanted {
		return tenantWants, "", nil
	}
	if explain {
		for _, node := range nodes {
			ev = append(ev, fmt.Sprintf("tenant %q node %s -> infra VM %s by %s", t.Name, node.Name, vm, node.How))
		}
	}
	if detaching {
		return tenantDetaching, DetachInProgress, append(ev, deleting...)
	}
	if reason, why := tenantUnsure(t, nodes, vm, explain); reason != "" {
		if explain {
			ev = append(ev, why)
		}
		return tenantUnknown, reason, ev
	}
	if len(nodes) == 0 {
		// Not one of this tenant's nodes: its attachments say nothing
		// about this VM's volumes.
		return tenantNone, "", nil
	}
	if !t.HasVolume(volume) && !t.HasVolume(claim) {
		// No PV of the tenant's driver names it: not the tenant's volume.
		return tenantNone, "", nil
	}
	if explain {
		ev = append(ev, fmt.Sprintf("tenant %q has a PV of driver %s with volume handle %s, and neither a VolumeAttachment nor the kubelet of node %s wants it",
			t.Name, t.Driver, handles(volume, claim), nodes[0].Name))
	}
	return tenantNotWanted, "", ev
}

// tenantUse says whether tenant t's kubelet or a VolumeAttachment on one of
// nodes uses the volume (by its name or its claim's), or else whether only
// attachments being deleted do (with, when explain, the evidence of each).
func tenantUse(t *snapshot.TenantIndex, nodes []snapshot.TenantNodeRef, volume, claim string, explain bool) (wanted, detaching bool, deleting []string) {
	hs, n := [2]string{volume, claim}, 2
	if claim == "" || claim == volume {
		n = 1
	}
	for _, node := range nodes {
		for _, h := range hs[:n] {
			if t.KubeletUses(node.Name, h) {
				return true, false, nil
			}
			as := t.Attachments(h)
			for j := range as {
				a := &as[j] // not copied: an attachment is a large struct
				if a.Node != node.Name {
					continue
				}
				if !a.Deleting {
					return true, false, nil
				}
				detaching = true
				if explain {
					deleting = append(deleting, fmt.Sprintf("tenant %q VolumeAttachment %s (node %q, volume handle %q) is being deleted: detach in progress", t.Name, a.Name, a.Node, a.Handle))
				}
			}
		}
	}
	return false, detaching, deleting
}

// tenantUnsure returns why tenant t's attachments cannot rule out a use by
// VM vm, with its evidence: an attachment on one of nodes whose PV's volume
// handle is unknown (TenantIncomplete), a node that may or may not be vm,
// or a node mapped to no VM (TenantNodeUnmapped); "" when they can. The
// evidence is written only when explain is set.
func tenantUnsure(t *snapshot.TenantIndex, nodes []snapshot.TenantNodeRef, vm snapshot.InfraVM, explain bool) (reason drift.BlockReason, why string) {
	say := func(format string, args ...any) {
		if explain {
			why = fmt.Sprintf(format, args...)
		}
	}
	for _, node := range nodes {
		if un := t.Unresolved(node.Name); len(un) > 0 {
			a := un[0]
			say("tenant %q VolumeAttachment %s on node %q uses PV %q whose volume handle is unknown", t.Name, a.Name, a.Node, a.PV)
			return TenantIncomplete, why
		}
	}
	if amb := t.Ambiguous(vm); len(amb) > 0 {
		say("tenant %q: %s", t.Name, amb[0])
		return TenantNodeUnmapped, why
	}
	if unknown := t.UnknownNodes(); len(unknown) > 0 {
		// Such a node may be this VM: its attachments cannot be ruled out.
		say("tenant %q: %s", t.Name, unknown[0])
		return TenantNodeUnmapped, why
	}
	return "", ""
}

func handles(volume, claim string) string {
	if claim == "" || claim == volume {
		return fmt.Sprintf("%q", volume)
	}
	return fmt.Sprintf("%q or %q", volume, claim)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown error"
	}
	return s
}
