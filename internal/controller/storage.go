package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
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
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller/gonenodes"
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/metrics"
)

// storageKey is the one work item of the storage reconciler: the storage
// checks decide from cluster-wide state, so every change leads to one pass
// over all of it.
var storageKey = reconcile.Request{NamespacedName: client.ObjectKey{Name: "storage"}}

const (
	// storageBatch is how long events are gathered into one pass.
	storageBatch = 2 * time.Second
	// storageResync bounds the time between passes: the storage findings
	// appear after grace periods pass, with no event to announce it.
	storageResync = 30 * time.Second
	// storageObserveEvery: how often the open storage records' lastObserved
	// is refreshed (each pass sees them all; a refresh is a write).
	storageObserveEvery = 5 * time.Minute
	// storageRetry: the next pass after one in which a record could not be
	// written.
	storageRetry = 5 * time.Second
	// nodeGoneRefresh: while the gone-node fencing rule is on and a node is
	// gone, passes run and records are refreshed at least this often, so
	// that a successor can credit the watch (findingrecord.NodesGone).
	nodeGoneRefresh = 10 * time.Second
)

// StorageReconciler runs the storage checks (StaleVolumeAttachment,
// MultiAttachConflict, BlockedDeletion) from cluster-wide caches of Nodes,
// VolumeAttachments, PVs, claims and pods, keeps their Finding records and
// acts on safe findings through package act, which re-reads live first.
type StorageReconciler struct {
	// Cache is the informer-backed client: reads are free.
	Cache client.Client
	// Records keeps the Finding records and acts.
	Records *records.Keeper
	// Executor acts with live reads; its policy is the checks' policy.
	Executor *act.Executor
	Policy   check.Policy
	Log      logr.Logger
	// RecordNamespace holds the records of findings about cluster-scoped
	// objects that no claim ties to a namespace.
	RecordNamespace string
	// Checks are the enabled storage checks.
	Checks []string
	// DataVolumes and VMs: whether those APIs are served (BlockedDeletion
	// explains tether.dev/in-use with them).
	DataVolumes, VMs bool

	gone gonenodes.Nodes
}

