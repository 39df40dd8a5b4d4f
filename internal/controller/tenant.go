package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/observe"
	"github.com/tether-dev/tether/internal/snapshot"
)

const byNode = "node"

// tenantWatch keeps a tenant cluster's VolumeAttachments and PVs in informer
// caches. Until both have synced, the tenant's evidence is "unknown", which
// never counts as "not wanted". A cache that went stale after a partition is
// caught by the live tenant re-read that package act does before acting.
type tenantWatch struct {
	cfg  config.TenantConfig
	rest *rest.Config
	fact informers.SharedInformerFactory
	vas  toolscache.SharedIndexInformer
	pvs  toolscache.SharedIndexInformer
}

func newTenantWatch(tc config.TenantConfig) (*tenantWatch, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", tc.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("config: tenants[%s].kubeconfig %s: %v", tc.Name, tc.Kubeconfig, err)
	}
	rc.UserAgent = "tether-controller"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	fact := informers.NewSharedInformerFactory(cs, 0)
	tw := &tenantWatch{cfg: tc, rest: rc, fact: fact,
		vas: fact.Storage().V1().VolumeAttachments().Informer(),
		pvs: fact.Core().V1().PersistentVolumes().Informer()}
	err = tw.vas.AddIndexers(toolscache.Indexers{byNode: func(obj any) ([]string, error) {
		if va, ok := obj.(*storagev1.VolumeAttachment); ok {
			return []string{va.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	return tw, err
}

// source is the tenant for live re-reads in package act.
func (tw *tenantWatch) source() observe.TenantSource {
	return observe.TenantSource{Name: tw.cfg.Name, Namespace: tw.cfg.Namespace, Config: tw.rest}
}

// applies reports whether the tenant's evidence concerns VMIs of namespace ns.
func (tw *tenantWatch) applies(ns string) bool {
	return tw.cfg.Namespace == "" || tw.cfg.Namespace == ns
}

// evidence returns what the tenant says about the node named after a VMI:
// its VolumeAttachments there and the PVs they use.
func (tw *tenantWatch) evidence(node string) snapshot.Tenant {
	t := snapshot.Tenant{Name: tw.cfg.Name, Namespace: tw.cfg.Namespace}
	if !tw.vas.HasSynced() || !tw.pvs.HasSynced() {
		t.Error = "the tenant's informer caches have not synced (unreachable?)"
		return t
	}
	t.Reachable = true
	objs, _ := tw.vas.GetIndexer().ByIndex(byNode, node)
	for _, o := range objs {
		va := o.(*storagev1.VolumeAttachment)
		t.VolumeAttachments = append(t.VolumeAttachments, *va.DeepCopy())
		if pvName := va.Spec.Source.PersistentVolumeName; pvName != nil {
			if obj, ok, _ := tw.pvs.GetStore().GetByKey(*pvName); ok {
				t.PVs = append(t.PVs, *obj.(*corev1.PersistentVolume).DeepCopy())
			}
		}
	}
	return t
}

// watchInto sends a generic event for every VMI that a tenant change may
// concern: the VMI named after the attachment's node.
func (tw *tenantWatch) watchInto(infra client.Reader, ch chan<- event.GenericEvent) error {
	nodeOf := func(obj any) string {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if va, ok := obj.(*storagev1.VolumeAttachment); ok {
			return va.Spec.NodeName
		}
		return ""
	}
	enqueue := func(node string) {
		if node == "" {
			return
		}
		for _, key := range tw.vmisNamed(infra, node) {
			ch <- event.GenericEvent{Object: &kubevirtv1.VirtualMachineInstance{ObjectMeta: key}}
		}
	}
	_, err := tw.vas.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { enqueue(nodeOf(o)) },
		UpdateFunc: func(_, o any) { enqueue(nodeOf(o)) },
		DeleteFunc: func(o any) { enqueue(nodeOf(o)) },
	})
	if err != nil {
		return err
	}
	// A PV appearing or changing can complete an attachment's evidence.
	pvChanged := func(o any) {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		pv, ok := o.(*corev1.PersistentVolume)
		if !ok {
			return
		}
		for _, obj := range tw.vas.GetStore().List() {
			va := obj.(*storagev1.VolumeAttachment)
			if n := va.Spec.Source.PersistentVolumeName; n != nil && *n == pv.Name {
				enqueue(va.Spec.NodeName)
			}
		}
	}
	_, err = tw.pvs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: pvChanged, UpdateFunc: func(_, o any) { pvChanged(o) }, DeleteFunc: pvChanged,
	})
	return err
}

// vmisNamed returns the keys of the VMIs the node name can stand for.
func (tw *tenantWatch) vmisNamed(infra client.Reader, node string) []metav1.ObjectMeta {
	if tw.cfg.Namespace != "" {
		return []metav1.ObjectMeta{{Namespace: tw.cfg.Namespace, Name: node}}
	}
	var list kubevirtv1.VirtualMachineInstanceList
	if err := infra.List(context.Background(), &list); err != nil {
		return nil
	}
	var out []metav1.ObjectMeta
	for _, v := range list.Items {
		if v.Name == node {
			out = append(out, metav1.ObjectMeta{Namespace: v.Namespace, Name: v.Name})
		}
	}
	return out
}

// Start runs the informers (manager.Runnable, on every replica).
func (tw *tenantWatch) Start(ctx context.Context) error {
	tw.fact.Start(ctx.Done())
	<-ctx.Done()
	tw.fact.Shutdown()
	return nil
}

// NeedLeaderElection: standby replicas keep warm caches too.
func (tw *tenantWatch) NeedLeaderElection() bool { return false }
