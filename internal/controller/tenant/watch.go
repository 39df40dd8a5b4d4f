// Package tenant watches the tenant clusters whose VolumeAttachments are
// evidence for the hot-plug check: informer caches of each tenant's
// attachments, PVs, Nodes, CSINodes and CSIDrivers, the health of its
// connection, what it says about one infra VMI, and the queue that wakes the
// VMIs a tenant change may concern.
//
// It only reads tenants and enqueues: it never decides about a finding nor
// writes to any cluster, and it imports nothing of package controller.
package tenant

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
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

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/metrics"
)

const byNode = "node"

// tenantErrorHold is how long after a failed list, watch or request a
// tenant's caches are not trusted, even once requests succeed again.
const tenantErrorHold = 30 * time.Second

// Watch keeps a tenant cluster's VolumeAttachments, PVs, Nodes (what
// ties them to infra VMs, and the kubelet's volumes), CSINodes and CSIDrivers
// in informer caches. Until all have synced, and while the connection has recently
// failed, the tenant's evidence is "unknown", which never counts as "not
// wanted" (informers stay "synced" through a partition). A cache that went
// stale without any error is caught by the live tenant re-read that package
// act does before acting.
type Watch struct {
	cfg      config.TenantConfig
	rest     *rest.Config
	fact     informers.SharedInformerFactory
	vas      toolscache.SharedIndexInformer
	pvs      toolscache.SharedIndexInformer
	nodes    toolscache.SharedIndexInformer
	csiNodes toolscache.SharedIndexInformer
	drivers  toolscache.SharedIndexInformer
	conn     *connState
	// live reads the tenant without a cache: the pods of a node in
	// tether's un-fence.
	live client.Client
}

// connState records the last failure and the last success of the requests
// the tenant's informers make.
type connState struct {
	// tenant names the tenant in tether_tenant_errors_total.
	tenant  string
	mu      sync.Mutex
	lastErr time.Time
	errMsg  string
	lastOK  time.Time
}

func (c *connState) failed(at time.Time, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastErr, c.errMsg = at, err.Error()
	metrics.TenantErrors.WithLabelValues(c.tenant).Inc()
}

func (c *connState) succeeded(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastOK = at
}

// Name is the tenant's name in the configuration.
func (tw *Watch) Name() string { return tw.cfg.Name }

// Up reports whether the tenant's evidence counts at now: its caches have
// synced and its API has not failed recently (tenantReachable).
func (tw *Watch) Up(now time.Time) bool {
	ok, _ := tw.conn.reachable(tw.synced(), now)
	return ok
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

// NewWatch prepares the watch of tenant tc; Start runs it.
func NewWatch(tc config.TenantConfig) (*Watch, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", tc.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("config: tenants[%s].kubeconfig %s: %v", tc.Name, tc.Kubeconfig, err)
	}
	rc.UserAgent = "tether-controller"
	conn := &connState{tenant: tc.Name}
	// Both series exist from the start: down until the caches have synced.
	metrics.TenantUp.WithLabelValues(tc.Name).Set(0)
	metrics.TenantErrors.WithLabelValues(tc.Name)
	// The informers' requests are observed; the live re-reads of package
	// act use rc as it is.
	ic := rest.CopyConfig(rc)
	ic.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &observedTransport{next: rt, conn: conn} })
	cs, err := kubernetes.NewForConfig(ic)
	if err != nil {
		return nil, err
	}
	live, err := clients.New(rc)
	if err != nil {
		return nil, err
	}
	fact := informers.NewSharedInformerFactory(cs, 0)
	tw := &Watch{cfg: tc, rest: rc, fact: fact, conn: conn, live: live,
		vas:      fact.Storage().V1().VolumeAttachments().Informer(),
		pvs:      fact.Core().V1().PersistentVolumes().Informer(),
		nodes:    fact.Core().V1().Nodes().Informer(),
		csiNodes: fact.Storage().V1().CSINodes().Informer(),
		drivers:  fact.Storage().V1().CSIDrivers().Informer()}
	if err := tw.nodes.SetTransform(keepNodeEvidence(tw.driver())); err != nil {
		return nil, err
	}
	for _, inf := range []toolscache.SharedIndexInformer{tw.vas, tw.pvs, tw.nodes, tw.csiNodes, tw.drivers} {
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
	if err != nil {
		return nil, err
	}
	err = tw.pvs.AddIndexers(toolscache.Indexers{byHandle: func(obj any) ([]string, error) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.CSI != nil {
			return []string{pv.Spec.CSI.VolumeHandle}, nil
		}
		return nil, nil
	}})
	return tw, err
}