// Reconcile is one pass over the storage state.
func (r *StorageReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	t0 := time.Now()
	defer func() { metrics.ReconcileSeconds.Observe(time.Since(t0).Seconds()) }()
	now := r.Records.Now()
	snap, recs, err := r.read(ctx, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	current := r.decide(snap, now)
	requeue, errs := r.syncAll(ctx, snap, current, recs, now)
	if err := r.Records.ResolveGone(ctx, current, recs, now); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		// One record that cannot be written (a namespace being deleted, a
		// conflict with a stale cache) must not stop the others, nor the
		// timed passes: log, and look again soon.
		r.Log.Error(errors.Join(errs...), "some findings could not be recorded", "count", len(errs))
		requeue = min(requeue, storageRetry)
	}
	// A gone node becomes fenced by the operator's rule with no event to
	// announce it: look again right then.
	if due := r.gone.NextFencing(r.Policy.Storage.FenceGoneNodesAfter, now); due > 0 && due < requeue {
		requeue = due
	}
	if r.Policy.Storage.FenceGoneNodesAfter > 0 && r.gone.Any() && nodeGoneRefresh < requeue {
		requeue = nodeGoneRefresh
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// decide is the pass's decision on what it read: the findings of the
// enabled storage checks, by id.
func (r *StorageReconciler) decide(snap *snapshot.Snapshot, now time.Time) map[string]drift.Finding {
	policy := r.Policy
	policy.Checks = r.Checks
	current := map[string]drift.Finding{}
	for _, f := range check.Run(snap, policy, now) {
		if r.Records.Config.Enabled(f.Check) && slices.Contains(r.Checks, f.Check) {
			current[f.ID] = f
		}
	}
	return current
}

// read builds the pass's snapshot and its records: the caches, and since
// when nodes have been gone (seeded once from the durable records).
func (r *StorageReconciler) read(ctx context.Context, now time.Time) (*snapshot.Snapshot, map[string]*v1alpha1.Finding, error) {
	snap, err := r.snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	recs, err := r.storageRecords(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !r.gone.Seeded() {
		for _, why := range r.gone.Seed(slices.Collect(maps.Values(recs)), snap.VolumeAttachments, r.RecordNamespace, now) {
			r.Log.Info("record not trusted: " + why)
		}
	}
	r.gone.Observe(snap, now)
	snap.NodesGoneSince = r.gone.Copy()
	return snapshot.New(*snap), recs, nil
}

// syncAll keeps the record of every current finding and returns when to
// look again and what could not be recorded.
func (r *StorageReconciler) syncAll(ctx context.Context, snap *snapshot.Snapshot, current map[string]drift.Finding, recs map[string]*v1alpha1.Finding, now time.Time) (time.Duration, []error) {
	nodes := nodesOf(snap)
	// The live re-check sees the same durable node-gone records as the pass.
	ev := act.Evidence{NodesGoneSince: snap.NodesGoneSince}
	apply := func(ctx context.Context, f drift.Finding) drift.Result { return r.Executor.Apply(ctx, f, ev) }
	var errs []error
	requeue := storageResync
	for id, f := range current {
		subj := r.subjectOf(snap, nodes, f)
		rec := recs[id]
		if rec != nil && rec.Namespace != subj.Namespace {
			// Filed where this version no longer files it (a VolumeAttachment
			// record in a claim's namespace): replace it, so that it starts
			// again where its times count.
			if err := r.Records.Retire(ctx, rec); err != nil {
				errs = append(errs, err)
				continue
			}
			rec = nil
		}
		after, err := r.Records.Sync(ctx, records.Path{Apply: apply}, subj, f, rec, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("finding %s (%s %s): %w", f.ID, f.Check, f.Object.Name, err))
			continue
		}
		if after > 0 && after < requeue {
			requeue = after
		}
	}
	return requeue, errs
}

// snapshot reads the storage state from the caches (no API request) with
// observe.Storage. The checks only read (check.TestRun_changesNoObject): the
// objects are shared with the cache, not copied, which would cost more than
// the checks themselves on a cluster with many pods.
func (r *StorageReconciler) snapshot(ctx context.Context) (*snapshot.Snapshot, error) {
	var s snapshot.Snapshot
	read := observe.StorageRead{Shared: true, NoVMs: !r.VMs, NoDataVolumes: !r.DataVolumes}
	if err := observe.Storage(ctx, r.Cache, &s, read); err != nil {
		return nil, fmt.Errorf("reading the storage caches: %w", err)
	}
	return &s, nil
}

// storageRecords returns the records of the enabled storage checks by
// finding id (a disabled check's records are left as they are).
func (r *StorageReconciler) storageRecords(ctx context.Context) (map[string]*v1alpha1.Finding, error) {
	return recordsOf(ctx, r.Cache, r.Checks)
}

// recordsOf returns, by finding id, the records of the named checks among
// those opts select.
func recordsOf(ctx context.Context, c client.Reader, checks []string, opts ...client.ListOption) (map[string]*v1alpha1.Finding, error) {
	var list v1alpha1.FindingList
	if err := c.List(ctx, &list, append(opts, client.HasLabels{v1alpha1.LabelCheck})...); err != nil {
		return nil, err
	}
	out := map[string]*v1alpha1.Finding{}
	for i := range list.Items {
		if rec := &list.Items[i]; slices.Contains(checks, rec.Spec.Check) {
			out[rec.Spec.ID] = rec
		}
	}
	return out, nil
}

// subjectNodes maps VolumeAttachments (by name) and pods (by UID) to their
// nodes, built once per pass for subjectOf.
type subjectNodes struct {
	va  map[string]string
	pod map[types.UID]string
}

func nodesOf(s *snapshot.Snapshot) subjectNodes {
	n := subjectNodes{va: make(map[string]string, len(s.VolumeAttachments)), pod: make(map[types.UID]string, len(s.Pods))}
	for i := range s.VolumeAttachments {
		n.va[s.VolumeAttachments[i].Name] = s.VolumeAttachments[i].Spec.NodeName
	}
	for i := range s.Pods {
		n.pod[s.Pods[i].UID] = s.Pods[i].Spec.NodeName
	}
	return n
}

// subjectOf files a storage finding: a VolumeAttachment's (cluster-scoped;
// its records carry the durable "node gone since" that fencing counts on)
// in the controller's own namespace, where only the controller writes;
// others in the namespace they concern (the claim's, the pod's), else in
// the controller's own; owned by its subject.
func (r *StorageReconciler) subjectOf(s *snapshot.Snapshot, nodes subjectNodes, f drift.Finding) records.Subject {
	subj := records.Subject{Namespace: f.Namespace, ObserveEvery: storageObserveEvery, Owner: metav1.OwnerReference{
		APIVersion: "v1", Kind: f.Object.Kind, Name: f.Object.Name, UID: f.Object.UID,
	}}
	// The live re-check must see the same durable records.
	if subj.Namespace == "" {
		subj.Namespace = r.RecordNamespace
	}
	switch f.Object.Kind {
	case check.KindVolumeAttachment:
		subj.Namespace = r.RecordNamespace
		subj.Owner.APIVersion = storagev1.SchemeGroupVersion.String()
		subj.Node = nodes.va[f.Object.Name]
		if since, ok := s.NodesGoneSince[subj.Node]; ok && subj.Node != "" && s.Index().Node(subj.Node) == nil {
			subj.NodeGoneSince = &since
			if r.Policy.Storage.FenceGoneNodesAfter > 0 {
				subj.ObserveEvery = nodeGoneRefresh
			}
		}
	case "DataVolume":
		subj.Owner.APIVersion = cdiv1.SchemeGroupVersion.String()
	case "Pod":
		subj.Node = nodes.pod[f.Object.UID]
	}
	if f.Check == check.MultiAttachConflict {
		subj.Observed = multiAttachEvent
	}
	return subj
}

// multiAttachEvent is the Event that announces a MultiAttachConflict: the
// finding's message, who holds the volume and the remedy. The finding's
// evidence already follows the namespace-privacy rule, and the Event is
// recorded on the waiting pod, in its namespace.
func multiAttachEvent(f drift.Finding) (reason, typ, msg string) {
	return EventMultiAttach, corev1.EventTypeWarning, multiAttachText(f)
}

// multiAttachText is the text of multiAttachEvent.
func multiAttachText(f drift.Finding) string {
	parts := []string{f.Message}
	if len(f.Evidence) > 1 {
		parts = append(parts, f.Evidence[1:]...)
	}
	parts = append(parts, "remedy: "+f.Action.Remedy)
	msg := strings.Join(parts, "; ")
	const max = 1024 // what the events API keeps of a note
	if len(msg) > max {
		msg = msg[:max-3] + "..."
	}
	return msg
}

// setupStorage registers the storage reconciler: every change to what the
// storage checks read leads, batched, to one pass.
func setupStorage(mgr manager.Manager, rs *records.Keeper, base *act.Executor, policy check.Policy, o Options) error {
	r := &StorageReconciler{Cache: mgr.GetClient(), Records: rs, Policy: policy, RecordNamespace: o.Namespace}
	var err error
	if r.DataVolumes, err = served(mgr.GetRESTMapper(), cdiv1.SchemeGroupVersion, "DataVolume"); err != nil {
		return err
	}
	if r.VMs, err = served(mgr.GetRESTMapper(), kubevirtv1.SchemeGroupVersion, "VirtualMachine"); err != nil {
		return err
	}
	for _, name := range config.StorageChecks() {
		if o.Config.Enabled(name) {
			r.Checks = append(r.Checks, name)
		}
	}
	r.Log = o.Log.WithName("storage")
	r.Executor = base
	watched := loopGathers()[check.LoopStorage]
	if !r.VMs {
		watched &^= snapshot.KindVMs
	}
	if !r.DataVolumes {
		watched &^= snapshot.KindDataVolumes
	}
	start := make(chan event.GenericEvent, 1)
	start <- event.GenericEvent{Object: &corev1.Node{}}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("storage").
		// One pass at start, whatever the cluster holds.
		WatchesRawSource(source.Channel(start, batched{})).
		// A record deleted or edited by someone else is put back.
		Watches(&v1alpha1.Finding{}, batched{}, builder.WithPredicates(recordTampered()))
	if b, err = addWatches(b, "storage", watched, r.wake); err != nil {
		return err
	}
	return b.Complete(r)
}

// wake maps every change of what the storage checks read to one pass,
// batched. Resyncs carry no change; of pods, only changes of what the
// checks read of them count. Every Node seen is told to the gone-node
// tracker.
func (r *StorageReconciler) wake(k snapshot.Kinds, res snapshot.Resource) (handler.EventHandler, []predicate.Predicate) {
	changed := []predicate.Predicate{predicate.ResourceVersionChangedPredicate{}}
	switch {
	case k == snapshot.KindStorage && res.Kind == "Node":
		return nodeSeen{gone: &r.gone}, changed
	case k == snapshot.KindPods:
		return batched{}, append(changed, podFieldsChanged())
	case k&loopGathers()[check.LoopStorage] != 0:
		return batched{}, changed
	}
	return nil, nil
}

// served reports whether the API server serves kind in gv. Only "no such
// kind" means no; any other error (discovery failing) is returned, because
// guessing "not served" would make BlockedDeletion blame a finalizer whose
// users it could not see.
func served(m meta.RESTMapper, gv schema.GroupVersion, kind string) (bool, error) {
	_, err := m.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	default:
		return false, fmt.Errorf("discovering whether %s %s is served: %w", gv, kind, err)
	}
}

// batched maps every event to the storage key, added after storageBatch so
// that a burst of events leads to one pass.
type batched struct{}

func (batched) add(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.AddAfter(storageKey, storageBatch)
}

func (b batched) Create(_ context.Context, _ event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	b.add(q)
}

func (b batched) Update(_ context.Context, _ event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	b.add(q)
}

func (b batched) Delete(_ context.Context, _ event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	b.add(q)
}

func (b batched) Generic(_ context.Context, _ event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	b.add(q)
}

var _ handler.EventHandler = batched{}

// nodeSeen batches Node events like batched, and tells the gone-node
// tracker about every Node that exists at some moment, so that one that
// comes back and goes again between two passes loses its old time.
type nodeSeen struct {
	batched
	gone *gonenodes.Nodes
}

func (n nodeSeen) Create(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	n.gone.Touch(e.Object.GetName())
	n.batched.Create(ctx, e, q)
}

func (n nodeSeen) Update(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	n.gone.Touch(e.ObjectNew.GetName())
	n.batched.Update(ctx, e, q)
}

// podFieldsChanged lets through only pod updates that change what the storage
// checks read: the node, the volumes, the labels, the phase, deletion, and
// whether each container runs or when it finished. Busy clusters update pod
// statuses (conditions, IPs, restarts) far more often than that.
func podFieldsChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*corev1.Pod)
		b, okB := e.ObjectNew.(*corev1.Pod)
		if !okA || !okB {
			return true
		}
		return podView(a) != podView(b)
	}}
}

// podView is what the storage checks read of a pod, as one comparable string.
func podView(p *corev1.Pod) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s|%s|%v|", p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp)
	for _, v := range p.Spec.Volumes {
		fmt.Fprintf(&sb, "%s:", v.Name)
		if v.PersistentVolumeClaim != nil {
			sb.WriteString(v.PersistentVolumeClaim.ClaimName)
		}
		if v.Ephemeral != nil {
			sb.WriteString("(ephemeral)")
		}
		sb.WriteString(",")
	}
	keys := slices.Sorted(maps.Keys(p.Labels))
	for _, k := range keys {
		fmt.Fprintf(&sb, "|%s=%s", k, p.Labels[k])
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, c := range list {
			switch {
			case c.State.Running != nil:
				fmt.Fprintf(&sb, "|%s:running", c.Name)
			case c.State.Terminated != nil:
				fmt.Fprintf(&sb, "|%s:done@%s", c.Name, c.State.Terminated.FinishedAt.UTC())
			default:
				fmt.Fprintf(&sb, "|%s:waiting", c.Name)
			}
		}
	}
	return sb.String()
}
