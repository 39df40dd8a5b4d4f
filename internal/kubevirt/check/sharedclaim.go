package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// SharedClaimConflict: a claim only one node may use, referenced by two or
// more VMs. Report only.
const SharedClaimConflict = "SharedClaimConflict"

// claimUser is one VM (or standalone VMI) that references a claim.
type claimUser struct {
	kind, name string
	// how lists where it references the claim ("spec volume disk0", ...).
	how []string
	// vmi is its VMI when that VMI is not finished and its spec uses the
	// claim: then it holds the claim.
	vmi       *kubevirtv1.VirtualMachineInstance
	shareable bool
	// selected: the scope's selector matches it (the VM's template
	// labels, the VMI's labels).
	selected bool
}

func (u *claimUser) label() string { return u.kind + " " + u.name }

// FindSharedClaimConflicts proves that a claim only one node may use (its
// access modes have neither ReadWriteMany nor ReadOnlyMany) is referenced by
// two or more VMs of its namespace — spec volumes (persistentVolumeClaim, or
// dataVolume, whose PVC CDI names after it), hot-plugs, and addvolume
// requests not yet applied — with no user marking the disk shareable. Two
// VMs cannot both start on it: one waits for ever, or, on one node, both
// write to one filesystem. The finding names who holds it (the VMs whose
// VMI runs and uses the claim) and who waits. Never acted on: which VM
// should keep the claim is the owner's decision.
//
// Decisions, per in-scope claim of a namespace in scope:
//   - users: VMs not being deleted (their template volumes and pending
//     addvolume requests) and VMIs not finished (their spec volumes,
//     counted as their owning VM, or as themselves when standalone); a VM
//     and its own VMI are one user;
//   - fewer than two users, or none that the scope's selector matches:
//     no finding;
//   - the PVC is missing or its access modes are unknown, shared
//     (ReadWriteMany, ReadOnlyMany) or any user's disk is shareable: no
//     finding;
//   - finding (warning), subject the PVC, action None.
func FindSharedClaimConflicts(in Input) []drift.Finding {
	in = in.ready()
	byNS := map[string]map[string]map[string]*claimUser{} // ns → claim → user key → user
	add := func(ns, claim, kind, name, how string, shareable bool, lbl map[string]string) *claimUser {
		if claim == "" || !in.scope.volume(claim) {
			return nil
		}
		claims := byNS[ns]
		if claims == nil {
			claims = map[string]map[string]*claimUser{}
			byNS[ns] = claims
		}
		users := claims[claim]
		if users == nil {
			users = map[string]*claimUser{}
			claims[claim] = users
		}
		u := users[kind+"/"+name]
		if u == nil {
			u = &claimUser{kind: kind, name: name}
			users[kind+"/"+name] = u
		}
		if !slices.Contains(u.how, how) {
			u.how = append(u.how, how)
		}
		u.shareable = u.shareable || shareable
		u.selected = u.selected || in.scope.labels(lbl)
		return u
	}
	for i := range in.Snapshot.VMs {
		vm := &in.Snapshot.VMs[i]
		if !named(vm) || !in.scope.namespace(vm.Namespace) || IsTerminating(vm) {
			continue
		}
		if t := vm.Spec.Template; t != nil {
			for j := range t.Spec.Volumes {
				v := &t.Spec.Volumes[j]
				add(vm.Namespace, snapshot.ClaimName(v), "VM", vm.Name, "spec volume "+v.Name, diskShareable(&t.Spec, v.Name), t.ObjectMeta.Labels)
			}
		}
		for _, r := range vm.Status.VolumeRequests {
			if o := r.AddVolumeOptions; o != nil && o.VolumeSource != nil {
				shareable := o.Disk != nil && o.Disk.Shareable != nil && *o.Disk.Shareable
				var lbl map[string]string
				if vm.Spec.Template != nil {
					lbl = vm.Spec.Template.ObjectMeta.Labels
				}
				add(vm.Namespace, hotplugSourceClaim(o.VolumeSource), "VM", vm.Name, "addvolume request "+o.Name, shareable, lbl)
			}
		}
	}
	for i := range in.Snapshot.VMIs {
		vmi := &in.Snapshot.VMIs[i]
		if !named(vmi) || !in.scope.namespace(vmi.Namespace) || vmi.IsFinal() {
			continue
		}
		kind, name := "VMI", vmi.Name
		if own := VMOwner(vmi); own != nil {
			kind, name = "VM", own.Name
		}
		for j := range vmi.Spec.Volumes {
			v := &vmi.Spec.Volumes[j]
			if u := add(vmi.Namespace, snapshot.ClaimName(v), kind, name, "VMI "+vmi.Name+" volume "+v.Name, diskShareable(&vmi.Spec, v.Name), vmi.Labels); u != nil {
				u.vmi = vmi
			}
		}
	}
	var out []drift.Finding
	for ns, claims := range byNS {
		for claim, users := range claims {
			if len(users) < 2 {
				continue
			}
			if f, ok := decideSharedClaim(in, ns, claim, users); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

func decideSharedClaim(in Input, ns, claim string, byKey map[string]*claimUser) (drift.Finding, bool) {
	pvc := in.Index.PVC(ns, claim)
	if pvc == nil {
		return drift.Finding{}, false
	}
	modes := pvc.Status.AccessModes
	if len(modes) == 0 {
		modes = pvc.Spec.AccessModes
	}
	if len(modes) == 0 || slices.Contains(modes, corev1.ReadWriteMany) || slices.Contains(modes, corev1.ReadOnlyMany) {
		return drift.Finding{}, false
	}
	users := make([]*claimUser, 0, len(byKey))
	selected := false
	for _, u := range byKey {
		if u.shareable {
			return drift.Finding{}, false
		}
		selected = selected || u.selected
		users = append(users, u)
	}
	if !selected {
		return drift.Finding{}, false
	}
	sort.Slice(users, func(i, j int) bool { return users[i].label() < users[j].label() })
	var holders, waiters []string
	ev := []string{fmt.Sprintf("PVC %s/%s has access modes %s: one node at a time, and no user marks its disk shareable", ns, claim, modeList(modes))}
	for _, u := range users {
		if u.vmi != nil {
			holders = append(holders, u.label())
			ev = append(ev, fmt.Sprintf("held by %s: VMI %s is %s on node %s (%s)", u.label(), u.vmi.Name, orNone(string(u.vmi.Status.Phase)), orNone(u.vmi.Status.NodeName), strings.Join(u.how, ", ")))
		} else {
			waiters = append(waiters, u.label())
			ev = append(ev, fmt.Sprintf("waited for by %s, which has no running VMI using it (%s)", u.label(), strings.Join(u.how, ", ")))
		}
	}
	msg := fmt.Sprintf("claim %s/%s, usable by one node at a time, is referenced by %d VMs: ", ns, claim, len(users))
	switch {
	case len(holders) > 1:
		msg += fmt.Sprintf("%s use it at once", strings.Join(holders, " and "))
	case len(holders) == 1:
		msg += fmt.Sprintf("%s holds it, %s cannot start or attach it", holders[0], strings.Join(waiters, ", "))
	default:
		msg += fmt.Sprintf("none runs now; only one of %s can", strings.Join(waiters, ", "))
	}
	f := drift.Finding{
		Check:     SharedClaimConflict,
		Namespace: ns,
		Object:    drift.ObjectRef{Kind: "PersistentVolumeClaim", Name: pvc.Name, UID: pvc.UID},
		Volume:    claim,
		Severity:  drift.SeverityWarning,
		Message:   msg,
		Evidence:  ev,
		Action: drift.Action{Type: drift.None, BlockedBy: ClaimReferencedTwice, Remedy: fmt.Sprintf("decide which VM keeps claim %s; remove it from the others "+
			"(a hot-plug: `virtctl removevolume <vm> -n %s --volume-name=<volume> --dry-run` then without --dry-run; a spec volume: `kubectl edit vm <vm> -n %s` while that VM is stopped), "+
			"or give each VM its own copy (a DataVolume cloned from it), or move it to a ReadWriteMany storage class; never stop the holder without its owner's consent",
			claim, ns, ns)},
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	return f, true
}

// diskShareable reports whether the disk of volume name in spec is marked
// shareable (spec.domain.devices.disks[].shareable).
func diskShareable(spec *kubevirtv1.VirtualMachineInstanceSpec, name string) bool {
	for _, d := range spec.Domain.Devices.Disks {
		if d.Name == name {
			return d.Shareable != nil && *d.Shareable
		}
	}
	return false
}

// hotplugSourceClaim is the claim of an addvolume request's source.
func hotplugSourceClaim(s *kubevirtv1.HotplugVolumeSource) string {
	switch {
	case s.PersistentVolumeClaim != nil:
		return s.PersistentVolumeClaim.ClaimName
	case s.DataVolume != nil:
		return s.DataVolume.Name
	}
	return ""
}

func modeList(modes []corev1.PersistentVolumeAccessMode) string {
	out := make([]string, len(modes))
	for i, m := range modes {
		out[i] = string(m)
	}
	return strings.Join(out, ",")
}