// keepNodeEvidence is the tenant Node informer's transform: of a Node, keep
// only what ties it to an infra VM, the kubelet's volumes of driver, and
// what TenantNodeDown reads (the Ready condition's status and since when,
// the out-of-service taint and tether's record of having set it). The
// kubelet's heartbeats change nothing kept.
func keepNodeEvidence(driver string) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		kept := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}
		kept.Spec.ProviderID = n.Spec.ProviderID
		for _, t := range n.Spec.Taints {
			if t.Key == snapshot.OutOfServiceTaint {
				kept.Spec.Taints = append(kept.Spec.Taints, t)
			}
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				kept.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
			}
		}
		kept.Spec.Unschedulable = n.Spec.Unschedulable
		for _, k := range []string{snapshot.ClusterNamespaceAnnotation, snapshot.InfraVMNameAnnotation, snapshot.InfraVMNamespaceAnnotation,
			snapshot.FencedAnnotation, snapshot.CordonedAnnotation, snapshot.UnfencedAnnotation} {
			if v, ok := n.Annotations[k]; ok {
				if kept.Annotations == nil {
					kept.Annotations = map[string]string{}
				}
				kept.Annotations[k] = v
			}
		}
		for _, h := range snapshot.NewTenantNode(n, nil, driver).InUse {
			kept.Status.VolumesInUse = append(kept.Status.VolumesInUse, corev1.UniqueVolumeName("kubernetes.io/csi/"+driver+"^"+h))
		}
		return kept, nil
	}
}

const byHandle = "handle"

// driver is the tenant's CSI driver name.
func (tw *Watch) driver() string {
	if tw.cfg.Driver == "" {
		return snapshot.DefaultCSIDriver
	}
	return tw.cfg.Driver
}

// Source is the tenant for live re-reads in package act.
func (tw *Watch) Source() observe.TenantSource {
	return observe.TenantSource{Name: tw.cfg.Name, Namespace: tw.cfg.Namespace, Driver: tw.cfg.Driver,
		MatchNodesByName: tw.cfg.MatchNodesByName, Config: tw.rest}
}

// Applies reports whether the tenant's evidence concerns VMIs of namespace ns.
func (tw *Watch) Applies(ns string) bool {
	return tw.cfg.Namespace == "" || tw.cfg.Namespace == ns
}

// tenantNodes returns every tenant node as the resolver reads it.
func (tw *Watch) tenantNodes() []snapshot.TenantNode {
	objs := tw.nodes.GetStore().List()
	out := make([]snapshot.TenantNode, 0, len(objs))
	for _, o := range objs {
		n := o.(*corev1.Node)
		var cn *storagev1.CSINode
		if obj, ok, _ := tw.csiNodes.GetStore().GetByKey(n.Name); ok {
			cn = obj.(*storagev1.CSINode)
		}
		out = append(out, snapshot.NewTenantNode(n, cn, tw.driver()))
	}
	return out
}

// Evidence returns what the tenant says about a VMI: all its nodes (so that
// the VMI's own and any unmappable ones are known), the VolumeAttachments
// on the nodes that resolve to the VMI's VM with their PVs, and the PVs
// whose volume handle is one of the VMI's volume or storage names.
func (tw *Watch) Evidence(vmi *snapshot.VMI) snapshot.Tenant {
	t := snapshot.Tenant{Name: tw.cfg.Name, Namespace: tw.cfg.Namespace, Driver: tw.cfg.Driver, MatchNodesByName: tw.cfg.MatchNodesByName}
	ok, why := tw.conn.reachable(tw.synced(), time.Now())
	if !ok {
		t.Error = why
		return t
	}
	t.Reachable = true
	_, found, _ := tw.drivers.GetStore().GetByKey(tw.driver())
	t.DriverMissing = !found
	t.Nodes = tw.tenantNodes()
	vm := snapshot.InfraVM{Namespace: vmi.Namespace, Name: vmi.Name}
	pvSeen := map[string]bool{}
	addPV := func(pv *corev1.PersistentVolume) {
		if !pvSeen[pv.Name] {
			pvSeen[pv.Name] = true
			t.PVs = append(t.PVs, *pv.DeepCopy())
		}
	}
	for i := range t.Nodes {
		if m := snapshot.ResolveTenantNode(&t.Nodes[i], t.Namespace, t.MatchNodesByName); m.Unknown != "" || m.VM != vm {
			continue
		}
		objs, _ := tw.vas.GetIndexer().ByIndex(byNode, t.Nodes[i].Name)
		for _, o := range objs {
			va := o.(*storagev1.VolumeAttachment)
			t.VolumeAttachments = append(t.VolumeAttachments, *va.DeepCopy())
			if pvName := va.Spec.Source.PersistentVolumeName; pvName != nil {
				if obj, ok, _ := tw.pvs.GetStore().GetByKey(*pvName); ok {
					addPV(obj.(*corev1.PersistentVolume))
				}
			}
		}
	}
	// Attachments on nodes without a Node object: they make the tenant's
	// evidence unknown (snapshot.TenantIndex).
	for _, node := range tw.vas.GetIndexer().ListIndexFuncValues(byNode) {
		if _, ok, _ := tw.nodes.GetStore().GetByKey(node); !ok {
			objs, _ := tw.vas.GetIndexer().ByIndex(byNode, node)
			for _, o := range objs {
				t.VolumeAttachments = append(t.VolumeAttachments, *o.(*storagev1.VolumeAttachment).DeepCopy())
			}
		}
	}
	for _, h := range vmiHandles(vmi.Spec.Volumes, vmi.Status.VolumeStatus) {
		objs, _ := tw.pvs.GetIndexer().ByIndex(byHandle, h)
		for _, o := range objs {
			addPV(o.(*corev1.PersistentVolume))
		}
	}
	return t
}

