package check

import (
	"fmt"

	"github.com/tether-dev/tether/internal/snapshot"
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
	block    BlockReason
	names    []string
	evidence []string
}

// tenantEvidence asks the tenants that apply to the VMI's namespace whether
// they attach the volume (by its name or its claim) to the tenant node named
// after the VMI.
func tenantEvidence(tenants []*snapshot.TenantIndex, node, volume, claim string) tenantView {
	var v tenantView
	for _, t := range tenants {
		state, block, ev := oneTenant(t, node, volume, claim)
		if state == tenantWants {
			return tenantView{state: tenantWants}
		}
		v.names = append(v.names, t.Name)
		v.evidence = append(v.evidence, ev...)
		if state > v.state {
			v.state, v.block = state, block
		} else if state == tenantUnknown && block == TenantUnreachable {
			v.block = TenantUnreachable
		}
	}
	return v
}

func oneTenant(t *snapshot.TenantIndex, node, volume, claim string) (tenantState, BlockReason, []string) {
	if !t.Reachable {
		return tenantUnknown, TenantUnreachable, []string{fmt.Sprintf("tenant %q is unreachable: %s", t.Name, orUnknown(t.Error))}
	}
	var deleting []string
	hs, n := [2]string{volume, claim}, 2
	if claim == "" || claim == volume {
		n = 1
	}
	for _, h := range hs[:n] {
		for _, a := range t.Attachments(h) {
			if a.Node != node {
				continue
			}
			if !a.Deleting {
				return tenantWants, "", nil
			}
			deleting = append(deleting, fmt.Sprintf("tenant %q VolumeAttachment %s (node %q, volume handle %q) is being deleted: detach in progress", t.Name, a.Name, a.Node, a.Handle))
		}
	}
	if len(deleting) > 0 {
		return tenantDetaching, DetachInProgress, deleting
	}
	if un := t.Unresolved(node); len(un) > 0 {
		a := un[0]
		return tenantUnknown, TenantIncomplete, []string{fmt.Sprintf("tenant %q VolumeAttachment %s on node %q uses PV %q whose volume handle is unknown", t.Name, a.Name, a.Node, a.PV)}
	}
	if !t.HasNode(node) {
		// Not one of this tenant's nodes: its attachments say nothing
		// about this VM's volumes.
		return tenantNone, "", nil
	}
	return tenantNotWanted, "", []string{fmt.Sprintf("tenant %q has no VolumeAttachment for node %q with volume handle %s (and has a Node %q)", t.Name, node, handles(volume, claim), node)}
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
