package protect

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tether-dev/tether/internal/eventreason"
	"github.com/tether-dev/tether/internal/kevent"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/protect/inuse"
)

// Event reasons (contract: operators alert on them).
const (
	// EventDeletionPostponed is recorded on a protected object whose
	// deletion waits because VMs still use it.
	EventDeletionPostponed = eventreason.DeletionPostponed
)

// Options configure the protection reconcilers.
type Options struct {
	// Selector limits the VMs whose dependents are protected (on VM
	// labels); nil means every VM. Namespaces are limited by the
	// manager's cache.
	Selector labels.Selector
	// Identity names the reporting instance of the Events.
	Identity string
	Log      logr.Logger
	// BeforeLiveCheck, when set, runs after the cache found no user of an
	// object carrying the finalizer and before the live LIST confirms it.
	// Tests use it to create a user the informers have not seen yet.
	BeforeLiveCheck func(ctx context.Context, ref inuse.Ref)
	// BeforeRelease, when set, runs after the live LIST found no user and
	// before the finalizer is removed. Tests use it to create a user the
	// LIST could not see.
	BeforeRelease func(ctx context.Context, ref inuse.Ref)
	// ReleaseDelay holds the release of an object being deleted until this
	// long after its deletionTimestamp (inuse.ReleaseTiming): a VM write the
	// admission webhook let through just before the deletion is stored by
	// then, and the final live LIST sees it. Zero releases at once.
	ReleaseDelay time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Reconciler keeps the finalizer of one kind of object in step with the VMs
// that use it. It decides from current state only.
type Reconciler struct {
	Kind inuse.Kind
	// Cache reads from the informers; its writes go to the server.
	Cache client.Client
	// Live reads from the server, never from a cache.
	Live client.Reader
	Options

	mu       sync.Mutex
	reported map[types.UID]string // last postponement message per object
}

// Setup registers one reconciler per protected kind with mgr. DataVolumes
// are skipped (with a log line) when CDI is not installed.
func Setup(mgr manager.Manager, o Options) error {
	if o.Selector == nil {
		o.Selector = labels.Everything()
	}
	if o.Identity == "" {
		o.Identity = "tether-controller"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var kinds []inuse.Kind
	for _, k := range inuse.Kinds {
		if !installed(mgr.GetRESTMapper(), k) {
			o.Log.Info("not protected: the API is not installed", "kind", string(k))
			continue
		}
		r := &Reconciler{Kind: k, Cache: mgr.GetClient(), Live: mgr.GetAPIReader(), Options: o}
		r.Log = o.Log.WithName("protect").WithValues("kind", string(k))
		if err := r.setup(mgr); err != nil {
			return err
		}
		kinds = append(kinds, k)
	}
	return mgr.Add(deletingGauge{cache: mgr.GetClient(), kinds: kinds, interval: 15 * time.Second})
}

func (r *Reconciler) setup(mgr manager.Manager) error {
	changed := predicate.ResourceVersionChangedPredicate{}
	return ctrl.NewControllerManagedBy(mgr).
		Named("protect-"+strings.ToLower(string(r.Kind))).
		For(newObject(r.Kind), builder.WithPredicates(changed)).
		Watches(&kubevirtv1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(r.dependentsOf), builder.WithPredicates(changed)).
		Complete(r)
}

// dependentsOf maps a VM (old and new, on updates) to its dependents of
// this reconciler's kind.
func (r *Reconciler) dependentsOf(_ context.Context, o client.Object) []reconcile.Request {
	vm, ok := o.(*kubevirtv1.VirtualMachine)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, d := range inuse.DependentsOf(vm) {
		if d.Kind == r.Kind {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: d.Namespace, Name: d.Name}})
		}
	}
	return out
}

// Reconcile handles one object of r.Kind.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ref := inuse.Ref{Kind: r.Kind, Namespace: req.Namespace, Name: req.Name}
	obj := newObject(r.Kind)
	if err := r.Cache.Get(ctx, req.NamespacedName, obj); err != nil {
		// A missing object has nothing to protect; a VM that references
		// it causes no writes.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	users, err := r.users(ctx, r.Cache, ref, obj, true)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch inuse.Decide(obj, users, false) {
	case inuse.Add:
		r.Log.V(1).Info("adding finalizer", "object", ref.String(), "users", users)
		return ctrl.Result{}, addFinalizer(ctx, r.Cache, obj)
	case inuse.Postpone:
		return ctrl.Result{}, r.postpone(ctx, ref, obj, users)
	case inuse.Release:
		// Only an object being deleted is released, once the release
		// delay has passed: the final live LIST starts after that.
		release, wait := inuse.ReleaseTiming(obj, r.now(), r.ReleaseDelay)
		if !release {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return ctrl.Result{}, r.releaseIfUnused(ctx, ref)
	}
	return ctrl.Result{}, nil
}

// releaseIfUnused re-reads the object and its possible users live and
// removes the finalizer only if still no VM holds it.
func (r *Reconciler) releaseIfUnused(ctx context.Context, ref inuse.Ref) error {
	if r.BeforeLiveCheck != nil {
		r.BeforeLiveCheck(ctx, ref)
	}
	obj := newObject(r.Kind)
	if err := r.Live.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	return r.releaseLive(ctx, ref, obj)
}

