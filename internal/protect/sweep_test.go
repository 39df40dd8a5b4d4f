package protect_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/cli"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// strandWorld runs `tether controller` as its ServiceAccount (config/rbac)
// against namespaces of its own.
type strandWorld struct {
	t   *testing.T
	env *testenv.Env
	c   client.Client
	ctx context.Context
}

func newStrandWorld(t *testing.T) *strandWorld {
	env := testenv.Get(t)
	// Releasing needs protection's patch rights (the opt-in overlay).
	env.InstallController(t, "rbac/protection")
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &strandWorld{t: t, env: env, c: c, ctx: context.Background()}
}

// run starts the controller with cfg until stop is called.
func (w *strandWorld) run(cfg *config.Config) (stop func()) {
	w.t.Helper()
	return testenv.RunController(w.t, controller.Options{
		RestConfig: w.env.AsController(), Config: cfg, Log: testLog(w.t), SkipNameValidation: true,
	})
}

// testLog logs to t until the test's cleanups have run: an informer
// goroutine of a stopped manager may still log after its test ended, which
// testing turns into a panic.
func testLog(t *testing.T) logr.Logger {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() { mu.Lock(); done = true; mu.Unlock() })
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Log(prefix, args)
		}
	}, funcr.Options{})
}

// protecting is a configuration with protection on in namespaces ns.
func protecting(ns ...string) *config.Config {
	c := config.Default()
	c.Protection.Enabled = true
	c.Scope.Namespaces = ns
	return &c
}

// unprotected is a configuration with protection off (one check in dry run,
// so that the controller has something to do).
func unprotected(ns ...string) *config.Config {
	c := config.Default()
	c.DryRun = true
	c.Checks = map[string]config.CheckConfig{check.OrphanHotplugVolume: {Enabled: true}}
	c.Scope.Namespaces = ns
	return &c
}

