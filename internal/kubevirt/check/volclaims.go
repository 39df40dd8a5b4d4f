package check

import (
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// volPVC is the claim a VM or VMI spec volume names (snapshot.ClaimName), as
// the index finds it: at is the claim's index in the snapshot's PVCs plus
// one (0 when the volume names no claim or no PVC of that name exists), and
// deleting says whether that PVC has a deletionTimestamp.
type volPVC struct {
	at       int32
	deleting bool
}

// pvc returns the claim and whether it is being deleted, or nil.
func (v volPVC) pvc(in Input) (*corev1.PersistentVolumeClaim, bool) {
	if v.at == 0 {
		return nil, false
	}
	return &in.Snapshot.PVCs[v.at-1], v.deleting
}

// volumeClaims is the pass's table of volPVC, one per spec volume of each
// VM template and VMI asked about: DanglingVolumeReference and
// SharedClaimConflict both look up the claim of every volume reference,
// and the lookup (reading and hashing a name held in a large object) is
// most of their cost. Each asks the table, so the name is read once.
type volumeClaims struct {
	buf []volPVC
	// vmAt and vmiAt hold, for each VM and VMI by snapshot index, the
	// start of its volumes in buf plus one (0: not yet looked up).
	vmAt, vmiAt []int32
}

// vmVolumeClaims returns the claims of the snapshot's VM k's template
// volumes, in the template's order, looked up once per pass.
func (in Input) vmVolumeClaims(k int) []volPVC {
	vm := &in.Snapshot.VMs[k]
	if vm.Spec.Template == nil {
		return nil
	}
	m := &in.memo.claims
	if m.vmAt == nil {
		m.vmAt = make([]int32, len(in.Snapshot.VMs))
	}
	return in.volumeClaims(&m.vmAt[k], vm.Namespace, vm.Spec.Template.Spec.Volumes)
}

// vmiVolumeClaims returns the claims of the snapshot's VMI i's spec
// volumes, in the spec's order, looked up once per pass.
func (in Input) vmiVolumeClaims(i int) []volPVC {
	vmi := &in.Snapshot.VMIs[i]
	m := &in.memo.claims
	if m.vmiAt == nil {
		m.vmiAt = make([]int32, len(in.Snapshot.VMIs))
	}
	return in.volumeClaims(&m.vmiAt[i], vmi.Namespace, vmi.Spec.Volumes)
}

func (in Input) volumeClaims(at *int32, ns string, vols []kubevirtv1.Volume) []volPVC {
	m := &in.memo.claims
	if *at > 0 {
		start := int(*at - 1)
		return m.buf[start : start+len(vols) : start+len(vols)]
	}
	if m.buf == nil {
		m.buf = make([]volPVC, 0, 4*len(in.Snapshot.VMIs))
	}
	start, claims := len(m.buf), in.Index.ClaimsIn(ns)
	for j := range vols {
		var v volPVC
		if name := snapshot.ClaimName(&vols[j]); name != "" {
			if k, deleting := claims.Index(name); k >= 0 {
				v = volPVC{at: int32(k + 1), deleting: deleting}
			}
		}
		m.buf = append(m.buf, v)
	}
	*at = int32(start + 1)
	return m.buf[start:len(m.buf):len(m.buf)]
}

// knownClaim returns what the table says of the claim of vol when src is
// that claim, else nil. vol is the spec volume at index j of a list whose
// claims are known (nil when they are not).
func knownClaim(known []volPVC, j int, vol *kubevirtv1.Volume, src source) *volPVC {
	// volumeSource passes over a persistentVolumeClaim source without a
	// claim name to a dataVolume source, ClaimName does not.
	if known == nil || j < 0 || (src.kind != "PVC" && vol.PersistentVolumeClaim != nil) {
		return nil
	}
	return &known[j]
}
