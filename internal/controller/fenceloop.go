package controller

import (
	"context"
	"maps"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/controller/tenant"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/metrics"
)

const (
	// fenceUnknownRetry: a tenant whose evidence does not count is looked
	// at again this often (its return comes with no event of its nodes).
	fenceUnknownRetry = 30 * time.Second
	// fenceResync: a tenant node with an open record is looked at again
	// this often, without any change.
	fenceResync = 5 * time.Minute
)

// FenceReconciler runs TenantNodeDown (the checks whose row names
// LoopFence) for one tenant node at a time: the node from its tenant's
// watch, the infra VM and VMI it resolves to from the caches, read the way
// the live re-check reads them (observe.WithInfraOfNode). A request's
// namespace is the tenant's name, its name the node's.
//
// The records are filed in the infra namespace of the node's VM (the
// tenant's namespace when the node cannot be tied to one), labelled with
// the tenant and owned by nothing: the VM may be gone, and the node lives
// in another cluster. The loop retires them when the node goes.
type FenceReconciler struct {
	// Cache is the infra cluster's informer-backed client.
	Cache   client.Client
	Records *records.Keeper
	// Executor acts with live reads of the tenant and the infra cluster.
	Executor *act.Executor
	Policy   check.Policy
	Tenants  []*tenant.Watch
	Log      logr.Logger
}

