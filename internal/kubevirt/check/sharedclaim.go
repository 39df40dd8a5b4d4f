package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	vmi       *snapshot.VMI
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
	// First pass: which claims have two users, reading only names (no
	// evidence, no labels, no disks).
	type claimKey struct{ ns, claim string }
	type userKey struct{ kind, name string }
	multi := claimsWithTwoUsers(in)
	if len(multi) == 0 {
		return nil
	}
	// Second pass, only in the namespaces that have such claims: their
	// users, with the details.
	byClaim := map[claimKey]map[userKey]*claimUser{}
	for ns, claims := range multi {
		inMulti := func(claim, _, _ string) bool { return claims[claim] }
		eachClaimUse(in, ns, inMulti, func(at *claimUseAt) {
			k := claimKey{at.ns, at.claim}
			users := byClaim[k]
			if users == nil {
				users = map[userKey]*claimUser{}
				byClaim[k] = users
			}
			who := userKey{at.kind, at.name}
			u := users[who]
			if u == nil {
				u = &claimUser{kind: at.kind, name: at.name}
				users[who] = u
			}
			if how := at.how(); !slices.Contains(u.how, how) {
				u.how = append(u.how, how)
			}
			u.shareable = u.shareable || at.shareable()
			u.selected = u.selected || in.scope.labels(at.labels)
			if at.vmi != nil {
				u.vmi = at.vmi
			}
		})
	}
	var out []drift.Finding
	for k, byKey := range byClaim {
		if len(byKey) < 2 {
			continue // one user after all (claimsWithTwoUsers)
		}
		users := make([]*claimUser, 0, len(byKey))
		for _, u := range byKey {
			users = append(users, u)
		}
		if f, ok := decideSharedClaim(in, k.ns, k.claim, users); ok {
			out = append(out, f)
		}
	}
	return out
}

// claimsWithTwoUsers returns, by namespace, the claims that two or more
// users may reference: every claim that has two users as eachClaimUse
// counts them, and perhaps a few more, which the second pass, counting by
// name, drops. When the pass has its claim table (DanglingVolumeReference,
// which runs first, fills it), it reads no names, which is most of the
// cost of a walk over every VM and VMI: only a claim that exists can
// conflict, so it counts the claims the table found (vmVolumeClaims,
// vmiVolumeClaims), in a table of the snapshot's PVCs; and it tells users
// apart by their object, the VM (of a template volume or an addvolume
// request, or the one the owner memo resolves for a VMI) or the VMI. Two
// references of one object are one user by name too, so no user of the
// check is merged with another. Without the table (the controller's
// namespace loop), counting by name costs less than filling it.
func claimsWithTwoUsers(in Input) map[string]map[string]bool {
	if in.memo.claims.vmiAt == nil {
		return claimsByName(in)
	}
	first := make([]*metav1.ObjectMeta, len(in.Snapshot.PVCs))
	two := false
	note := func(c volPVC, user *metav1.ObjectMeta) {
		switch f := first[c.at-1]; {
		case f == nil:
			first[c.at-1] = user
		case f != user && f != &twoUsers:
			first[c.at-1], two = &twoUsers, true
		}
	}
	for k := range in.Snapshot.VMs {
		vm := &in.Snapshot.VMs[k]
		if !named(vm) || IsTerminating(vm) || !in.scope.namespace(vm.Namespace) {
			continue
		}
		for j, c := range in.vmVolumeClaims(k) {
			if c.at > 0 && (in.scope.prefix == "" || in.scope.volume(snapshot.ClaimName(&vm.Spec.Template.Spec.Volumes[j]))) {
				note(c, &vm.ObjectMeta)
			}
		}
		for _, r := range vm.Status.VolumeRequests {
			if o := r.AddVolumeOptions; o != nil && o.VolumeSource != nil {
				if claim := snapshot.HotplugSourceClaim(o.VolumeSource); claim != "" && in.scope.volume(claim) {
					if at, _ := in.Index.PVCIndex(vm.Namespace, claim); at >= 0 {
						note(volPVC{at: int32(at + 1)}, &vm.ObjectMeta)
					}
				}
			}
		}
	}
	for i := range in.Snapshot.VMIs {
		vmi := &in.Snapshot.VMIs[i]
		if !named(vmi) || vmi.IsFinal() || !in.scope.namespace(vmi.Namespace) {
			continue
		}
		user := &vmi.ObjectMeta
		if vm := in.owner(i).VM; vm != nil {
			user = &vm.ObjectMeta
		}
		for j, c := range in.vmiVolumeClaims(i) {
			if c.at > 0 && (in.scope.prefix == "" || in.scope.volume(snapshot.ClaimName(&vmi.Spec.Volumes[j]))) {
				note(c, user)
			}
		}
	}
	if !two {
		return nil
	}
	multi := map[string]map[string]bool{}
	for at, f := range first {
		if f == &twoUsers {
			pvc := &in.Snapshot.PVCs[at]
			if multi[pvc.Namespace] == nil {
				multi[pvc.Namespace] = map[string]bool{}
			}
			multi[pvc.Namespace][pvc.Name] = true
		}
	}
	return multi
}

// twoUsers marks, in claimsWithTwoUsers's table, a claim of two users.
var twoUsers metav1.ObjectMeta

