package tenant

import (
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// WatchInto sends a generic event for every VMI that a tenant change may
// concern: the VMI of the VM the change's node resolves to, or, when the
// node cannot be resolved or the change concerns the whole tenant (its CSI
// driver), every VMI the tenant applies to.
func (tw *Watch) WatchInto(infra client.Reader, q *WakeQueue) error {
	te := tenantEvents{tw: tw, infra: infra, q: q}
	_, err := tw.vas.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    te.vaChanged,
		UpdateFunc: func(_, o any) { te.vaChanged(o) },
		DeleteFunc: te.vaChanged,
	})
	if err != nil {
		return err
	}
	_, err = tw.pvs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: te.pvChanged, UpdateFunc: func(_, o any) { te.pvChanged(o) }, DeleteFunc: te.pvChanged,
	})
	if err != nil {
		return err
	}
	for _, inf := range []toolscache.SharedIndexInformer{tw.nodes, tw.csiNodes} {
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: te.nodeAdded, UpdateFunc: te.nodeUpdated, DeleteFunc: func(any) { te.all() },
		})
		if err != nil {
			return err
		}
	}
	_, err = tw.drivers.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { te.all() }, DeleteFunc: func(any) { te.all() },
	})
	return err
}

// WatchNodesInto wakes, in q, the tenant node a change concerns: a Node
// added or deleted, or changed in what TenantNodeDown reads (heartbeats
// change nothing kept), or its CSINode changed (what ties it to an infra
// VM). Keys are the tenant's name and the node's.
func (tw *Watch) WatchNodesInto(q *WakeQueue) error {
	wake := func(o any) { tw.wakeNode(q, o) }
	for _, inf := range []toolscache.SharedIndexInformer{tw.nodes, tw.csiNodes} {
		_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    wake,
			UpdateFunc: func(old, o any) { tw.nodeUpdated(q, old, o) },
			DeleteFunc: wake,
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// wakeNode wakes, in q, the tenant node a Node or CSINode stands for.
func (tw *Watch) wakeNode(q *WakeQueue, o any) {
	switch n := unwrapTombstone(o).(type) {
	case *corev1.Node:
		q.add([]metav1.ObjectMeta{{Namespace: tw.cfg.Name, Name: n.Name}})
	case *storagev1.CSINode:
		q.add([]metav1.ObjectMeta{{Namespace: tw.cfg.Name, Name: n.Name}})
	}
}

// nodeUpdated wakes, in q, a tenant node whose kept view changed.
func (tw *Watch) nodeUpdated(q *WakeQueue, old, o any) {
	if tw.nodeChanged(old, o) {
		tw.wakeNode(q, o)
	}
}

// tenantEvents turns changes in a tenant's caches into generic events for
// the infra VMIs they may concern.
type tenantEvents struct {
	tw    *Watch
	infra client.Reader
	q     *WakeQueue
}

// send wakes the VMIs with these keys (never blocking: see WakeQueue).
func (te tenantEvents) send(keys []metav1.ObjectMeta) {
	te.q.add(keys)
}

// node wakes the VMIs tenant node node can stand for (vmisOf).
func (te tenantEvents) node(node string) {
	if node == "" {
		return
	}
	te.send(te.tw.vmisOf(te.infra, node))
}

// all wakes every VMI the tenant applies to. Before the caches have synced
// every VMI's tenant evidence is unknown anyway; the initial adds must not
// each fan out to every VMI.
func (te tenantEvents) all() {
	if !te.tw.synced() {
		return
	}
	te.send(te.tw.allVMIs(te.infra, ""))
}

// vaChanged: a VolumeAttachment changed on its node.
func (te tenantEvents) vaChanged(o any) {
	if va, ok := unwrapTombstone(o).(*storagev1.VolumeAttachment); ok {
		te.node(va.Spec.NodeName)
	}
}

// pvChanged: a PV appearing or changing can complete an attachment's
// evidence, or make a volume one of the tenant's.
func (te tenantEvents) pvChanged(o any) {
	pv, ok := unwrapTombstone(o).(*corev1.PersistentVolume)
	if !ok {
		return
	}
	if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == te.tw.driver() && te.tw.synced() {
		te.send(te.tw.allVMIs(te.infra, pv.Spec.CSI.VolumeHandle))
	}
	for _, obj := range te.tw.vas.GetStore().List() {
		va := obj.(*storagev1.VolumeAttachment)
		if n := va.Spec.Source.PersistentVolumeName; n != nil && *n == pv.Name {
			te.node(va.Spec.NodeName)
		}
	}
}

// nodeAdded: a Node (or its CSINode) appeared; its VM's VMI, and every VMI
// when it cannot be resolved.
func (te tenantEvents) nodeAdded(o any) {
	switch n := unwrapTombstone(o).(type) {
	case *corev1.Node:
		te.node(n.Name)
	case *storagev1.CSINode:
		te.node(n.Name)
	}
}

// nodeUpdated: a Node (or its CSINode) changed what ties it to an infra VM
// or the kubelet's volumes (heartbeats change nothing kept). It wakes the
// VMs it stood for before and stands for now; every VMI when either is
// unknown.
func (te tenantEvents) nodeUpdated(old, o any) {
	if !te.tw.nodeChanged(old, o) {
		return
	}
	was, now := te.tw.vmOfNode(old), te.tw.vmOfNode(o)
	if was == nil || now == nil {
		te.all()
		return
	}
	for _, vm := range []*snapshot.InfraVM{was, now} {
		te.send([]metav1.ObjectMeta{{Namespace: vm.Namespace, Name: vm.Name}})
	}
}

// nodeChanged reports whether an update of a Node or CSINode changed what
// the evidence reads of it. (The kept view of a Node holds a time.Time,
// which the API machinery's semantic equality cannot compare: it panics on
// the unexported fields of any time.Time it reaches.)
func (tw *Watch) nodeChanged(old, o any) bool {
	a, b := tw.keptOfNode(old), tw.keptOfNode(o)
	if na, ok := a.(snapshot.TenantNode); ok {
		if nb, ok := b.(snapshot.TenantNode); ok {
			if !na.ReadySince.Equal(nb.ReadySince) {
				return true
			}
			na.ReadySince, nb.ReadySince = time.Time{}, time.Time{}
			return !reflect.DeepEqual(na, nb)
		}
	}
	return !equality.Semantic.DeepEqual(a, b)
}

// keptOfNode is what of a Node or CSINode the evidence reads.
func (tw *Watch) keptOfNode(o any) any {
	switch n := unwrapTombstone(o).(type) {
	case *corev1.Node:
		return snapshot.NewTenantNode(n, nil, tw.driver())
	case *storagev1.CSINode:
		return n.Spec
	}
	return nil
}

// unwrapTombstone returns the object a delete event's tombstone holds.
func unwrapTombstone(obj any) any {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}