// Node returns what the tenant says about one of its nodes, for
// TenantNodeDown: the tenant as it stands (reachable or why not) with that
// node only; found is false when the tenant is reachable and has no such
// node. For a node in tether's un-fence it adds what of the node is still
// being released: its VolumeAttachments being deleted, from the cache, and
// its terminating pods, listed live (the tenant's pods are not watched).
func (tw *Watch) Node(ctx context.Context, name string) (t snapshot.Tenant, found bool) {
	t = snapshot.Tenant{Name: tw.cfg.Name, Namespace: tw.cfg.Namespace, Driver: tw.cfg.Driver, MatchNodesByName: tw.cfg.MatchNodesByName}
	ok, why := tw.conn.reachable(tw.synced(), time.Now())
	if !ok {
		t.Error = why
		return t, true
	}
	t.Reachable = true
	obj, ok, _ := tw.nodes.GetStore().GetByKey(name)
	if !ok {
		return t, false
	}
	var cn *storagev1.CSINode
	if c, ok, _ := tw.csiNodes.GetStore().GetByKey(name); ok {
		cn = c.(*storagev1.CSINode)
	}
	n := snapshot.NewTenantNode(obj.(*corev1.Node), cn, tw.driver())
	if n.Unfencing() {
		n.Release, n.ReleaseError = tw.release(ctx, name)
	}
	t.Nodes = []snapshot.TenantNode{n}
	return t, true
}

// release reads what of node is still being released (observe.NodeRelease):
// the node's VolumeAttachments from the cache, its pods live.
func (tw *Watch) release(ctx context.Context, node string) (*snapshot.NodeRelease, string) {
	objs, _ := tw.vas.GetIndexer().ByIndex(byNode, node)
	vas := make([]storagev1.VolumeAttachment, 0, len(objs))
	for _, o := range objs {
		vas = append(vas, *o.(*storagev1.VolumeAttachment))
	}
	return observe.NodeRelease(ctx, tw.live, node, vas, 0)
}

// NodesOf returns the names of the tenant's nodes that resolve to infra VM
// vm with certainty.
func (tw *Watch) NodesOf(vm snapshot.InfraVM) []string {
	if !tw.Applies(vm.Namespace) {
		return nil
	}
	var out []string
	for _, n := range tw.tenantNodes() {
		if m := snapshot.ResolveTenantNode(&n, tw.cfg.Namespace, tw.cfg.MatchNodesByName); m.Unknown == "" && m.VM == vm {
			out = append(out, n.Name)
		}
	}
	return out
}

// Attachments counts the tenant's VolumeAttachments of its driver.
func (tw *Watch) Attachments() int {
	n := 0
	for _, o := range tw.vas.GetStore().List() {
		if o.(*storagev1.VolumeAttachment).Spec.Attacher == tw.driver() {
			n++
		}
	}
	return n
}

// NodeNames returns the names of all the tenant's nodes.
func (tw *Watch) NodeNames() []string {
	return tw.nodes.GetStore().ListKeys()
}

// Fenced counts the tenant's nodes that carry the out-of-service taint
// tether put there (its annotation says so).
func (tw *Watch) Fenced() int {
	n := 0
	for _, o := range tw.nodes.GetStore().List() {
		node := o.(*corev1.Node)
		if node.Annotations[snapshot.FencedAnnotation] != "" && snapshot.HasOutOfServiceTaint(node) {
			n++
		}
	}
	return n
}

// Unfencing counts the tenant's nodes in tether's un-fence: cordoned by
// tether with its taint still on, and cordoned by tether after the taint
// went.
func (tw *Watch) Unfencing() (cordoned, settling int) {
	for _, o := range tw.nodes.GetStore().List() {
		node := o.(*corev1.Node)
		if node.Annotations[snapshot.CordonedAnnotation] == "" || !node.Spec.Unschedulable {
			continue
		}
		if snapshot.HasOutOfServiceTaint(node) {
			cordoned++
		} else {
			settling++
		}
	}
	return cordoned, settling
}

