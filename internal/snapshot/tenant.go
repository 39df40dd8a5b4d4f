package snapshot

import (
	storagev1 "k8s.io/api/storage/v1"
)

// TenantAttachment is one KubeVirt CSI VolumeAttachment of a tenant cluster,
// reduced to what the checks compare.
type TenantAttachment struct {
	// Name is the VolumeAttachment's name.
	Name string
	// Node is spec.nodeName: the tenant node, named after the infra VMI.
	Node string
	// PV is spec.source.persistentVolumeName ("" for inline specs).
	PV string
	// Handle is the CSI volume handle: the infra volume (DataVolume/PVC) name.
	Handle string
	// Deleting is true when the VolumeAttachment has a deletionTimestamp.
	Deleting bool
}

type nodeHandle struct {
	node, handle string
}

// TenantIndex is one tenant's evidence, indexed by node and volume handle.
type TenantIndex struct {
	Name      string
	Namespace string
	Reachable bool
	Error     string

	byHandle map[nodeHandle][]TenantAttachment
	// unresolved holds, per node, attachments whose volume handle cannot be
	// known (their PV is missing or has no CSI source). They may want any
	// volume on that node.
	unresolved map[string][]TenantAttachment
}

func (ix *Index) indexTenants(tenants []Tenant) {
	var specific []*TenantIndex
	for i := range tenants {
		ti := newTenantIndex(&tenants[i])
		if ti.Namespace == "" {
			ix.tenantsAll = append(ix.tenantsAll, ti)
		} else {
			specific = append(specific, ti)
		}
	}
	for _, ti := range specific {
		ix.tenantsByNS[ti.Namespace] = append(ix.tenantsByNS[ti.Namespace], ti)
	}
	for ns, list := range ix.tenantsByNS {
		ix.tenantsByNS[ns] = append(list, ix.tenantsAll...)
	}
}

func newTenantIndex(t *Tenant) *TenantIndex {
	ti := &TenantIndex{
		Name:       t.Name,
		Namespace:  t.Namespace,
		Reachable:  t.Reachable,
		Error:      t.Error,
		byHandle:   map[nodeHandle][]TenantAttachment{},
		unresolved: map[string][]TenantAttachment{},
	}
	if !t.Reachable {
		return ti
	}
	// PV names are unique on a server; should a snapshot hold several PVs
	// of one name, an attachment of that name counts for each handle.
	handles := make(map[string][]string, len(t.PVs))
	for i := range t.PVs {
		pv := &t.PVs[i]
		h := ""
		if pv.Spec.CSI != nil {
			h = pv.Spec.CSI.VolumeHandle
		}
		handles[pv.Name] = append(handles[pv.Name], h)
	}
	for i := range t.VolumeAttachments {
		va := &t.VolumeAttachments[i]
		if va.Spec.Attacher != KubevirtCSIAttacher {
			continue
		}
		for _, a := range attachmentsOf(va, handles) {
			if a.Handle == "" {
				ti.unresolved[a.Node] = append(ti.unresolved[a.Node], a)
				continue
			}
			k := nodeHandle{a.Node, a.Handle}
			ti.byHandle[k] = append(ti.byHandle[k], a)
		}
	}
	return ti
}

// attachmentsOf reduces a VolumeAttachment to one TenantAttachment per
// volume handle it may stand for; an empty handle means unknown.
func attachmentsOf(va *storagev1.VolumeAttachment, handles map[string][]string) []TenantAttachment {
	a := TenantAttachment{
		Name:     va.Name,
		Node:     va.Spec.NodeName,
		Deleting: va.DeletionTimestamp != nil,
	}
	src := va.Spec.Source
	switch {
	case src.PersistentVolumeName != nil:
		a.PV = *src.PersistentVolumeName
		hs := handles[a.PV]
		if len(hs) == 0 {
			return []TenantAttachment{a}
		}
		out := make([]TenantAttachment, len(hs))
		for i, h := range hs {
			out[i] = a
			out[i].Handle = h
		}
		return out
	case src.InlineVolumeSpec != nil && src.InlineVolumeSpec.CSI != nil:
		a.Handle = src.InlineVolumeSpec.CSI.VolumeHandle
	}
	return []TenantAttachment{a}
}

// Attachments returns the tenant's attachments on node whose volume handle
// is handle.
func (t *TenantIndex) Attachments(node, handle string) []TenantAttachment {
	if handle == "" {
		return nil
	}
	return t.byHandle[nodeHandle{node, handle}]
}

// Unresolved returns the tenant's attachments on node whose volume handle is
// unknown because their PV is missing or not a CSI volume.
func (t *TenantIndex) Unresolved(node string) []TenantAttachment {
	return t.unresolved[node]
}
