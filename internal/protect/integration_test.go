package protect_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// The real garbage collector, namespace controller and PVC protection
// controller run beside the API server, each under its own ServiceAccount
// as in a kubeadm cluster (the admission policy's allow list names them).
func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{ControllerManager: true, ServiceAccountCredentials: true})
}

const wait = 60 * time.Second

type world struct {
	t   *testing.T
	env *testenv.Env
	ns  string
	c   client.Client
	ctx context.Context
}

func newWorld(t *testing.T) *world {
	env := testenv.Get(t)
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, env: env, ns: env.Namespace(t), c: c, ctx: context.Background()}
}

// start runs the protection reconcilers, scoped to the test's namespace,
// until the returned function is called or the test ends.
func (w *world) start(o protect.Options) (stop func()) {
	w.t.Helper()
	return w.startWith(o, nil)
}

// startWith is start with the admission webhook served by hooks, when set.
func (w *world) startWith(o protect.Options, hooks webhook.Server) (stop func()) {
	w.t.Helper()
	skip := true
	mgr, err := ctrl.NewManager(w.env.Config, ctrl.Options{
		Scheme:        clients.Scheme(),
		Cache:         cache.Options{DefaultNamespaces: map[string]cache.Config{w.ns: {}}},
		Metrics:       metricsserver.Options{BindAddress: "0"},
		Controller:    ctrlconfig.Controller{SkipNameValidation: &skip},
		Logger:        testr.New(w.t),
		WebhookServer: hooks,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	o.Log = testr.New(w.t)
	if err := protect.Setup(mgr, o); err != nil {
		w.t.Fatal(err)
	}
	if hooks != nil {
		protect.SetupWebhook(mgr, protect.WebhookOptions{Namespaces: []string{w.ns}, ReadTimeout: time.Second, Log: o.Log})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			w.t.Errorf("manager: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	w.t.Cleanup(stop)
	return stop
}

func (w *world) create(o client.Object) {
	w.t.Helper()
	o.SetNamespace(w.ns)
	o.SetUID("")
	if err := w.c.Create(w.ctx, o); err != nil {
		w.t.Fatalf("creating %s: %v", o.GetName(), err)
	}
}

func (w *world) pvc(name string) (*corev1.PersistentVolumeClaim, error) {
	var p corev1.PersistentVolumeClaim
	err := w.c.Get(w.ctx, types.NamespacedName{Namespace: w.ns, Name: name}, &p)
	return &p, err
}

func (w *world) eventually(what string, cond func() (bool, error)) {
	w.t.Helper()
	testenv.Eventually(w.t, wait, what, cond)
}

func (w *world) protected(name string) {
	w.t.Helper()
	w.eventually("finalizer on "+name, func() (bool, error) {
		p, err := w.pvc(name)
		return err == nil && inuse.HasFinalizer(p), err
	})
}

func (w *world) gone(name string) {
	w.t.Helper()
	w.eventually(name+" gone", func() (bool, error) {
		_, err := w.pvc(name)
		return apierrors.IsNotFound(err), err
	})
}

// survives checks for d that the PVC is still there, terminating, with
// the finalizer.
func (w *world) survives(name string, d time.Duration) {
	w.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		p, err := w.pvc(name)
		if err != nil {
			w.t.Fatalf("%s: %v (deletion was not postponed)", name, err)
		}
		if !inuse.HasFinalizer(p) {
			w.t.Fatalf("%s lost the finalizer: %v", name, p.Finalizers)
		}
	}
}

func (w *world) deleteVM(name string) {
	w.t.Helper()
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
	if err := w.c.Delete(w.ctx, vm); err != nil {
		w.t.Fatalf("deleting VM %s: %v", name, err)
	}
}

func (w *world) deletePVC(name string) {
	w.t.Helper()
	p := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
	if err := w.c.Delete(w.ctx, p); err != nil {
		w.t.Fatalf("deleting PVC %s: %v", name, err)
	}
}

// postponedEvent waits for the Event on the PVC that names the VMs.
func (w *world) postponedEvent(pvc string, vms ...string) {
	w.t.Helper()
	w.eventually("a "+protect.EventDeletionPostponed+" Event naming "+strings.Join(vms, ", "), func() (bool, error) {
		var evs corev1.EventList
		if err := w.c.List(w.ctx, &evs, client.InNamespace(w.ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == protect.EventDeletionPostponed && e.InvolvedObject.Name == pvc &&
				strings.Contains(e.Message, strings.Join(vms, ", ")) {
				return true, nil
			}
		}
		return false, nil
	})
}

func usingVM(name string, claims ...string) *kubevirtv1.VirtualMachine {
	var opts []fixture.Option
	for _, c := range claims {
		opts = append(opts, fixture.WithVolume("disk-"+c, fixture.PVC(c)))
	}
	return fixture.VM(name, opts...) // runStrategy Halted: stays stopped
}

// TestStoppedVMProtectsItsPVC: a stopped VM's PVC gets the finalizer; its
// deletion is postponed (with an Event naming the VM) while the real PVC
// protection controller has long removed its own finalizer; deleting the
// VM lets the PVC go.
func TestStoppedVMProtectsItsPVC(t *testing.T) {
	w := newWorld(t)
	w.start(protect.Options{})
	w.create(fixture.PVC("claim"))
	w.create(usingVM("vm", "claim"))
	w.protected("claim")

	w.deletePVC("claim")
	w.postponedEvent("claim", "vm")
	w.survives("claim", 3*time.Second)
	p, _ := w.pvc("claim")
	if p.DeletionTimestamp == nil {
		t.Fatal("the PVC is not terminating")
	}

	w.deleteVM("vm")
	w.gone("claim")
}

// TestRaceUserAppearsDuringDeletion: the PVC is being deleted; its last
// user goes, and a new VM that references it is created after the cache
// check found no user and before the live check. The live LIST sees the
// new VM: the finalizer stays.
func TestRaceUserAppearsDuringDeletion(t *testing.T) {
	w := newWorld(t)
	var armed atomic.Bool
	var once sync.Once
	injected := make(chan struct{})
	w.start(protect.Options{BeforeLiveCheck: func(ctx context.Context, ref inuse.Ref) {
		if !armed.Load() || ref.Kind != inuse.KindPVC || ref.Name != "claim" {
			return
		}
		once.Do(func() {
			w.create(usingVM("late", "claim"))
			close(injected)
		})
	}})
	w.create(fixture.PVC("claim"))
	w.create(usingVM("first", "claim"))
	w.protected("claim")
	w.deletePVC("claim")
	w.postponedEvent("claim", "first")

	armed.Store(true)
	w.deleteVM("first")
	select {
	case <-injected:
	case <-time.After(wait):
		t.Fatal("the reconciler never reached the live check")
	}
	w.survives("claim", 3*time.Second)
	w.postponedEvent("claim", "late")

	w.deleteVM("late")
	w.gone("claim")
}

// TestMissingReferenceNoChurn: a VM referencing a PVC that does not exist
// causes no writes; the PVC it references that does exist is protected
// once and then left alone; the missing one is protected when it appears.
func TestMissingReferenceNoChurn(t *testing.T) {
	w := newWorld(t)
	w.start(protect.Options{})
	w.create(fixture.PVC("present"))
	w.create(usingVM("vm", "present", "missing"))
	w.protected("present")
	p, _ := w.pvc("present")
	rv := p.ResourceVersion
	time.Sleep(3 * time.Second)
	if p, _ = w.pvc("present"); p.ResourceVersion != rv {
		t.Errorf("the protected PVC kept changing: resourceVersion %s -> %s (finalizers %v)", rv, p.ResourceVersion, p.Finalizers)
	}
	w.create(fixture.PVC("missing"))
	w.protected("missing")
}

// TestReferenceMoved: the reference moves from one VM to another; the PVC
// stays protected throughout. Once no VM references it, the finalizer stays
// until the PVC's deletion, which then completes.
func TestReferenceMoved(t *testing.T) {
	w := newWorld(t)
	w.start(protect.Options{})
	w.create(fixture.PVC("claim"))
	w.create(usingVM("a", "claim"))
	w.protected("claim")
	w.create(usingVM("b", "claim"))
	w.deleteVM("a")
	w.survivesUnused("claim", 2*time.Second)
	w.deleteVM("b")
	w.survivesUnused("claim", 2*time.Second)
	w.deletePVC("claim")
	w.gone("claim")
}

func (w *world) survivesUnused(name string, d time.Duration) {
	w.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if p, err := w.pvc(name); err != nil || !inuse.HasFinalizer(p) {
			w.t.Fatalf("%s lost its protection before its deletion (%v)", name, err)
		}
	}
}

// TestStaleWriteRefused: a finalizer patch computed from a stale read is
// refused by its test op, and never removes a finalizer added since.
func TestStaleWriteRefused(t *testing.T) {
	w := newWorld(t)
	w.create(fixture.PVC("claim"))
	stale, err := w.pvc("claim")
	if err != nil {
		t.Fatal(err)
	}
	fresh := stale.DeepCopy()
	fresh.Finalizers = append(fresh.Finalizers, "example.com/other", inuse.Finalizer)
	if err := w.c.Update(w.ctx, fresh); err != nil {
		t.Fatal(err)
	}
	patch, err := protect.AddPatch(stale)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.c.Patch(w.ctx, stale.DeepCopy(), client.RawPatch(types.JSONPatchType, patch)); err == nil {
		t.Fatal("a patch from a stale read was accepted")
	}
	stale.Finalizers = []string{inuse.Finalizer}
	patch, _ = protect.RemovePatch(stale)
	if err := w.c.Patch(w.ctx, stale.DeepCopy(), client.RawPatch(types.JSONPatchType, patch)); err == nil {
		t.Fatal("a remove patch from a stale read was accepted")
	}
	p, _ := w.pvc("claim")
	if !inuse.HasFinalizer(p) || len(p.Finalizers) < 2 {
		t.Errorf("finalizers %v after refused patches", p.Finalizers)
	}
	p.Finalizers = nil
	_ = w.c.Update(w.ctx, p)
}

// TestNamespaceDeletionNotBlocked: while the controller runs, deleting a
// namespace releases its objects; after tether is gone, Plan with Release
// (`tether protect --release`) removes the finalizers and the namespace
// goes.
func TestNamespaceDeletionNotBlocked(t *testing.T) {
	w := newWorld(t)
	stop := w.start(protect.Options{})
	w.create(fixture.PVC("claim"))
	w.create(usingVM("vm", "claim"))
	w.protected("claim")
	w.deleteNamespace()
	w.eventually("namespace gone while tether runs", w.namespaceGone)

	// Uninstalled: the finalizer stays behind until released.
	w2 := newWorld(t)
	stop2 := w2.start(protect.Options{})
	w2.create(fixture.PVC("claim"))
	w2.create(usingVM("vm", "claim"))
	w2.protected("claim")
	stop2()
	stop()
	w2.deleteNamespace()
	w2.survivesAfterUninstall("claim", 2*time.Second)
	changes, err := protect.Plan(w2.ctx, w2.c, protect.PlanOptions{Namespace: w2.ns, Release: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Ref.Name != "claim" || changes[0].Action != inuse.Release {
		t.Fatalf("release plan %+v", changes)
	}
	if failed := protect.Apply(w2.ctx, w2.c, changes); failed != 0 {
		t.Fatalf("release failed: %+v", changes)
	}
	w2.eventually("namespace gone after --release", w2.namespaceGone)
}

func (w *world) deleteNamespace() {
	w.t.Helper()
	if err := w.env.Client.CoreV1().Namespaces().Delete(w.ctx, w.ns, metav1.DeleteOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) namespaceGone() (bool, error) {
	_, err := w.env.Client.CoreV1().Namespaces().Get(w.ctx, w.ns, metav1.GetOptions{})
	return apierrors.IsNotFound(err), err
}

func (w *world) survivesAfterUninstall(name string, d time.Duration) {
	w.t.Helper()
	time.Sleep(d)
	if p, err := w.pvc(name); err != nil || !inuse.HasFinalizer(p) {
		w.t.Fatalf("expected %s to be held by the leftover finalizer (%v)", name, err)
	}
}
