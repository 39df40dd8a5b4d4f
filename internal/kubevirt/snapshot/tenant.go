package snapshot

import (
	"fmt"
	"slices"
	"time"

	storagev1 "k8s.io/api/storage/v1"
)

// TenantAttachment is one KubeVirt CSI VolumeAttachment of a tenant cluster,
// reduced to what the checks compare.
type TenantAttachment struct {
	// Name is the VolumeAttachment's name.
	Name string
	// Node is spec.nodeName: the tenant node.
	Node string
	// PV is spec.source.persistentVolumeName ("" for inline specs).
	PV string
	// Handle is the CSI volume handle: the infra volume (DataVolume/PVC) name.
	Handle string
	// Deleting is true when the VolumeAttachment has a deletionTimestamp.
	Deleting bool
	// Attached is status.attached: the external-attacher's record that the
	// driver's ControllerPublishVolume succeeded.
	Attached bool
	// AttachError is status.attachError.message ("" when none), and
	// AttachErrorTime its time.
	AttachError     string
	AttachErrorTime time.Time
	// Created is the VolumeAttachment's creationTimestamp.
	Created time.Time
}

// TenantIndex is one tenant's evidence, indexed by node and volume handle.
type TenantIndex struct {
	Name      string
	Namespace string
	Driver    string
	Reachable bool
	Error     string
	// DriverMissing: the tenant has no CSIDriver of Driver's name.
	DriverMissing bool

	// byHandle holds the attachments of each volume handle, on any node.
	byHandle map[string][]TenantAttachment
	// onNode holds, per listed node (nodeAt gives its entry), the
	// attachments whose handle is known; byNode holds those of nodes the
	// tenant does not list.
	nodeAt map[string]int32
	onNode [][]*TenantAttachment
	byNode map[string][]*TenantAttachment
	// unresolved holds, per node, attachments whose volume handle cannot be
	// known (their PV is missing or has no CSI source). They may want any
	// volume on that node.
	unresolved map[string][]TenantAttachment
	// byVM holds the nodes that resolve to each infra VM.
	byVM map[InfraVM][]TenantNodeRef
	// unknownNodes says, per node that cannot be tied to one infra VM, why.
	unknownNodes []string
	// ambiguous says, per infra VM, why a node may be it without certainty.
	ambiguous map[InfraVM][]string
	// handles are the volume handles of the tenant's PVs of its driver.
	handles map[string]bool
	// inUse holds, per node, the handles the kubelet reports in use.
	inUse map[string]map[string]bool
}

// TenantNodeRef is a tenant node that resolves to an infra VM, and how.
type TenantNodeRef struct {
	Name string
	How  string
	// at is the node's entry in its tenant's onNode, plus one.
	at int32
}

// NodesFor returns the tenant nodes that resolve to vm.
func (t *TenantIndex) NodesFor(vm InfraVM) []TenantNodeRef { return t.byVM[vm] }

// UnknownNodes says, for each tenant node that cannot be tied to one infra
// VM with certainty, why. Any of them may be any VM.
func (t *TenantIndex) UnknownNodes() []string { return t.unknownNodes }

// Ambiguous says why some tenant node may be vm without certainly being
// it (nil when none).
func (t *TenantIndex) Ambiguous(vm InfraVM) []string { return t.ambiguous[vm] }

// HasVolume reports whether one of the tenant's PVs of its driver has this
// volume handle: only such volumes are the tenant's to want or not.
func (t *TenantIndex) HasVolume(handle string) bool { return handle != "" && t.handles[handle] }

// KubeletUses reports whether the kubelet of tenant node node lists the
// volume handle in status.volumesInUse or status.volumesAttached.
func (t *TenantIndex) KubeletUses(node, handle string) bool { return t.inUse[node][handle] }

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