// disk creates PVC claim in ns and, unless vm is empty, a stopped VM that
// uses it.
func (w *strandWorld) disk(ns, claim, vm string) {
	w.t.Helper()
	objs := []client.Object{fixture.PVC(claim, fixture.InNamespace(ns))}
	if vm != "" {
		objs = append(objs, fixture.VM(vm, fixture.InNamespace(ns), fixture.WithVolume("disk", fixture.PVC(claim))))
	}
	for _, o := range objs {
		o.SetUID("")
		if err := w.c.Create(w.ctx, o); err != nil {
			w.t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}

func (w *strandWorld) pvc(ns, name string) (*corev1.PersistentVolumeClaim, error) {
	var p corev1.PersistentVolumeClaim
	err := w.c.Get(w.ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
	return &p, err
}

// marked waits until ns/name carries (want) or lacks the finalizer.
func (w *strandWorld) marked(ns, name string, want bool) {
	w.t.Helper()
	testenv.Eventually(w.t, wait, "finalizer on "+ns+"/"+name+" to be "+map[bool]string{true: "there", false: "gone"}[want], func() (bool, error) {
		p, err := w.pvc(ns, name)
		return err == nil && inuse.HasFinalizer(p) == want, err
	})
}

func (w *strandWorld) gone(ns, name string) {
	w.t.Helper()
	testenv.Eventually(w.t, wait, ns+"/"+name+" gone", func() (bool, error) {
		_, err := w.pvc(ns, name)
		return apierrors.IsNotFound(err), err
	})
}

// delete deletes o and waits until it is gone.
func (w *strandWorld) delete(o client.Object) {
	w.t.Helper()
	if err := w.c.Delete(w.ctx, o); err != nil {
		w.t.Fatalf("deleting %s: %v", o.GetName(), err)
	}
	testenv.Eventually(w.t, wait, o.GetName()+" gone", func() (bool, error) {
		err := w.c.Get(w.ctx, client.ObjectKeyFromObject(o), o)
		return apierrors.IsNotFound(err), nil
	})
}

func vmNamed(ns, name string) client.Object { return fixture.VM(name, fixture.InNamespace(ns)) }

func claimNamed(ns, name string) client.Object { return fixture.PVC(name, fixture.InNamespace(ns)) }

// strandedEvent waits for the TetherStrandedFinalizer Event on ns/pvc and
// returns its message.
func (w *strandWorld) strandedEvent(ns, pvc string, parts ...string) string {
	w.t.Helper()
	var msg string
	testenv.Eventually(w.t, wait, "a "+protect.EventStrandedFinalizer+" Event on "+ns+"/"+pvc, func() (bool, error) {
		var evs corev1.EventList
		if err := w.c.List(w.ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == protect.EventStrandedFinalizer && e.InvolvedObject.Name == pvc && e.Type == corev1.EventTypeWarning {
				msg = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			w.t.Errorf("Event message %q\nlacks %q", msg, p)
		}
	}
	return msg
}

// strandedGauge waits for the stranded-finalizers gauge of ns to read n.
func (w *strandWorld) strandedGauge(ns, reason string, n float64) {
	w.t.Helper()
	g := metrics.StrandedFinalizers.WithLabelValues(ns, string(inuse.KindPVC), reason, protect.ReleaseCommand(ns))
	testenv.Eventually(w.t, wait, "tether_protection_stranded_finalizers{namespace="+ns+"} = 1", func() (bool, error) {
		return testutil.ToFloat64(g) == n, nil
	})
}

// runCommand runs the command an Event printed, with the test's kubeconfig.
func (w *strandWorld) runCommand(msg string) {
	w.t.Helper()
	i := strings.LastIndex(msg, "tether protect ")
	if i < 0 {
		w.t.Fatalf("no command in %q", msg)
	}
	args := append(strings.Fields(msg[i:])[1:], "--kubeconfig", w.env.Infra.Kubeconfig)
	var out, errOut bytes.Buffer
	if code := cli.Main(args, &out, &errOut); code != cli.ExitOK {
		w.t.Fatalf("%v: exit %d\n%s%s", args, code, out.String(), errOut.String())
	}
	w.t.Logf("%v:\n%s", args, out.String())
}

// TestStranded_scopeNarrowed: protection covers namespaces a and b; the
// controller restarts with scope a only. In b, a PVC deleted while no VM
// uses it is released and goes; a PVC a VM uses keeps the finalizer, with
// a warning Event and the gauge naming the command, and that command
// releases it. a stays protected.
func TestStranded_scopeNarrowed(t *testing.T) {
	w := newStrandWorld(t)
	a, b := w.env.Namespace(t), w.env.Namespace(t)
	w.disk(a, "disk-a", "vm-a")
	w.disk(b, "free", "gone")
	w.disk(b, "held", "keeper")
	stop := w.run(protecting(a, b))
	for _, o := range [][2]string{{a, "disk-a"}, {b, "free"}, {b, "held"}} {
		w.marked(o[0], o[1], true)
	}
	stop()

	w.delete(vmNamed(b, "gone"))
	if err := w.c.Delete(w.ctx, claimNamed(b, "free")); err != nil {
		t.Fatal(err)
	}
	w.run(protecting(a))
	w.gone(b, "free")
	msg := w.strandedEvent(b, "held", "VirtualMachine(s) keeper", "namespace "+b+" is outside scope.namespaces", protect.ReleaseCommand(b))
	w.strandedGauge(b, protect.StrandedInUse, 1)
	if p, err := w.pvc(b, "held"); err != nil || !inuse.HasFinalizer(p) {
		t.Fatalf("the PVC a VM uses lost its protection: %v", err)
	}
	if p, err := w.pvc(a, "disk-a"); err != nil || !inuse.HasFinalizer(p) {
		t.Fatalf("the PVC in scope lost its protection: %v", err)
	}

	w.runCommand(msg)
	w.marked(b, "held", false)
}

// TestStranded_protectionOff: protection is turned off. The PVC no VM uses
// any more is released; the one a VM uses keeps it and is reported.
func TestStranded_protectionOff(t *testing.T) {
	w := newStrandWorld(t)
	ns := w.env.Namespace(t)
	w.disk(ns, "free", "gone")
	w.disk(ns, "held", "keeper")
	stop := w.run(protecting(ns))
	w.marked(ns, "free", true)
	w.marked(ns, "held", true)
	stop()

	w.delete(vmNamed(ns, "gone"))
	w.run(unprotected(ns))
	w.marked(ns, "free", false)
	w.strandedEvent(ns, "held", "VirtualMachine(s) keeper", "protection is disabled", protect.ReleaseCommand(ns))
	w.strandedGauge(ns, protect.StrandedInUse, 1)
	if p, err := w.pvc(ns, "held"); err != nil || !inuse.HasFinalizer(p) {
		t.Fatalf("the PVC a VM uses lost its protection: %v", err)
	}
}

// TestStranded_namespaceDeletion: a namespace that left the scope, with a
// PVC a VM uses, is deleted: it goes.
func TestStranded_namespaceDeletion(t *testing.T) {
	w := newStrandWorld(t)
	a, b := w.env.Namespace(t), w.env.Namespace(t)
	w.disk(b, "held", "keeper")
	stop := w.run(protecting(a, b))
	w.marked(b, "held", true)
	stop()
	w.run(protecting(a))
	w.strandedEvent(b, "held")

	if err := w.env.Client.CoreV1().Namespaces().Delete(w.ctx, b, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 90*time.Second, "namespace "+b+" gone", func() (bool, error) {
		_, err := w.env.Client.CoreV1().Namespaces().Get(w.ctx, b, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// TestAdmissionPolicy_namespaceDeletion: with the default policy, deleting
// a namespace that holds a delete-protected PVC finishes: the real namespace
// controller, under its own ServiceAccount, is let through.
func TestAdmissionPolicy_namespaceDeletion(t *testing.T) {
	w := newWorld(t)
	installPolicy(t, w, protect.PolicyOptions{})
	w.create(fixture.PVC("guarded", fixture.Labels(protect.DeleteProtectionLabel, "true")))
	pvcs := w.env.Client.CoreV1().PersistentVolumeClaims(w.ns)
	w.eventually("the policy refuses a labelled delete", func() (bool, error) {
		err := pvcs.Delete(w.ctx, "guarded", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	})
	w.deleteNamespace()
	w.eventually("namespace gone", w.namespaceGone)
}
