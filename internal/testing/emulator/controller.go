package emulator

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator/apiserver"
)

// PausedAnnotation set to "true" on a VM (covering its VMI), VMI, migration
// or Node makes the controller leave that object alone.
const PausedAnnotation = "emulator.tether.dev/paused"

// TargetNodeAnnotation on a VirtualMachineInstanceMigration picks its target
// node.
const TargetNodeAnnotation = "emulator.tether.dev/target-node"

func paused(obj client.Object) bool { return obj.GetAnnotations()[PausedAnnotation] == "true" }

type keyKind int

const (
	keyVirt      keyKind = iota // the VM and VMI of a name
	keyMigration                // one VirtualMachineInstanceMigration
	keyFaults                   // the fault ConfigMap
)

type key struct {
	kind     keyKind
	ns, name string
}

// controller turns watch events into keys and reconciles them. Handlers only
// enqueue; every decision is made from a live read of the current state.
type controller struct {
	e     *Emulator
	cache cache.Cache
	queue workqueue.TypedRateLimitingInterface[key]

	expect expectations

	mu     sync.Mutex
	streak map[key]int       // consecutive reconciles that wrote something
	paced  map[key]time.Time // no pass before this time
}

const workers = 2

func newController(ctx context.Context, e *Emulator, cfg *rest.Config, scheme *runtime.Scheme) (*controller, error) {
	kubevirtPods, err := labels.NewRequirement(virtv1.AppLabel, selection.In, []string{launcherApp, hotplugApp})
	if err != nil {
		return nil, err
	}
	c, err := cache.New(cfg, cache.Options{
		Scheme: scheme,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.NewSelector().Add(*kubevirtPods)},
			&corev1.ConfigMap{}: {
				Namespaces: map[string]cache.Config{e.o.Namespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", FaultConfigMap),
			},
		},
	})
	if err != nil {
		return nil, err
	}
	ctrl := &controller{
		e:      e,
		cache:  c,
		streak: map[key]int{},
		paced:  map[key]time.Time{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[key](5*time.Millisecond, 2*time.Second),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: "kubevirt-emulator"}),
	}
	watches := []struct {
		obj client.Object
		fn  func(client.Object)
	}{
		{&virtv1.VirtualMachine{}, ctrl.enqueueVirt},
		{&virtv1.VirtualMachineInstance{}, ctrl.enqueueVirt},
		{&virtv1.VirtualMachineInstanceMigration{}, ctrl.enqueueMigration},
		{&corev1.Pod{}, ctrl.enqueuePod},
		{&corev1.PersistentVolumeClaim{}, ctrl.enqueueNamespace},
		{&cdiv1.DataVolume{}, ctrl.enqueueNamespace},
		{&virtv1.KubeVirt{}, ctrl.enqueueAll},
		{&corev1.ConfigMap{}, func(client.Object) { ctrl.queue.Add(key{kind: keyFaults}) }},
	}
	for _, w := range watches {
		inf, err := c.GetInformer(ctx, w.obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(handler(w.fn)); err != nil {
			return nil, err
		}
	}
	return ctrl, nil
}

// handler calls fn for adds, real updates (not resyncs) and deletes.
func handler(fn func(client.Object)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(client.Object); ok {
				fn(o)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(client.Object)
			n, ok2 := newObj.(client.Object)
			if ok1 && ok2 && o.GetResourceVersion() != n.GetResourceVersion() {
				fn(n)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(client.Object); ok {
				fn(o)
			}
		},
	}
}

func (c *controller) enqueueVirt(obj client.Object) {
	c.queue.Add(key{kind: keyVirt, ns: obj.GetNamespace(), name: obj.GetName()})
}

func (c *controller) enqueueMigration(obj client.Object) {
	c.queue.Add(key{kind: keyMigration, ns: obj.GetNamespace(), name: obj.GetName()})
}

// enqueuePod maps a launcher pod (domain annotation) or an attachment pod
// (through its launcher pod) to its VMI.
func (c *controller) enqueuePod(obj client.Object) {
	if vmi := obj.GetAnnotations()[virtv1.DomainAnnotation]; vmi != "" {
		c.queue.Add(key{kind: keyVirt, ns: obj.GetNamespace(), name: vmi})
		return
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind != "Pod" {
			continue
		}
		owner := &corev1.Pod{}
		if err := c.cache.Get(context.Background(), client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, owner); err == nil {
			c.enqueuePod(owner)
		}
	}
}

// enqueueNamespace wakes every VM and VMI of the object's namespace (PVCs
// and DataVolumes decide whether hot-plug volumes are ready, DataVolumes
// whether a VM may start).
func (c *controller) enqueueNamespace(obj client.Object) {
	vmis := &virtv1.VirtualMachineInstanceList{}
	if err := c.cache.List(context.Background(), vmis, client.InNamespace(obj.GetNamespace())); err == nil {
		for i := range vmis.Items {
			c.enqueueVirt(&vmis.Items[i])
		}
	}
	vms := &virtv1.VirtualMachineList{}
	if err := c.cache.List(context.Background(), vms, client.InNamespace(obj.GetNamespace())); err == nil {
		for i := range vms.Items {
			c.enqueueVirt(&vms.Items[i])
		}
	}
}