// newTenantIndex indexes one tenant's evidence; an unreachable tenant's
// index holds none.
func newTenantIndex(t *Tenant) *TenantIndex {
	ti := &TenantIndex{
		Name:          t.Name,
		Namespace:     t.Namespace,
		Driver:        t.CSIDriver(),
		Reachable:     t.Reachable,
		Error:         t.Error,
		DriverMissing: t.DriverMissing,
		unresolved:    map[string][]TenantAttachment{},
		byVM:          make(map[InfraVM][]TenantNodeRef, len(t.Nodes)),
		handles:       make(map[string]bool, len(t.PVs)),
		inUse:         map[string]map[string]bool{},
		ambiguous:     map[InfraVM][]string{},
	}
	if !t.Reachable {
		return ti
	}
	mapped := ti.indexNodes(t)
	pvs := ti.indexPVs(t)
	ti.indexAttachments(t, mapped, &pvs)
	return ti
}

// indexNodes resolves every tenant node to an infra VM (or says why it
// cannot) and records the handles its kubelet uses. It returns the VM of
// each resolved node; every listed node gets its entry in onNode, which
// its references (TenantNodeRef) keep.
func (ti *TenantIndex) indexNodes(t *Tenant) (mapped map[string]InfraVM) {
	mapped = make(map[string]InfraVM, len(t.Nodes))
	ti.nodeAt = make(map[string]int32, len(t.Nodes))
	ti.onNode = make([][]*TenantAttachment, 0, len(t.Nodes))
	for i := range t.Nodes {
		n := &t.Nodes[i]
		at, ok := ti.nodeAt[n.Name]
		if !ok { // two Nodes of one name share their entry
			at = int32(len(ti.onNode))
			ti.nodeAt[n.Name] = at
			ti.onNode = append(ti.onNode, nil)
		}
		m := ResolveTenantNode(n, t.Namespace, t.MatchNodesByName)
		switch {
		case m.Ambiguous:
			ti.ambiguous[m.VM] = append(ti.ambiguous[m.VM], m.Unknown)
		case m.Unknown != "":
			ti.unknownNodes = append(ti.unknownNodes, m.Unknown)
		default:
			ti.byVM[m.VM] = append(ti.byVM[m.VM], TenantNodeRef{Name: n.Name, How: m.How, at: at + 1})
			mapped[n.Name] = m.VM
		}
		for _, h := range n.InUse {
			if ti.inUse[n.Name] == nil {
				ti.inUse[n.Name] = map[string]bool{}
			}
			ti.inUse[n.Name][h] = true
		}
	}
	return mapped
}

// indexPVs records the volume handles of the tenant's PVs of its driver and
// returns the handle of every PV by name.
func (ti *TenantIndex) indexPVs(t *Tenant) pvHandles {
	// PV names are unique on a server; should a snapshot hold several PVs
	// of one name, an attachment of that name counts for each handle.
	pvs := pvHandles{first: make(map[string]string, len(t.PVs))}
	for i := range t.PVs {
		pv := &t.PVs[i]
		h := ""
		if pv.Spec.CSI != nil {
			h = pv.Spec.CSI.VolumeHandle
			if pv.Spec.CSI.Driver == ti.Driver && h != "" {
				ti.handles[h] = true
			}
		}
		pvs.add(pv.Name, h)
	}
	return pvs
}

