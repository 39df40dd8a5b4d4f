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

// TenantIndex is one tenant's evidence, indexed by node and volume handle.
type TenantIndex struct {
	Name      string
	Namespace string
	Reachable bool
	Error     string

	// byHandle holds the attachments of each volume handle, on any node.
	byHandle map[string][]TenantAttachment
	// unresolved holds, per node, attachments whose volume handle cannot be
	// known (their PV is missing or has no CSI source). They may want any
	// volume on that node.
	unresolved map[string][]TenantAttachment
	nodes      map[string]bool
}

// HasNode reports whether the tenant has a Node of this name.
func (t *TenantIndex) HasNode(name string) bool { return t.nodes[name] }

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
		unresolved: map[string][]TenantAttachment{},
		nodes:      make(map[string]bool, len(t.Nodes)),
	}
	if !t.Reachable {
		return ti
	}
	for _, n := range t.Nodes {
		ti.nodes[n] = true
	}
	// PV names are unique on a server; should a snapshot hold several PVs
	// of one name, an attachment of that name counts for each handle.
	pvs := pvHandles{first: make(map[string]string, len(t.PVs))}
	for i := range t.PVs {
		pv := &t.PVs[i]
		h := ""
		if pv.Spec.CSI != nil {
			h = pv.Spec.CSI.VolumeHandle
		}
		pvs.add(pv.Name, h)
	}
	ti.byHandle = make(map[string][]TenantAttachment, len(t.VolumeAttachments))
	// One-entry lists are windows into buf rather than separate allocations.
	buf := make([]TenantAttachment, 0, len(t.VolumeAttachments))
	for i := range t.VolumeAttachments {
		va := &t.VolumeAttachments[i]
		if va.Spec.Attacher != KubevirtCSIAttacher {
			continue
		}
		eachAttachment(va, &pvs, func(a TenantAttachment) {
			if a.Handle == "" {
				ti.unresolved[a.Node] = append(ti.unresolved[a.Node], a)
				return
			}
			k := a.Handle
			if list, ok := ti.byHandle[k]; ok {
				ti.byHandle[k] = append(list, a)
				return
			}
			buf = append(buf, a)
			ti.byHandle[k] = buf[len(buf)-1 : len(buf) : len(buf)]
		})
	}
	return ti
}

// pvHandles maps PV names to CSI volume handles ("" when not CSI).
type pvHandles struct {
	first map[string]string
	more  map[string][]string
}

func (p *pvHandles) add(pv, handle string) {
	if _, ok := p.first[pv]; !ok {
		p.first[pv] = handle
		return
	}
	if p.more == nil {
		p.more = map[string][]string{}
	}
	p.more[pv] = append(p.more[pv], handle)
}

// eachAttachment calls fn once per volume handle a VolumeAttachment may
// stand for; an empty handle means the handle is unknown.
func eachAttachment(va *storagev1.VolumeAttachment, pvs *pvHandles, fn func(TenantAttachment)) {
	a := TenantAttachment{
		Name:     va.Name,
		Node:     va.Spec.NodeName,
		Deleting: va.DeletionTimestamp != nil,
	}
	src := va.Spec.Source
	switch {
	case src.PersistentVolumeName != nil:
		a.PV = *src.PersistentVolumeName
		a.Handle = pvs.first[a.PV]
		fn(a)
		for _, h := range pvs.more[a.PV] {
			a.Handle = h
			fn(a)
		}
		return
	case src.InlineVolumeSpec != nil && src.InlineVolumeSpec.CSI != nil:
		a.Handle = src.InlineVolumeSpec.CSI.VolumeHandle
	}
	fn(a)
}

// Attachments returns the tenant's attachments whose volume handle is
// handle, on any node: callers compare Node themselves.
func (t *TenantIndex) Attachments(handle string) []TenantAttachment {
	if handle == "" {
		return nil
	}
	return t.byHandle[handle]
}

// Unresolved returns the tenant's attachments on node whose volume handle is
// unknown because their PV is missing or not a CSI volume.
func (t *TenantIndex) Unresolved(node string) []TenantAttachment {
	return t.unresolved[node]
}
