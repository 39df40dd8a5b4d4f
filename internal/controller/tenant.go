package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// tenantErrorHold is how long after a failed list, watch or request a
// tenant's caches are not trusted, even once requests succeed again.
const tenantErrorHold = 30 * time.Second

// tenantWatch keeps a tenant cluster's VolumeAttachments, PVs and Node
// names in informer caches. Until all have synced, and while the connection has recently
// failed, the tenant's evidence is "unknown", which never counts as "not
// wanted" (informers stay "synced" through a partition). A cache that went
// stale without any error is caught by the live tenant re-read that package
// act does before acting.
type tenantWatch struct {
	cfg  config.TenantConfig
	rest *rest.Config
	fact informers.SharedInformerFactory
	vas  toolscache.SharedIndexInformer
	pvs  toolscache.SharedIndexInformer
	// nodes holds the names of the tenant's Nodes only: its evidence
	// concerns the VMIs named after one of them.
	nodes toolscache.SharedIndexInformer
	conn  *connState
}

// connState records the last failure and the last success of the requests
// the tenant's informers make.
type connState struct {
	mu      sync.Mutex
	lastErr time.Time
	errMsg  string
	lastOK  time.Time
}

func (c *connState) failed(at time.Time, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastErr, c.errMsg = at, err.Error()
}

func (c *connState) succeeded(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastOK = at
}

// reachable decides whether the caches count as evidence at now.
func (c *connState) reachable(synced bool, now time.Time) (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return tenantReachable(synced, c.lastErr, c.errMsg, c.lastOK, now)
}

// tenantReachable decides, purely, whether a tenant's informer caches are
// evidence: they must have synced, no error may have been seen within
// tenantErrorHold, and a request must have succeeded since the last error
// (the informers retry with a backoff of up to a minute, and a refused
// connection while re-watching reaches no watch error handler).
func tenantReachable(synced bool, lastErr time.Time, errMsg string, lastOK, now time.Time) (bool, string) {
	if !synced {
		return false, "the tenant's informer caches have not synced (unreachable?)"
	}
	if lastErr.IsZero() {
		return true, ""
	}
	if now.Sub(lastErr) < tenantErrorHold || !lastOK.After(lastErr) {
		return false, fmt.Sprintf("the tenant's caches may be stale: its API failed %s ago: %s",
			now.Sub(lastErr).Round(time.Second), errMsg)
	}
	return true, ""
}

// observedTransport records the outcome of every request of the tenant's
// informers: a transport error or a server error is a failure, any other
// response a success (an error status such as 403 on a list reaches the
// watch error handler).
type observedTransport struct {
	next http.RoundTripper
	conn *connState
}

func (t *observedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	switch {
	case err != nil:
		if req.Context().Err() == nil { // not our own shutdown
			t.conn.failed(time.Now(), err)
		}
	case resp.StatusCode >= http.StatusInternalServerError || resp.StatusCode == http.StatusTooManyRequests:
		t.conn.failed(time.Now(), fmt.Errorf("%s %s: HTTP %s", req.Method, req.URL.Path, resp.Status))
	default:
		t.conn.succeeded(time.Now())
	}
	return resp, err
}

// watchError records a list or watch error of an informer. A watch that
// ends normally or whose resource version expired (then the informer lists
// again) is no error.
func (c *connState) watchError(ctx context.Context, r *toolscache.Reflector, err error) {
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
	if errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return
	}
	c.failed(time.Now(), err)
}

func newTenantWatch(tc config.TenantConfig) (*tenantWatch, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", tc.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("config: tenants[%s].kubeconfig %s: %v", tc.Name, tc.Kubeconfig, err)
	}
	rc.UserAgent = "tether-controller"
	conn := &connState{}
	// The informers' requests are observed; the live re-reads of package
	// act use rc as it is.
	ic := rest.CopyConfig(rc)
	ic.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &observedTransport{next: rt, conn: conn} })
	cs, err := kubernetes.NewForConfig(ic)
	if err != nil {
		return nil, err
	}
	fact := informers.NewSharedInformerFactory(cs, 0)
	tw := &tenantWatch{cfg: tc, rest: rc, fact: fact, conn: conn,
		vas:   fact.Storage().V1().VolumeAttachments().Informer(),
		pvs:   fact.Core().V1().PersistentVolumes().Informer(),
		nodes: fact.Core().V1().Nodes().Informer()}
	// Only the names of Nodes matter: keep nothing else in memory.
	err = tw.nodes.SetTransform(func(obj any) (any, error) {
		if n, ok := obj.(*corev1.Node); ok {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}, nil
		}
		return obj, nil
	})
	if err != nil {
		return nil, err
	}
	for _, inf := range []toolscache.SharedIndexInformer{tw.vas, tw.pvs, tw.nodes} {
		if err := inf.SetWatchErrorHandlerWithContext(conn.watchError); err != nil {
			return nil, err
		}
	}
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
	ok, why := tw.conn.reachable(tw.vas.HasSynced() && tw.pvs.HasSynced() && tw.nodes.HasSynced(), time.Now())
	if !ok {
		t.Error = why
		return t
	}
	t.Reachable = true
	if _, ok, _ := tw.nodes.GetStore().GetByKey(node); ok {
		t.Nodes = []string{node}
	}
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
	if err != nil {
		return err
	}
	// A Node appearing or going away decides whether the tenant's evidence
	// concerns the VMI of its name (updates, heartbeats, change nothing).
	nodeName := func(o any) string {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if n, ok := o.(*corev1.Node); ok {
			return n.Name
		}
		return ""
	}
	_, err = tw.nodes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { enqueue(nodeName(o)) }, DeleteFunc: func(o any) { enqueue(nodeName(o)) },
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