// indexAttachments files the tenant's VolumeAttachments of its driver by
// volume handle (or as unresolved on their node). An attachment on an
// unlisted node, or published to another node ID than its node resolves
// to, makes that node unknown.
func (ti *TenantIndex) indexAttachments(t *Tenant, mapped map[string]InfraVM, pvs *pvHandles) {
	ti.byHandle = make(map[string][]TenantAttachment, len(t.VolumeAttachments))
	ti.byNode = map[string][]*TenantAttachment{}
	// Every attachment of known handle is kept once in buf: a node's list
	// (ti.onNode, or byNode for an unlisted node) points into it, and
	// one-entry lists are windows into onNode rather than separate
	// allocations.
	buf := make([]TenantAttachment, 0, len(t.VolumeAttachments))
	onNode := make([]*TenantAttachment, 0, len(t.VolumeAttachments))
	for i := range t.VolumeAttachments {
		va := &t.VolumeAttachments[i]
		if va.Spec.Attacher != ti.Driver {
			continue
		}
		at, listed := ti.nodeAt[va.Spec.NodeName]
		if !listed {
			// A node without a Node object cannot be tied to a VM: the
			// attachment may be on any.
			ti.unknownNodes = append(ti.unknownNodes, fmt.Sprintf("VolumeAttachment %s is on node %q, which the tenant does not list", va.Name, va.Spec.NodeName))
		}
		ti.checkNodeID(va, mapped)
		eachAttachment(va, pvs, func(a TenantAttachment) {
			if a.Handle == "" {
				ti.unresolved[a.Node] = append(ti.unresolved[a.Node], a)
				return
			}
			buf = append(buf, a)
			p := &buf[len(buf)-1]
			var list *[]*TenantAttachment
			if listed {
				list = &ti.onNode[at]
			} else {
				l := ti.byNode[a.Node]
				list = &l
			}
			if *list != nil {
				*list = append(*list, p)
			} else {
				onNode = append(onNode, p)
				*list = onNode[len(onNode)-1 : len(onNode) : len(onNode)]
			}
			if !listed {
				ti.byNode[a.Node] = *list
			}
			if list, ok := ti.byHandle[a.Handle]; ok {
				ti.byHandle[a.Handle] = append(list, a)
			} else {
				ti.byHandle[a.Handle] = buf[len(buf)-1 : len(buf) : len(buf)]
			}
		})
	}
}

// checkNodeID compares the CSI node ID the external-attacher recorded on va
// with the VM va's node resolves to; when they differ, the node is unknown
// and no longer maps to that VM.
func (ti *TenantIndex) checkNodeID(va *storagev1.VolumeAttachment, mapped map[string]InfraVM) {
	id := va.Annotations[VANodeIDAnnotation]
	if id == "" {
		return
	}
	if vm, ok := mapped[va.Spec.NodeName]; ok && id != vm.String() {
		ti.unknownNodes = append(ti.unknownNodes, fmt.Sprintf("tenant node %s resolves to %s, but VolumeAttachment %s was attached to node ID %s",
			va.Spec.NodeName, vm, va.Name, id))
		ti.byVM[vm] = slices.DeleteFunc(ti.byVM[vm], func(r TenantNodeRef) bool { return r.Name == va.Spec.NodeName })
		delete(mapped, va.Spec.NodeName)
	}
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
		Attached: va.Status.Attached,
		Created:  va.CreationTimestamp.Time,
	}
	if e := va.Status.AttachError; e != nil {
		a.AttachError, a.AttachErrorTime = e.Message, e.Time.Time
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

// AttachmentsOn returns the tenant's attachments on node whose volume
// handle is known, in the order the tenant listed them. They are the
// index's: callers must not change them.
func (t *TenantIndex) AttachmentsOn(node string) []*TenantAttachment {
	if at, ok := t.nodeAt[node]; ok {
		return t.onNode[at]
	}
	return t.byNode[node]
}

// NodeAttachments is AttachmentsOn(ref.Name) for a node ref that NodesFor
// of this tenant returned, without looking the node up again.
func (t *TenantIndex) NodeAttachments(ref TenantNodeRef) []*TenantAttachment {
	if ref.at > 0 && int(ref.at) <= len(t.onNode) {
		return t.onNode[ref.at-1]
	}
	return t.AttachmentsOn(ref.Name)
}

// Unresolved returns the tenant's attachments on node whose volume handle is
// unknown because their PV is missing or not a CSI volume.
func (t *TenantIndex) Unresolved(node string) []TenantAttachment {
	return t.unresolved[node]
}
