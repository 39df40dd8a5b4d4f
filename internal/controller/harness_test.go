package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// install puts the Finding CRD and the RBAC from config/ into the cluster.
func install(t *testing.T, env *testenv.Env) { env.InstallController(t) }

// saConfig is a client configuration acting as the controller's
// ServiceAccount, so the real authorizer checks config/rbac.
func saConfig(env *testenv.Env) *rest.Config { return env.AsController() }

type world struct {
	t   *testing.T
	env *testenv.Env
	ns  string
	c   client.Client
	sub rest.Interface
	ctx context.Context
}

func newWorld(t *testing.T) *world {
	env := testenv.Get(t)
	install(t, env)
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := virtapi.NewSubresourceClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, env: env, ns: env.Namespace(t), c: c, sub: sub, ctx: context.Background()}
	if err := env.Emulator.SetFeatureGates(w.ctx, "HotplugVolumes"); err != nil {
		t.Fatal(err)
	}
	return w
}

// cfg is a controller configuration scoped to this world's namespace with
// OrphanHotplugVolume on and VMI-only detaching allowed (no tenant here).
func (w *world) cfg(grace time.Duration) *config.Config {
	c := config.Default()
	c.Checks = map[string]config.CheckConfig{check.OrphanHotplugVolume: {Enabled: true, GracePeriod: metav1.Duration{Duration: grace}}}
	c.Scope.Namespaces = []string{w.ns}
	c.AllowVMIOnlyDetach = true
	c.Backoff.Base.Duration, c.Backoff.Max.Duration = 200*time.Millisecond, 2*time.Second
	c.ActionTimeout.Duration = 20 * time.Second
	return &c
}

// start runs a controller until the returned stop is called (or the test ends).
func (w *world) start(cfg *config.Config, mod ...func(*controller.Options)) (stop func()) {
	w.t.Helper()
	// The controller's namespace is the test's: its breaker record is the
	// test's own.
	o := controller.Options{RestConfig: saConfig(w.env), Config: cfg, Namespace: w.ns, Log: testr.New(w.t), SkipNameValidation: true}
	for _, m := range mod {
		m(&o)
	}
	return testenv.RunController(w.t, o)
}

// orphan makes a running VM with a VMI-only hot-plug named volume.
func (w *world) orphan(vm, volume string) {
	w.t.Helper()
	if w.vmi(vm) == nil {
		obj := fixture.VM(vm, fixture.Running(), fixture.InNamespace(w.ns))
		obj.UID = ""
		if err := w.c.Create(w.ctx, obj); err != nil {
			w.t.Fatal(err)
		}
		w.waitVMI(vm, "running", func(v *kubevirtv1.VirtualMachineInstance) bool { return v.Status.Phase == kubevirtv1.Running })
	}
	pvc := fixture.PVC(volume, fixture.InNamespace(w.ns))
	pvc.UID = ""
	if err := w.c.Create(w.ctx, pvc); err != nil {
		w.t.Fatal(err)
	}
	if err := virtapi.AddVolume(w.ctx, w.sub, virtapi.VMI, w.ns, vm, fixture.AddVolumeOptions(volume)); err != nil {
		w.t.Fatal(err)
	}
	w.waitVMI(vm, volume+" hot-plugged", func(v *kubevirtv1.VirtualMachineInstance) bool { return lists(v, volume) })
}

func lists(v *kubevirtv1.VirtualMachineInstance, volume string) bool {
	for _, vs := range v.Status.VolumeStatus {
		if vs.Name == volume && vs.HotplugVolume != nil {
			return true
		}
	}
	return false
}

func (w *world) vmi(name string) *kubevirtv1.VirtualMachineInstance { return w.env.VMI(w.ns, name) }

func (w *world) waitVMI(name, what string, cond func(*kubevirtv1.VirtualMachineInstance) bool) {
	w.t.Helper()
	w.env.WaitVMI(w.t, w.ns, name, what, cond)
}

// finding returns the record for vmi/volume, or nil.
func (w *world) finding(vmi, volume string) *v1alpha1.Finding {
	var list v1alpha1.FindingList
	if err := w.c.List(w.ctx, &list, client.InNamespace(w.ns)); err != nil {
		w.t.Fatal(err)
	}
	for i := range list.Items {
		if f := &list.Items[i]; f.Spec.Subject.Name == vmi && f.Spec.Volume == volume {
			return f
		}
	}
	return nil
}

func (w *world) waitFinding(vmi, volume string, phase v1alpha1.Phase, reason string) *v1alpha1.Finding {
	w.t.Helper()
	var got *v1alpha1.Finding
	testenv.Eventually(w.t, 30*time.Second, fmt.Sprintf("finding %s/%s %s %s", vmi, volume, phase, reason), func() (bool, error) {
		got = w.finding(vmi, volume)
		return got != nil && got.Status.Phase == phase && (reason == "" || got.Status.Reason == reason), nil
	})
	return got
}

func (w *world) events(reason string) []corev1.Event {
	var evs corev1.EventList
	if err := w.c.List(w.ctx, &evs, client.InNamespace(w.ns)); err != nil {
		w.t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range evs.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// outcomes counts, of the findings about vm's volumes, those resolved and
// those blocked by the blast-radius limit.
func (w *world) outcomes(vm string, volumes ...string) (applied, blocked int) {
	for _, v := range volumes {
		if f := w.finding(vm, v); f != nil {
			switch {
			case f.Status.Phase == v1alpha1.PhaseResolved:
				applied++
			case f.Status.Reason == controller.ReasonBlastRadius:
				blocked++
			}
		}
	}
	return
}

// elected makes a started controller one of the replicas electing a leader
// with the Lease lease in tether-system, with short test durations.
func elected(lease, id string) func(*controller.Options) {
	return func(o *controller.Options) {
		o.LeaderElect, o.LeaderElectionNamespace, o.LeaderElectionID = true, "tether-system", lease
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
		o.Identity = id
	}
}
