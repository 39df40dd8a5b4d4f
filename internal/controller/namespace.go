package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/report/policyreport"
)

const (
	// namespaceBatch is how long a namespace's events are gathered into
	// one pass over it.
	namespaceBatch = 2 * time.Second
	// namespaceResync: a namespace that holds anything the loop reads is
	// looked at again this often without any change, because a hot-plug
	// phase becomes stuck (StuckHotplugPhase's grace) with no event to
	// announce it.
	namespaceResync = time.Minute
	// namespaceObserveEvery: how often an open record's lastObserved is
	// refreshed (each resync sees it; a refresh is a write).
	namespaceObserveEvery = 5 * time.Minute
	// namespaceRetry: the next pass after one in which a record could not
	// be written.
	namespaceRetry = 5 * time.Second
)

// NamespaceReconciler runs the checks whose row names LoopNamespace
// (StuckHotplugPhase, SharedClaimConflict, InterruptedVolumeMigration) one
// namespace at a time, from the caches of the kinds those checks read
// there, and keeps their Finding records. The checks only report: it acts
// on nothing.
type NamespaceReconciler struct {
	// Cache is the informer-backed client: reads are free.
	Cache   client.Client
	Records *records.Keeper
	Policy  check.Policy
	Log     logr.Logger
	// Checks are the loop's enabled checks; Kinds what they read.
	Checks []string
	Kinds  snapshot.Kinds
}

// Reconcile is one pass over the namespace named by req.Name.
func (r *NamespaceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t0 := time.Now()
	defer func() { metrics.ReconcileSeconds.Observe(time.Since(t0).Seconds()) }()
	ns := req.Name
	now := r.Records.Now()
	snap, current, err := r.decide(ctx, ns, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A disabled check's records are left as they are.
	recs, err := recordsOf(ctx, r.Cache, r.Checks, client.InNamespace(ns))
	if err != nil {
		return ctrl.Result{}, err
	}
	var requeue time.Duration
	if !empty(snap) {
		requeue = namespaceResync
	}
	var errs []error
	for id, f := range current {
		after, err := r.Records.Sync(ctx, records.Path{Apply: reportOnly}, namespaceSubject(f), f, recs[id], now)
		if err != nil {
			errs = append(errs, fmt.Errorf("finding %s (%s %s): %w", f.ID, f.Check, f.Object.Name, err))
			continue
		}
		if after > 0 && (requeue == 0 || after < requeue) {
			requeue = after
		}
	}
	if err := r.Records.ResolveGone(ctx, current, recs, now); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		// One record that cannot be written must not stop the others.
		r.Log.Error(errors.Join(errs...), "some findings could not be recorded", "namespace", ns, "count", len(errs))
		if requeue == 0 || requeue > namespaceRetry {
			requeue = namespaceRetry
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// decide is the loop's pass over namespace ns at now: what it read, and
// the findings there of its enabled checks, by id.
func (r *NamespaceReconciler) decide(ctx context.Context, ns string, now time.Time) (*snapshot.Snapshot, map[string]drift.Finding, error) {
	// The checks only read (check.TestRun_changesNoObject): the objects are
	// shared with the cache, not copied.
	snap, err := observe.Namespace(ctx, r.Cache, observe.StorageRead{Namespace: ns, Shared: true, Kinds: r.Kinds})
	if err != nil {
		return nil, nil, fmt.Errorf("reading namespace %s from the caches: %w", ns, err)
	}
	policy := r.Policy
	policy.Checks = r.Checks
	current := map[string]drift.Finding{}
	for _, f := range check.Run(snap, policy, now) {
		if f.Namespace == ns && r.Records.Config.Enabled(f.Check) && slices.Contains(r.Checks, f.Check) {
			current[f.ID] = f
		}
	}
	return snap, current, nil
}

// empty reports whether the namespace holds nothing the loop reads: then
// nothing can become a finding with time, and no resync is needed.
func empty(s *snapshot.Snapshot) bool {
	return len(s.VMs)+len(s.VMIs)+len(s.PVCs)+len(s.AttachmentPods)+len(s.DataVolumes) == 0
}

// namespaceSubject files a finding of the loop in its subject's namespace,
// owned by its subject (a VMI, a VM or a claim), so that the record goes
// when the subject goes.
func namespaceSubject(f drift.Finding) records.Subject {
	return records.Subject{Namespace: f.Namespace, ObserveEvery: namespaceObserveEvery, Owner: metav1.OwnerReference{
		APIVersion: policyreport.APIVersionOf(f.Object.Kind), Kind: f.Object.Kind, Name: f.Object.Name, UID: f.Object.UID,
	}}
}

// reportOnly is the loop's action path: its checks propose no action
// (check.TestNamespaceLoop_rowsReportAndDecidePerNamespace), so it is never called; were it
// called, it would change nothing.
func reportOnly(_ context.Context, f drift.Finding) drift.Result {
	return drift.Result{FindingID: f.ID, Outcome: drift.Refused, Message: f.Check + " only reports: the controller acts on none of its findings"}
}

// namespaceLoop returns the enabled checks of the namespace loop and the
// kinds they read; an error when a check reads a kind the loop cannot read
// within one namespace.
func namespaceLoop(enabled func(string) bool) ([]string, snapshot.Kinds, error) {
	names := slices.DeleteFunc(check.InLoop(check.LoopNamespace), func(n string) bool { return !enabled(n) })
	kinds := check.Reads(names)
	if len(names) > 0 && kinds&^observe.NamespaceKinds != 0 {
		return nil, 0, fmt.Errorf("controller: checks %v read %s, which the namespace loop cannot read within one namespace", names, kinds)
	}
	return names, kinds, nil
}

// setupNamespace registers the namespace reconciler: a change to what the
// enabled checks read in a namespace leads, batched, to one pass over that
// namespace. It watches only those kinds.
func setupNamespace(mgr manager.Manager, rs *records.Keeper, policy check.Policy, o Options) error {
	names, kinds, err := namespaceLoop(o.Config.Enabled)
	if err != nil {
		return err
	}
	r := &NamespaceReconciler{Cache: mgr.GetClient(), Records: rs, Policy: policy, Checks: names, Kinds: kinds, Log: o.Log.WithName("namespace")}
	watched := kinds
	if !dataVolumesInstalled(mgr.GetRESTMapper()) {
		// No CDI: the read finds no DataVolumes, and there is nothing to watch.
		watched &^= snapshot.KindDataVolumes
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("namespace").
		// A record deleted or edited by someone else is put back.
		Watches(&v1alpha1.Finding{}, inNamespace{}, builder.WithPredicates(recordTampered(), recordOf(names)))
	if b, err = addWatches(b, "namespace", watched, r.wake); err != nil {
		return err
	}
	return b.Complete(r)
}

// wake maps a change of a kind the loop reads to a pass over its
// namespace. Resyncs carry no change, nor do updates of what the lean
// caches do not hold (a VMI's guest information, a pod's conditions); the
// pod cache holds every pod when a storage check is enabled, and only
// attachment pods concern the attachment pods' readers. The running
// KubeVirt and its gates change what a stuck phase's finding says: a
// change of the KubeVirt CR leads to a pass over every namespace with VMIs.
func (r *NamespaceReconciler) wake(k snapshot.Kinds, _ snapshot.Resource) (handler.EventHandler, []predicate.Predicate) {
	changed := []predicate.Predicate{predicate.ResourceVersionChangedPredicate{}}
	switch k {
	case snapshot.KindKubeVirt:
		return handler.EnqueueRequestsFromMapFunc(r.vmiNamespaces), changed
	case snapshot.KindAttachmentPods:
		return inNamespace{}, append(changed, leanViewChanged(), attachmentPod())
	case snapshot.KindVMIs, snapshot.KindVMs, snapshot.KindPVCs, snapshot.KindDataVolumes, snapshot.KindPods:
		return inNamespace{}, append(changed, leanViewChanged())
	}
	return nil, nil
}

// vmiNamespaces maps a change of the KubeVirt CR to every namespace that
// holds a VMI.
func (r *NamespaceReconciler) vmiNamespaces(ctx context.Context, _ client.Object) []reconcile.Request {
	var list kubevirtv1.VirtualMachineInstanceList
	if err := r.Cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []reconcile.Request
	for i := range list.Items {
		if ns := list.Items[i].Namespace; !seen[ns] {
			seen[ns] = true
			out = append(out, namespaceKey(ns))
		}
	}
	return out
}

func namespaceKey(ns string) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKey{Name: ns}}
}

// recordOf lets through the events of records of the named checks only.
func recordOf(checks []string) predicate.Funcs {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return slices.Contains(checks, o.GetLabels()[v1alpha1.LabelCheck])
	})
}

