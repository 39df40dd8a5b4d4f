package controller

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// HotplugReconciler runs the hot-plug checks for one VMI at a time: it
// decides from the cache which findings are open and leaves their records
// and actions to records.
type HotplugReconciler struct {
	// Cache is the informer-backed client: reads are free.
	Cache client.Client
	// Records keeps the Finding records and acts.
	Records *records.Keeper
	// Executor acts with live reads; it never uses the cache.
	Executor *act.Executor
	Policy   check.Policy
	// Tenants are the watched tenant clusters (their evidence).
	Tenants []*tenant.Watch
}

// Reconcile handles one VMI, named by req.
func (r *HotplugReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t0 := time.Now()
	defer func() { metrics.ReconcileSeconds.Observe(time.Since(t0).Seconds()) }()
	now := r.Records.Now()

	vmi, current, err := r.decide(ctx, req.NamespacedName, now)
	if err != nil || vmi == nil {
		// A deleted VMI's records go with it (owner reference, garbage
		// collector); nothing to decide.
		return ctrl.Result{}, err
	}
	recs, err := r.records(ctx, vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	var requeue time.Duration
	subj := vmiSubject(vmi)
	for id, f := range current {
		after, err := r.Records.Sync(ctx, records.Path{Apply: r.apply}, subj, f, recs[id], now)
		if err != nil {
			return ctrl.Result{}, err
		}
		// A hold only time lifts (a tenant attachment too recent) comes
		// with no event when it ends: look again once it has.
		if wait := r.Policy.RecheckAfter(f.Action.BlockedBy); wait > 0 && (after == 0 || wait < after) {
			after = wait
		}
		if after > 0 && (requeue == 0 || after < requeue) {
			requeue = after
		}
	}
	if err := r.Records.ResolveGone(ctx, current, recs, now); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// decide is the loop's decision about the VMI key at now: the VMI read
// (nil when it is gone) and the findings about it of the loop's enabled
// checks, by id.
func (r *HotplugReconciler) decide(ctx context.Context, key client.ObjectKey, now time.Time) (*snapshot.VMI, map[string]drift.Finding, error) {
	snap, err := r.snapshotFor(ctx, key)
	if err != nil || len(snap.VMIs) == 0 {
		return nil, nil, err
	}
	vmi := &snap.VMIs[0]
	// The snapshot holds only what the loop gathers (observe.VMIKinds) and
	// the tenants: checks of other loops, which need more (claims,
	// attachment pods), would report falsely here (a Detaching hot-plug
	// stuck "for an unknown time" whose attachment pod says it is recent).
	policy := r.Policy
	policy.Checks = check.InLoop(check.LoopHotplug)
	current := map[string]drift.Finding{}
	for _, f := range check.Run(snap, policy, now) {
		if f.Object.UID == vmi.UID && r.Records.Config.Enabled(f.Check) {
			current[f.ID] = f
		}
	}
	return vmi, current, nil
}

// snapshotFor builds the decision input for one VMI from the caches with
// observe.VMI, the gatherer the live re-check reads with: the VMI, its
// owning VM, the KubeVirt feature gates and, from the tenant watches, the
// tenants' attachments on the node named after the VMI. A VMI that is gone
// yields an empty snapshot.
func (r *HotplugReconciler) snapshotFor(ctx context.Context, key client.ObjectKey) (*snapshot.Snapshot, error) {
	tenants := func(vmi *snapshot.VMI) []snapshot.Tenant {
		var out []snapshot.Tenant
		for _, tw := range r.Tenants {
			if tw.Applies(vmi.Namespace) {
				out = append(out, tw.Evidence(vmi))
			}
		}
		return out
	}
	return observe.VMI(ctx, r.Cache, key.Namespace, key.Name, observe.Tenants{Of: tenants})
}

// apply acts on a hot-plug finding; the live re-check needs no evidence
// from the pass.
func (r *HotplugReconciler) apply(ctx context.Context, f drift.Finding) drift.Result {
	return r.Executor.Apply(ctx, f, act.Evidence{})
}

// records returns the VMI's Finding objects by finding id.
func (r *HotplugReconciler) records(ctx context.Context, vmi *snapshot.VMI) (map[string]*v1alpha1.Finding, error) {
	var list v1alpha1.FindingList
	if err := r.Cache.List(ctx, &list, client.InNamespace(vmi.Namespace), client.MatchingLabels{v1alpha1.LabelSubjectUID: string(vmi.UID)}); err != nil {
		return nil, err
	}
	out := make(map[string]*v1alpha1.Finding, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Spec.ID] = &list.Items[i]
	}
	return out, nil
}

// vmiSubject files a hot-plug finding under its VMI.
func vmiSubject(vmi *snapshot.VMI) records.Subject {
	return records.Subject{Namespace: vmi.Namespace, Owner: metav1.OwnerReference{
		APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID,
	}}
}

// setup registers the watches. Handlers only map events to VMI keys.
func (r *HotplugReconciler) setup(mgr manager.Manager) error {
	woken := tenant.NewWakeQueue()
	for _, tw := range r.Tenants {
		if err := tw.WatchInto(mgr.GetClient(), woken); err != nil {
			return err
		}
	}
	if err := mgr.Add(woken); err != nil {
		return err
	}
	watched := loopGathers()[check.LoopHotplug]
	if !dataVolumesInstalled(mgr.GetRESTMapper()) {
		watched &^= snapshot.KindDataVolumes // no CDI: none to read or watch
	}
	b, err := addWatches(ctrl.NewControllerManagedBy(mgr).Named("hotplug"), "hot-plug", watched, r.wake)
	if err != nil {
		return err
	}
	return b.
		// Only a record deleted or changed in spec by someone else wakes the
		// subject; the controller's own status writes do not.
		Watches(&v1alpha1.Finding{}, handler.EnqueueRequestsFromMapFunc(subjectOf), builder.WithPredicates(recordTampered())).
		// Tenant VolumeAttachment changes wake the VMI named after their node.
		WatchesRawSource(source.Channel(woken.Out(), &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// wake maps a change of a kind the loop reads to the VMIs whose decision
// reads it. Resyncs carry no change: they wake none.
func (r *HotplugReconciler) wake(k snapshot.Kinds, _ snapshot.Resource) (handler.EventHandler, []predicate.Predicate) {
	changed := []predicate.Predicate{predicate.ResourceVersionChangedPredicate{}}
	switch k {
	case snapshot.KindVMIs:
		return &handler.EnqueueRequestForObject{}, changed
	case snapshot.KindVMs:
		// A VMI is named after its VM.
		return handler.EnqueueRequestsFromMapFunc(sameName), changed
	case snapshot.KindDataVolumes:
		// A DataVolume of a VM's dataVolumeTemplates that is not ready
		// stops that VM's sync (what the hot-plug checks read of it).
		return handler.EnqueueRequestsFromMapFunc(r.templateUsers), changed
	case snapshot.KindKubeVirt:
		return handler.EnqueueRequestsFromMapFunc(r.allVMIs), changed
	}
	return nil, nil
}

func subjectOf(_ context.Context, o client.Object) []reconcile.Request {
	f, ok := o.(*v1alpha1.Finding)
	if !ok || f.Spec.Subject.Name == "" || f.Spec.Subject.Kind != "VirtualMachineInstance" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: f.Namespace, Name: f.Spec.Subject.Name}}}
}

func (r *HotplugReconciler) allVMIs(ctx context.Context, _ client.Object) []reconcile.Request {
	var list kubevirtv1.VirtualMachineInstanceList
	if err := r.Cache.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// templateUsers maps a DataVolume to the VMIs of the VMs whose
// dataVolumeTemplates name it (a VMI is named after its VM).
func (r *HotplugReconciler) templateUsers(ctx context.Context, o client.Object) []reconcile.Request {
	var vms kubevirtv1.VirtualMachineList
	if err := r.Cache.List(ctx, &vms, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range vms.Items {
		for _, t := range vms.Items[i].Spec.DataVolumeTemplates {
			if t.Name == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vms.Items[i])})
			}
		}
	}
	return out
}