// claimsByName is claimsWithTwoUsers without the pass's claim table: it
// returns the claims that two or more users reference, as eachClaimUse
// counts them, reading their names, one namespace at a time in one map
// keyed by claim name alone, emptied between namespaces.
func claimsByName(in Input) map[string]map[string]bool {
	type first struct {
		vm, multi bool
		name      string
	}
	var seen map[string]first
	var multi map[string]map[string]bool
	for _, ns := range in.Index.VMNamespaces() {
		if seen == nil {
			// Made to the size of the first namespace, at two claims per
			// VMI, so that it seldom grows.
			seen = make(map[string]first, 2*len(in.Index.VMIsIn(ns)))
		}
		clear(seen)
		eachClaimUse(in, ns, func(claim, kind, name string) bool {
			f, ok := seen[claim]
			switch {
			case !ok:
				seen[claim] = first{vm: kind == "VM", name: name}
			case !f.multi && (f.vm != (kind == "VM") || f.name != name):
				seen[claim] = first{multi: true}
				if multi[ns] == nil {
					if multi == nil {
						multi = map[string]map[string]bool{}
					}
					multi[ns] = map[string]bool{}
				}
				multi[ns][claim] = true
			}
			return false
		}, nil)
	}
	return multi
}

// claimUseAt is one reference to a claim by a VM or a VMI. It holds
// references only; what takes reading (shareable) is computed on demand.
type claimUseAt struct {
	ns, claim, kind, name string
	// via and volume say where: "spec volume", "addvolume request" or
	// "VMI <name> volume" (see how).
	via, volume string
	labels      map[string]string
	vmi         *snapshot.VMI
	// spec is the VMI spec (or VM template spec) whose disk the volume
	// is; request the addvolume request's options.
	spec    *snapshot.VMISpec
	request *kubevirtv1.AddVolumeOptions
}

// shareable says whether the referencing disk is marked shareable.
func (u *claimUseAt) shareable() bool {
	if o := u.request; o != nil {
		return o.Disk != nil && o.Disk.Shareable != nil && *o.Disk.Shareable
	}
	return u.spec != nil && diskShareable(u.spec, u.volume)
}

// how says where the reference is, for the evidence.
func (u claimUseAt) how() string {
	switch u.via {
	case "spec":
		return "spec volume " + u.volume
	case "request":
		return "addvolume request " + u.volume
	}
	return "VMI " + u.vmi.Name + " volume " + u.volume
}

// eachClaimUse calls want for every in-scope claim reference in namespace
// ns of a VM not being deleted (template volumes, addvolume requests) and
// of a VMI not finished (spec volumes, counted as its VM's when VM-owned),
// with the user's kind and name; only where want says yes does it gather
// the reference's details and call fn with them (fn must not keep them).
// The one walk serves both passes of the check: want alone is cheap.
func eachClaimUse(in Input, ns string, want func(claim, kind, name string) bool, fn func(*claimUseAt)) {
	if !in.scope.namespace(ns) {
		return
	}
	var u claimUseAt // reused
	for _, vm := range in.Index.VMsIn(ns) {
		if !named(vm) || IsTerminating(vm) {
			continue
		}
		// The template's labels are read only for a reference fn gets.
		labels := func() map[string]string {
			if t := vm.Spec.Template; t != nil {
				return t.ObjectMeta.Labels
			}
			return nil
		}
		if t := vm.Spec.Template; t != nil {
			for j := range t.Spec.Volumes {
				v := &t.Spec.Volumes[j]
				if claim := snapshot.ClaimName(v); claim != "" && in.scope.volume(claim) && want(claim, "VM", vm.Name) {
					u = claimUseAt{ns: ns, claim: claim, kind: "VM", name: vm.Name, labels: labels(), via: "spec", volume: v.Name, spec: &t.Spec}
					fn(&u)
				}
			}
		}
		for _, r := range vm.Status.VolumeRequests {
			if o := r.AddVolumeOptions; o != nil && o.VolumeSource != nil {
				if claim := snapshot.HotplugSourceClaim(o.VolumeSource); claim != "" && in.scope.volume(claim) && want(claim, "VM", vm.Name) {
					u = claimUseAt{ns: ns, claim: claim, kind: "VM", name: vm.Name, labels: labels(), via: "request", volume: o.Name, request: o}
					fn(&u)
				}
			}
		}
	}
	for _, i := range in.Index.VMIIndexesIn(ns) {
		vmi := &in.Snapshot.VMIs[i]
		if !named(vmi) || vmi.IsFinal() {
			continue
		}
		kind, name := "VMI", vmi.Name
		if own := in.owner(i).Owner; own != nil { // VMOwner, resolved once per pass
			kind, name = "VM", own.Name
		}
		for j := range vmi.Spec.Volumes {
			v := &vmi.Spec.Volumes[j]
			if claim := snapshot.ClaimName(v); claim != "" && in.scope.volume(claim) && want(claim, kind, name) {
				u = claimUseAt{ns: ns, claim: claim, kind: kind, name: name, labels: vmi.Labels, vmi: vmi, via: "vmi", volume: v.Name, spec: &vmi.Spec}
				fn(&u)
			}
		}
	}
}

func decideSharedClaim(in Input, ns, claim string, users []*claimUser) (drift.Finding, bool) {
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
	selected := false
	for _, u := range users {
		if u.shareable {
			return drift.Finding{}, false
		}
		selected = selected || u.selected
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
func diskShareable(spec *snapshot.VMISpec, name string) bool {
	for _, d := range spec.Domain.Devices.Disks {
		if d.Name == name {
			return d.Shareable != nil && *d.Shareable
		}
	}
	return false
}

func modeList(modes []corev1.PersistentVolumeAccessMode) string {
	out := make([]string, len(modes))
	for i, m := range modes {
		out[i] = string(m)
	}
	return strings.Join(out, ",")
}