// releaseLive lists the VMs of the namespace live and acts on what inuse.Decide
// makes of obj with them.
func (r *Reconciler) releaseLive(ctx context.Context, ref inuse.Ref, obj client.Object) error {
	// The live check counts every VM of the namespace, in scope or not: the
	// selector limits what tether starts protecting, never what keeps an
	// object protected.
	users, err := r.users(ctx, r.Live, ref, obj, false)
	if err != nil {
		return err
	}
	switch inuse.Decide(obj, users, false) {
	case inuse.Release:
		if r.BeforeRelease != nil {
			r.BeforeRelease(ctx, ref)
		}
		r.Log.Info("releasing: no VM uses it", "object", ref.String())
		return removeFinalizer(ctx, r.Cache, obj)
	case inuse.Postpone:
		return r.postpone(ctx, ref, obj, users)
	case inuse.Add:
		return addFinalizer(ctx, r.Cache, obj)
	}
	return nil
}

// postpone keeps the finalizer of an object being deleted that VMs still
// use, and says so in an Event — unless its namespace is being deleted,
// then the object is released.
func (r *Reconciler) postpone(ctx context.Context, ref inuse.Ref, obj client.Object, users []string) error {
	term, err := r.namespaceTerminating(ctx, ref.Namespace)
	if err != nil {
		return err
	}
	if inuse.Decide(obj, users, term) == inuse.Release {
		r.Log.Info("releasing: its namespace is being deleted", "object", ref.String())
		return removeFinalizer(ctx, r.Cache, obj)
	}
	r.recordPostponed(ctx, ref, obj, users)
	return nil
}

// users lists the VMs in ref's namespace from reader and returns those that
// hold obj; scoped limits them to the VMs the selector picks.
func (r *Reconciler) users(ctx context.Context, reader client.Reader, ref inuse.Ref, obj metav1.Object, scoped bool) ([]string, error) {
	var vms kubevirtv1.VirtualMachineList
	opts := []client.ListOption{client.InNamespace(ref.Namespace)}
	if scoped && r.Selector != nil && !r.Selector.Empty() {
		opts = append(opts, client.MatchingLabelsSelector{Selector: r.Selector})
	}
	if err := reader.List(ctx, &vms, opts...); err != nil {
		return nil, fmt.Errorf("listing VMs in %s: %w", ref.Namespace, err)
	}
	return inuse.Users(ref, obj, snapshot.VMsOf(vms.Items...)), nil
}

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

func (r *Reconciler) namespaceTerminating(ctx context.Context, ns string) (bool, error) {
	var n corev1.Namespace
	if err := r.Live.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	return n.DeletionTimestamp != nil || n.Status.Phase == corev1.NamespaceTerminating, nil
}

// recordPostponed writes one Event per object and set of users. Best
// effort: an Event that cannot be written changes nothing.
func (r *Reconciler) recordPostponed(ctx context.Context, ref inuse.Ref, obj client.Object, users []string) {
	msg := inuse.PostponedMessage(ref, users)
	r.mu.Lock()
	if r.reported == nil {
		r.reported = map[types.UID]string{}
	}
	if r.reported[obj.GetUID()] == msg {
		r.mu.Unlock()
		return
	}
	r.reported[obj.GetUID()] = msg
	r.mu.Unlock()
	r.Log.Info("deletion postponed", "object", ref.String(), "users", users)
	ev := kevent.New(kevent.Spec{
		Namespace:  ref.Namespace,
		NameSuffix: "tether-" + rand.String(8),
		Object: corev1.ObjectReference{
			APIVersion: apiVersion(r.Kind), Kind: string(r.Kind), Namespace: ref.Namespace, Name: ref.Name,
			UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		},
		Reason: EventDeletionPostponed, Type: corev1.EventTypeWarning, Message: msg,
		Action: "PostponeDeletion", Component: r.Identity,
	}, time.Now())
	if err := r.Cache.Create(ctx, ev); err != nil {
		r.Log.Error(err, "recording Event", "object", ref.String())
	}
}

// newObject returns an empty object of kind k.
func newObject(k inuse.Kind) client.Object {
	switch k {
	case inuse.KindPVC:
		return &corev1.PersistentVolumeClaim{}
	case inuse.KindDataVolume:
		return &cdiv1.DataVolume{}
	case inuse.KindControllerRevision:
		return &appsv1.ControllerRevision{}
	}
	panic("protect: unknown kind " + string(k))
}

// newList returns an empty list of kind k and a function listing its items.
func newList(k inuse.Kind) (client.ObjectList, func() []client.Object) {
	switch k {
	case inuse.KindPVC:
		l := &corev1.PersistentVolumeClaimList{}
		return l, func() []client.Object { return items(l.Items) }
	case inuse.KindDataVolume:
		l := &cdiv1.DataVolumeList{}
		return l, func() []client.Object { return items(l.Items) }
	case inuse.KindControllerRevision:
		l := &appsv1.ControllerRevisionList{}
		return l, func() []client.Object { return items(l.Items) }
	}
	panic("protect: unknown kind " + string(k))
}

func items[T any, PT interface {
	*T
	client.Object
}](list []T) []client.Object {
	out := make([]client.Object, len(list))
	for i := range list {
		out[i] = PT(&list[i])
	}
	return out
}

func apiVersion(k inuse.Kind) string {
	switch k {
	case inuse.KindDataVolume:
		return cdiv1.SchemeGroupVersion.String()
	case inuse.KindControllerRevision:
		return appsv1.SchemeGroupVersion.String()
	}
	return "v1"
}

// installed reports whether the API server serves kind k.
func installed(m meta.RESTMapper, k inuse.Kind) bool {
	if k != inuse.KindDataVolume {
		return true
	}
	_, err := m.RESTMapping(cdiv1.SchemeGroupVersion.WithKind("DataVolume").GroupKind(), cdiv1.SchemeGroupVersion.Version)
	return err == nil
}
