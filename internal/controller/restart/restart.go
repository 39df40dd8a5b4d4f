// Package restart is the controller's "on restart" mode: when a VM is
// about to start (or fails to start), it removes the VM's dangling
// hot-plugged references that DanglingVolumeReference proves safe to
// remove, and tells on the VM what it did or could not do.
package restart

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/eventreason"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// Event reasons of the "on restart" mode (contract: operators alert on
// them), recorded on the VM besides the action outcomes of package act.
const (
	// EventDanglingRemovedOnStart: a dangling hot-plugged reference was
	// removed from a VM that is about to start.
	EventDanglingRemovedOnStart = eventreason.DanglingOnStart
	// EventDanglingBlocksStart: a dangling reference of a starting VM that
	// tether does not remove (a boot or other non-hot-pluggable disk, or a
	// hold of the check); the message names the claim and the procedure.
	EventDanglingBlocksStart = eventreason.DanglingBlocksStart
	// EventDanglingWouldRemove: dry run; the reference would be removed.
	EventDanglingWouldRemove = eventreason.DanglingWouldRemove
)

// Reconciler is the "on restart" mode: its subject is a VM. When
// the VM is about to start (or fails to start) it removes the VM's dangling
// hot-plugged references, the ones DanglingVolumeReference proves safe to
// remove, through the live-checking executor. It decides from the cache;
// the executor re-reads live before it writes.
type Reconciler struct {
	// Cache is the informer-backed client.
	Cache client.Client
	// Records keeps this mode's Finding records (records.go), holds
	// the blast-radius budget shared with the checks' reconcilers and runs
	// the actions.
	Records *records.Keeper
	// Executor acts with live reads; its policy names DanglingVolumeReference.
	Executor *act.Executor
	Config   *config.Config
	// Policy is config.DanglingPolicy().
	Policy check.Policy
	Now    func() time.Time
	Log    logr.Logger
	// DataVolumes: CDI is installed and DataVolumes are cached.
	DataVolumes bool

	mu sync.Mutex
	// told holds, per VM, the "volume/reason" Events already recorded for
	// the current start attempt; it is cleared when the VM is not starting.
	told map[types.UID]map[string]bool
	// seen holds, per VM, when each safe finding was first seen in the
	// current start attempt (for Settle).
	seen map[types.UID]map[string]time.Time
}