// attachmentPod lets through the events of hot-plug attachment pods only.
func attachmentPod() predicate.Funcs {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[snapshot.AttachmentPodLabel] == snapshot.AttachmentPodLabelValue
	})
}

// leanViewChanged lets through only updates that change what the caches
// hold of an object (snapshot.Lean) besides its resourceVersion and
// generation, which no check reads: a VMI's status changes far more often
// than its volumes, phase or node, and a VMI, which has no status
// subresource, moves its generation with every status write.
func leanViewChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return true
		}
		view := func(o client.Object) any {
			o = o.DeepCopyObject().(client.Object)
			o.SetResourceVersion("")
			o.SetGeneration(0)
			return snapshot.Lean(o)
		}
		return !equality.Semantic.DeepEqual(view(e.ObjectOld), view(e.ObjectNew))
	}}
}

// inNamespace maps every event to its object's namespace, added after
// namespaceBatch so that a burst of events leads to one pass.
type inNamespace struct{}

func (inNamespace) add(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if o != nil && o.GetNamespace() != "" {
		q.AddAfter(namespaceKey(o.GetNamespace()), namespaceBatch)
	}
}

func (n inNamespace) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	n.add(e.Object, q)
}

func (n inNamespace) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	n.add(e.ObjectNew, q)
}

func (n inNamespace) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	n.add(e.Object, q)
}

func (n inNamespace) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	n.add(e.Object, q)
}

var _ handler.EventHandler = inNamespace{}