// Reconcile decides one tenant node, named by req.
func (r *FenceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t0 := time.Now()
	defer func() { metrics.ReconcileSeconds.Observe(time.Since(t0).Seconds()) }()
	tw := r.tenant(req.Namespace)
	if tw == nil {
		return ctrl.Result{}, nil
	}
	now := r.Records.Now()
	recs, err := r.records(ctx, tw.Name(), req.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	t, found := tw.Node(ctx, req.Name)
	if !t.Reachable {
		// Unknown evidence: no finding opens, none is resolved.
		return ctrl.Result{RequeueAfter: fenceUnknownRetry}, nil
	}
	if !found {
		// The Node is gone from its tenant: its records resolve, and go
		// once their actions leave the blast-radius window.
		if err := r.Records.ResolveGone(ctx, nil, recs, now); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Records.RetireFinished(ctx, recs, now); err != nil {
			return ctrl.Result{}, err
		}
		if len(recs) > 0 {
			return ctrl.Result{RequeueAfter: fenceResync}, nil
		}
		return ctrl.Result{}, nil
	}
	snap, err := observe.WithInfraOfNode(ctx, r.Cache, t, req.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	current := map[string]drift.Finding{}
	if f, ok := check.CheckTenantNode(snap, r.Policy, now, tw.Name(), req.Name); ok && r.Records.Config.Enabled(f.Check) {
		current[f.ID] = f
	}
	var requeue time.Duration
	for id, f := range current {
		after, err := r.Records.Sync(ctx, records.Path{Apply: r.apply}, fenceSubject(f), f, recs[id], now)
		if err != nil {
			return ctrl.Result{}, err
		}
		// The node's NotReady grace ends with no event.
		if wait := r.Policy.RecheckAfter(f.Action.BlockedBy); wait > 0 && (after == 0 || wait < after) {
			after = wait
		}
		if after == 0 || after > fenceResync {
			after = fenceResync
		}
		if requeue == 0 || after < requeue {
			requeue = after
		}
	}
	if err := r.Records.ResolveGone(ctx, current, recs, now); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// apply fences or un-fences through package act, which re-reads the tenant
// and the infra VM live and re-checks before it writes.
func (r *FenceReconciler) apply(ctx context.Context, f drift.Finding) drift.Result {
	return r.Executor.Apply(ctx, f, act.Evidence{})
}

func (r *FenceReconciler) tenant(name string) *tenant.Watch {
	for _, tw := range r.Tenants {
		if tw.Name() == name {
			return tw
		}
	}
	return nil
}

// records returns the records of tenant node node by finding id, in every
// namespace (a node's VM may change namespace with its mapping).
func (r *FenceReconciler) records(ctx context.Context, tenantName, node string) (map[string]*v1alpha1.Finding, error) {
	recs, err := recordsOf(ctx, r.Cache, check.InLoop(check.LoopFence), client.MatchingLabels{v1alpha1.LabelCluster: tenantName})
	maps.DeleteFunc(recs, func(_ string, rec *v1alpha1.Finding) bool { return rec.Spec.Subject.Name != node })
	return recs, err
}

// fenceSubject files a TenantNodeDown finding in its namespace, labelled
// with its tenant, owned by nothing.
func fenceSubject(f drift.Finding) records.Subject {
	return records.Subject{Namespace: f.Namespace, Cluster: f.Cluster, ObserveEvery: fenceResync, Owner: metav1.OwnerReference{
		APIVersion: "v1", Kind: f.Object.Kind, Name: f.Object.Name, UID: f.Object.UID,
	}}
}

// setupFence registers the fence reconciler: a tenant node's own changes
// (from its tenant's watch), a change of the infra VM or VMI a node
// resolves to, and a record of it tampered with each lead to a pass over
// that node.
func setupFence(mgr manager.Manager, rs *records.Keeper, ex *act.Executor, policy check.Policy, tenants []*tenant.Watch, o Options) error {
	r := &FenceReconciler{Cache: mgr.GetClient(), Records: rs, Executor: ex, Policy: policy, Tenants: tenants, Log: o.Log.WithName("fence")}
	woken := tenant.NewNodeWakeQueue()
	for _, tw := range tenants {
		if err := tw.WatchNodesInto(woken); err != nil {
			return err
		}
	}
	if err := mgr.Add(woken); err != nil {
		return err
	}
	b, err := addWatches(ctrl.NewControllerManagedBy(mgr).Named("fence"), "fence", loopGathers()[check.LoopFence], r.wake)
	if err != nil {
		return err
	}
	return b.
		Watches(&v1alpha1.Finding{}, handler.EnqueueRequestsFromMapFunc(fenceRecordSubject), builder.WithPredicates(recordTampered(), recordOf([]string{check.TenantNodeDown}))).
		WatchesRawSource(source.Channel(woken.Out(), &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// wake maps a change of an infra VM or VMI to the tenant nodes that
// resolve to it: of a VMI, only what TenantNodeDown reads of it.
func (r *FenceReconciler) wake(k snapshot.Kinds, _ snapshot.Resource) (handler.EventHandler, []predicate.Predicate) {
	switch k {
	case snapshot.KindVMIs:
		return handler.EnqueueRequestsFromMapFunc(r.nodesOf), []predicate.Predicate{vmiLifecycleChanged()}
	case snapshot.KindVMs:
		return handler.EnqueueRequestsFromMapFunc(r.nodesOf), []predicate.Predicate{predicate.ResourceVersionChangedPredicate{}}
	}
	return nil, nil
}

// nodesOf maps an infra VM or VMI to the tenant nodes that resolve to it.
func (r *FenceReconciler) nodesOf(_ context.Context, o client.Object) []reconcile.Request {
	vm := snapshot.InfraVM{Namespace: o.GetNamespace(), Name: o.GetName()}
	var out []reconcile.Request
	for _, tw := range r.Tenants {
		for _, n := range tw.NodesOf(vm) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: tw.Name(), Name: n}})
		}
	}
	return out
}

// fenceRecordSubject maps a TenantNodeDown record to its tenant node.
func fenceRecordSubject(_ context.Context, o client.Object) []reconcile.Request {
	f, ok := o.(*v1alpha1.Finding)
	if !ok || f.Labels[v1alpha1.LabelCluster] == "" || f.Spec.Subject.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: f.Labels[v1alpha1.LabelCluster], Name: f.Spec.Subject.Name}}}
}

// vmiLifecycleChanged lets through a VMI's creation and deletion and the
// updates that change its phase or start its deletion: what TenantNodeDown
// reads of it.
func vmiLifecycleChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		was, okOld := e.ObjectOld.(*kubevirtv1.VirtualMachineInstance)
		now, okNew := e.ObjectNew.(*kubevirtv1.VirtualMachineInstance)
		if !okOld || !okNew {
			return true
		}
		return was.Status.Phase != now.Status.Phase || (was.DeletionTimestamp == nil) != (now.DeletionTimestamp == nil)
	}}
}