// Reconcile handles one VM, named by req.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var vm kubevirtv1.VirtualMachine
	if err := r.Cache.Get(ctx, req.NamespacedName, &vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var vmi *kubevirtv1.VirtualMachineInstance
	var got kubevirtv1.VirtualMachineInstance
	switch err := r.Cache.Get(ctx, req.NamespacedName, &got); {
	case err == nil:
		vmi = &got
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	if !startingUp(&vm, vmi) {
		r.forget(vm.UID)
		return ctrl.Result{}, r.resolveVM(ctx, &vm, nil)
	}
	snap, err := r.snapshotFor(ctx, &vm)
	if err != nil {
		return ctrl.Result{}, err
	}
	var requeue time.Duration
	findings := r.findingsOf(snap, &vm, vmi)
	r.settling(vm.UID, findings)
	recs, err := r.vmRecords(ctx, &vm)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Records.ResolveGone(ctx, byID(findings), recs, r.Now()); err != nil {
		return ctrl.Result{}, err
	}
	for _, f := range findings {
		after, err := r.handle(ctx, &vm, f, recs[f.ID])
		if err != nil {
			return ctrl.Result{}, err
		}
		if after > 0 && (requeue == 0 || after < requeue) {
			requeue = after
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// findingsOf runs DanglingVolumeReference on the snapshot and keeps the
// findings about vm or its VMI whose storage is dangling, by volume name.
func (r *Reconciler) findingsOf(s *snapshot.Snapshot, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) []drift.Finding {
	var out []drift.Finding
	for _, f := range check.Run(s, r.Policy, r.Now()) {
		ours := f.Object.UID == vm.UID || (vmi != nil && f.Object.UID == vmi.UID)
		if f.Check != check.DanglingVolumeReference || !ours || f.Action.BlockedBy == check.ClaimExists {
			continue
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Volume < out[j].Volume })
	return out
}

// handle keeps the record of one finding of a starting VM through the
// records' one sequence, and returns when to look again. The mode's own
// rules ride on it as hooks: the settle period as grace, its Events once per
// start attempt, seen twice Settle apart in this process, and a live read
// that the VM is still starting right before it acts.
func (r *Reconciler) handle(ctx context.Context, vm *kubevirtv1.VirtualMachine, f drift.Finding, rec *v1alpha1.Finding) (time.Duration, error) {
	p := records.Path{
		Apply:  r.apply,
		Grace:  func(drift.Finding) time.Duration { return r.Config.DanglingOnRestart.Settle.Duration },
		Told:   func(ctx context.Context, f drift.Finding) { r.tellWhy(ctx, vm, f) },
		Settle: func(f drift.Finding, now time.Time) time.Duration { return r.settle(vm.UID, f.Volume, now) },
		Ready:  func(ctx context.Context, _ drift.Finding) (bool, error) { return r.liveStartingUp(ctx, vm) },
		Acted:  func(ctx context.Context, f drift.Finding, res drift.Result) error { return r.acted(ctx, vm, f, res) },
	}
	return r.Records.Sync(ctx, p, vmSubject(vm), f, rec, r.Now())
}

// tellWhy records, once per start attempt, the Event that says why a dangling
// reference stays: the check holds it, or the controller runs dry.
func (r *Reconciler) tellWhy(ctx context.Context, vm *kubevirtv1.VirtualMachine, f drift.Finding) {
	log := r.Log.WithValues("finding", f.ID, "vm", vm.Namespace+"/"+vm.Name, "volume", f.Volume)
	switch {
	case !f.Action.Safe:
		if r.tell(vm.UID, f.Volume, string(f.Action.BlockedBy)) {
			log.Info("dangling reference blocks the start; not removing it", "blockedBy", f.Action.BlockedBy)
			r.event(ctx, vm, f, EventDanglingBlocksStart, corev1.EventTypeWarning,
				fmt.Sprintf("VM is starting, but %s; tether does not remove it (%s). %s (finding %s)", f.Message, f.Action.BlockedBy, f.Action.Remedy, f.ID))
		}
	case r.Config.DryRun:
		if r.tell(vm.UID, f.Volume, "DryRun") {
			log.Info("dry run: would remove the dangling reference as the VM starts", "action", f.Action.Type)
			r.event(ctx, vm, f, EventDanglingWouldRemove, corev1.EventTypeNormal,
				fmt.Sprintf("dry run: would remove hot-plugged volume %q from the VM spec as the VM starts: %s (finding %s)", f.Volume, f.Message, f.ID))
		}
	}
}

// acted tells of a removed reference on the VM, and makes a failed removal
// the pass's error (the workqueue backs off). Pending, refused and
// deferred actions are looked at again; the executor recorded why.
func (r *Reconciler) acted(ctx context.Context, vm *kubevirtv1.VirtualMachine, f drift.Finding, res drift.Result) error {
	switch res.Outcome {
	case drift.Applied:
		r.event(ctx, vm, f, EventDanglingRemovedOnStart, corev1.EventTypeNormal,
			fmt.Sprintf("removed hot-plugged volume %q from the VM spec as the VM starts: %s (finding %s)", f.Volume, f.Message, f.ID))
		return nil
	case drift.Pending, drift.Refused, drift.Migrating:
		return nil
	}
	return fmt.Errorf("removing volume %q of VM %s/%s: %s", f.Volume, vm.Namespace, vm.Name, res.Message)
}

// apply removes a dangling reference; the live re-check needs no evidence
// from the pass.
func (r *Reconciler) apply(ctx context.Context, f drift.Finding) drift.Result {
	return r.Executor.Apply(ctx, f, act.Evidence{})
}

// settle records when a safe finding was first seen for this start attempt
// and returns how long it must still wait.
func (r *Reconciler) settle(vm types.UID, volume string, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[types.UID]map[string]time.Time{}
	}
	if r.seen[vm] == nil {
		r.seen[vm] = map[string]time.Time{}
	}
	first, ok := r.seen[vm][volume]
	if !ok {
		r.seen[vm][volume] = now
		first = now
	}
	if wait := first.Add(r.Config.DanglingOnRestart.Settle.Duration).Sub(now); wait > 0 {
		return wait
	}
	return 0
}

// settling drops the first sight of every volume of vm that has no safe
// finding now: a reference that stopped dangling (its claim came back) or
// became unsafe starts its settle period again when it dangles again.
func (r *Reconciler) settling(vm types.UID, findings []drift.Finding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for volume := range r.seen[vm] {
		if !slices.ContainsFunc(findings, func(f drift.Finding) bool { return f.Volume == volume && f.Action.Safe }) {
			delete(r.seen[vm], volume)
		}
	}
}

// liveStartingUp re-reads the VM and its VMI live and reports whether the VM
// is still about to start.
func (r *Reconciler) liveStartingUp(ctx context.Context, cached *kubevirtv1.VirtualMachine) (bool, error) {
	key := client.ObjectKeyFromObject(cached)
	var vm kubevirtv1.VirtualMachine
	if err := r.Executor.Client.Get(ctx, key, &vm); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	var vmi *kubevirtv1.VirtualMachineInstance
	var got kubevirtv1.VirtualMachineInstance
	switch err := r.Executor.Client.Get(ctx, key, &got); {
	case err == nil:
		vmi = &got
	case !apierrors.IsNotFound(err):
		return false, err
	}
	return vm.UID == cached.UID && startingUp(&vm, vmi), nil
}

// startingUp is check.StartingUp of a VM and its VMI (nil when it has
// none) as read.
func startingUp(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) bool {
	v := snapshot.VMOf(vm)
	if vmi == nil {
		return check.StartingUp(&v, nil)
	}
	i := snapshot.VMIOf(vmi)
	return check.StartingUp(&v, &i)
}

// snapshotFor builds the decision input for one VM from the caches with
// observe.VMReferences, the gatherer the live re-check reads with: every VM
// of its namespace (their dataVolumeTemplates count as storage), its VMI,
// the namespace's PVCs, DataVolumes and attachment pods, and the gates.
// Unlike the re-check of one reference, it reads every claim of the
// namespace: the VM's references are all checked at once.
func (r *Reconciler) snapshotFor(ctx context.Context, vm *kubevirtv1.VirtualMachine) (*snapshot.Snapshot, error) {
	return observe.VMReferences(ctx, r.Cache, vm.Namespace, vm.Name, observe.Claims{NoDataVolumes: !r.DataVolumes})
}

// tell reports whether the Event for vm, volume and reason is still to be
// recorded in this start attempt, and notes it as recorded.
func (r *Reconciler) tell(vm types.UID, volume, reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.told == nil {
		r.told = map[types.UID]map[string]bool{}
	}
	key := volume + "/" + reason
	if r.told[vm][key] {
		return false
	}
	if r.told[vm] == nil {
		r.told[vm] = map[string]bool{}
	}
	r.told[vm][key] = true
	return true
}

// forget drops what was told about vm: its next start attempt is told again.
func (r *Reconciler) forget(vm types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.told, vm)
	delete(r.seen, vm)
}

// event records an Event on the VM (also for a finding on its VMI).
func (r *Reconciler) event(ctx context.Context, vm *kubevirtv1.VirtualMachine, f drift.Finding, reason, typ, msg string) {
	f.Object = drift.ObjectRef{Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID}
	r.Records.Event(ctx, f, reason, typ, msg)
}

// Setup registers the watches. Handlers only map events to VM keys.
func (r *Reconciler) Setup(mgr manager.Manager) error {
	changed := predicate.ResourceVersionChangedPredicate{}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("dangling-restart").
		For(&kubevirtv1.VirtualMachine{}, builder.WithPredicates(changed)).
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		}), builder.WithPredicates(changed)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(r.vmsOfNamespace), builder.WithPredicates(changed)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.vmsOfNamespace), builder.WithPredicates(changed, attachmentPods())).
		Watches(&kubevirtv1.KubeVirt{}, handler.EnqueueRequestsFromMapFunc(r.allVMs), builder.WithPredicates(changed))
	if r.DataVolumes {
		b = b.Watches(&cdiv1.DataVolume{}, handler.EnqueueRequestsFromMapFunc(r.vmsOfNamespace), builder.WithPredicates(changed))
	}
	return b.Complete(r)
}

func attachmentPods() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[snapshot.AttachmentPodLabel] == snapshot.AttachmentPodLabelValue
	})
}

// vmsOfNamespace maps a storage object or attachment pod to every VM of its
// namespace (any of them may refer to it, also through a template).
func (r *Reconciler) vmsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return r.vms(ctx, client.InNamespace(o.GetNamespace()))
}

func (r *Reconciler) allVMs(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.vms(ctx)
}

func (r *Reconciler) vms(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var list kubevirtv1.VirtualMachineList
	if err := r.Cache.List(ctx, &list, opts...); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}