// vmiHandles returns the names a tenant volume handle of a VMI's volumes
// (spec volumes and volume statuses) may have: each volume's name and the claim or DataVolume it uses.
func vmiHandles(vols []kubevirtv1.Volume, statuses []snapshot.VolumeStatus) []string {
	var out []string
	for i := range vols {
		v := &vols[i]
		out = append(out, v.Name)
		if c := snapshot.ClaimName(v); c != "" && c != v.Name {
			out = append(out, c)
		}
	}
	for _, vs := range statuses {
		out = append(out, vs.Name)
		if vs.PersistentVolumeClaimInfo != nil && vs.PersistentVolumeClaimInfo.ClaimName != "" {
			out = append(out, vs.PersistentVolumeClaimInfo.ClaimName)
		}
	}
	return out
}

// vmisOf returns the keys of the VMIs a tenant node can stand for: the VMI
// of the VM it resolves to, or, when it cannot be resolved (or is gone),
// every VMI the tenant applies to.
func (tw *Watch) vmisOf(infra client.Reader, node string) []metav1.ObjectMeta {
	obj, ok, _ := tw.nodes.GetStore().GetByKey(node)
	if ok {
		var cn *storagev1.CSINode
		if c, ok, _ := tw.csiNodes.GetStore().GetByKey(node); ok {
			cn = c.(*storagev1.CSINode)
		}
		tn := snapshot.NewTenantNode(obj.(*corev1.Node), cn, tw.driver())
		if m := snapshot.ResolveTenantNode(&tn, tw.cfg.Namespace, tw.cfg.MatchNodesByName); m.Unknown == "" {
			return []metav1.ObjectMeta{{Namespace: m.VM.Namespace, Name: m.VM.Name}}
		}
	}
	if !tw.synced() {
		return nil
	}
	return tw.allVMIs(infra, "")
}

// vmOfNode returns the VM a Node or CSINode object stands for, with the
// other half read from the caches; nil when it cannot be resolved.
func (tw *Watch) vmOfNode(obj any) *snapshot.InfraVM {
	var node *corev1.Node
	var cn *storagev1.CSINode
	switch o := obj.(type) {
	case *corev1.Node:
		node = o
		if c, ok, _ := tw.csiNodes.GetStore().GetByKey(o.Name); ok {
			cn = c.(*storagev1.CSINode)
		}
	case *storagev1.CSINode:
		cn = o
		if n, ok, _ := tw.nodes.GetStore().GetByKey(o.Name); ok {
			node = n.(*corev1.Node)
		}
	}
	if node == nil {
		return nil
	}
	tn := snapshot.NewTenantNode(node, cn, tw.driver())
	m := snapshot.ResolveTenantNode(&tn, tw.cfg.Namespace, tw.cfg.MatchNodesByName)
	if m.Unknown != "" {
		return nil
	}
	return &m.VM
}

// synced reports whether all of the tenant's caches have synced.
func (tw *Watch) synced() bool {
	return tw.vas.HasSynced() && tw.pvs.HasSynced() && tw.nodes.HasSynced() && tw.csiNodes.HasSynced() && tw.drivers.HasSynced()
}

// allVMIs returns the keys of every VMI the tenant applies to; with a
// handle, only those with a volume or storage of that name.
func (tw *Watch) allVMIs(infra client.Reader, handle string) []metav1.ObjectMeta {
	var list kubevirtv1.VirtualMachineInstanceList
	var opts []client.ListOption
	if tw.cfg.Namespace != "" {
		opts = append(opts, client.InNamespace(tw.cfg.Namespace))
	}
	if err := infra.List(context.Background(), &list, opts...); err != nil {
		return nil
	}
	out := make([]metav1.ObjectMeta, 0, len(list.Items))
	for i := range list.Items {
		v := &list.Items[i]
		if handle == "" || slices.Contains(vmiHandles(v.Spec.Volumes, snapshot.VolumeStatusesOf(v.Status.VolumeStatus)), handle) {
			out = append(out, metav1.ObjectMeta{Namespace: v.Namespace, Name: v.Name})
		}
	}
	return out
}

// Start runs the informers (manager.Runnable, on every replica).
func (tw *Watch) Start(ctx context.Context) error {
	tw.fact.Start(ctx.Done())
	<-ctx.Done()
	tw.fact.Shutdown()
	return nil
}

// NeedLeaderElection: standby replicas keep warm caches too.
func (tw *Watch) NeedLeaderElection() bool { return false }