// enqueueAll wakes every VM and VMI (feature gates changed).
func (c *controller) enqueueAll(client.Object) {
	vms := &virtv1.VirtualMachineList{}
	if err := c.cache.List(context.Background(), vms); err == nil {
		for i := range vms.Items {
			c.enqueueVirt(&vms.Items[i])
		}
	}
	vmis := &virtv1.VirtualMachineInstanceList{}
	if err := c.cache.List(context.Background(), vmis); err == nil {
		for i := range vmis.Items {
			c.enqueueVirt(&vmis.Items[i])
		}
	}
}

func (c *controller) waitForSync(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !c.cache.WaitForCacheSync(sctx) {
		return fmt.Errorf("emulator: informer caches did not sync")
	}
	return nil
}

// run starts the informers and the workers and blocks until ctx ends.
func (c *controller) run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.cache.Start(ctx); err != nil {
			c.e.log.Error(err, "informer cache stopped")
		}
	}()
	for range workers {
		go func() {
			for c.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDownWithDrain()
	<-done
}

// next processes one key; false once the queue shuts down.
func (c *controller) next(ctx context.Context) bool {
	k, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(k)
	t0 := time.Now()
	again, after, err := c.reconcile(ctx, k)
	c.e.log.V(2).Info("reconciled", "namespace", k.ns, "name", k.name, "kind", int(k.kind), "again", again, "took", time.Since(t0).String())
	switch {
	case ctx.Err() != nil:
		c.queue.Forget(k)
	case err != nil:
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
			c.e.log.Error(err, "reconcile failed", "namespace", k.ns, "name", k.name, "kind", int(k.kind))
		}
		c.queue.AddRateLimited(k)
	case again:
		// Follow-up writes go at once; a key that keeps writing (someone
		// fighting the emulator) backs off.
		if c.bumpStreak(k) < maxStreak {
			c.queue.Add(k)
		} else {
			c.queue.AddRateLimited(k)
		}
		return true
	case after > 0:
		c.queue.Forget(k)
		c.queue.AddAfter(k, after)
	default:
		c.queue.Forget(k)
	}
	c.resetStreak(k)
	return true
}

const maxStreak = 20

func (c *controller) bumpStreak(k key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streak[k]++
	return c.streak[k]
}

func (c *controller) resetStreak(k key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streak, k)
}

// pace spaces the writes to one VM/VMI name by Options.LifecycleStep, so
// that every phase of KubeVirt's lifecycle lasts long enough to be seen.
func (c *controller) pace(k key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paced[k] = time.Now().Add(c.e.o.LifecycleStep)
}

// paceWait is how long k must wait before its next pass.
func (c *controller) paceWait(k key) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.paced[k]
	if !ok {
		return 0
	}
	if wait := time.Until(until); wait > 0 {
		return wait
	}
	delete(c.paced, k)
	return 0
}

// reconcile returns again=true after a write, so the key is looked at once
// more with the new state; after>0 for timers.
func (c *controller) reconcile(ctx context.Context, k key) (again bool, after time.Duration, err error) {
	switch k.kind {
	case keyVirt:
		if wait := c.paceWait(k); wait > 0 {
			return false, wait, nil
		}
		again, after, err = c.e.syncVirt(ctx, k.ns, k.name)
		if again {
			c.pace(k)
		}
		return again, after, err
	case keyMigration:
		return c.e.syncMigration(ctx, k.ns, k.name)
	case keyFaults:
		return false, 0, c.e.readFaultConfigMap(ctx)
	}
	return false, 0, nil
}

// readFaultConfigMap moves faults from the ConfigMap into the fault queue.
func (e *Emulator) readFaultConfigMap(ctx context.Context) error {
	cm := &corev1.ConfigMap{}
	err := e.client.Get(ctx, client.ObjectKey{Namespace: e.o.Namespace, Name: FaultConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// The faults are queued before the ConfigMap is deleted, so that its
	// being gone means they are in force; a delete that fails is retried
	// without queuing them twice.
	faults, down, perr := apiserver.FaultsFromConfigMap(cm)
	if taken := string(cm.UID) + "/" + cm.ResourceVersion; perr == nil && taken != e.faultCMTaken {
		e.InjectFaults(faults...)
		if down != nil {
			e.setHandlersDownFrom(*down)
		}
		e.faultCMTaken = taken
		e.log.Info("faults injected from configmap", "count", len(faults))
	}
	if err := e.client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if perr != nil {
		e.log.Error(perr, "ignoring fault configmap")
	}
	return nil
}
