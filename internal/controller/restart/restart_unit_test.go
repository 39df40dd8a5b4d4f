package restart

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/testing/fakeclient"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

func TestRestartReconciler_tellOncePerAttempt(t *testing.T) {
	var r Reconciler
	if !r.tell("uid-1", "boot", "VolumeNotHotpluggable") {
		t.Fatal("first time: want to tell")
	}
	if r.tell("uid-1", "boot", "VolumeNotHotpluggable") {
		t.Fatal("second time in the same start attempt: want silence")
	}
	if !r.tell("uid-1", "boot", "DryRun") || !r.tell("uid-2", "boot", "VolumeNotHotpluggable") {
		t.Fatal("another reason or VM: want to tell")
	}
	r.forget("uid-1")
	if !r.tell("uid-1", "boot", "VolumeNotHotpluggable") {
		t.Fatal("after the VM stopped starting: want to tell again")
	}
}

// A dangling reference must be seen twice, Settle apart, before it is
// removed; a new start attempt starts the wait again.
func TestRestartSettle_seenTwiceSettleApart(t *testing.T) {
	cfg := config.Default()
	cfg.DanglingOnRestart.Settle.Duration = 30 * time.Second
	r := &Reconciler{Config: &cfg}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if w := r.settle("vm-1", "v", t0); w != 30*time.Second {
		t.Fatalf("first sight: wait %s, want 30s", w)
	}
	if w := r.settle("vm-1", "v", t0.Add(10*time.Second)); w != 20*time.Second {
		t.Fatalf("10s later: wait %s, want 20s", w)
	}
	if w := r.settle("vm-1", "v", t0.Add(30*time.Second)); w != 0 {
		t.Fatalf("after settle: wait %s, want 0", w)
	}
	r.forget("vm-1")
	if w := r.settle("vm-1", "v", t0.Add(time.Hour)); w != 30*time.Second {
		t.Fatalf("new start attempt: wait %s, want 30s", w)
	}
}

// A reference that dangles, stops dangling (its claim is restored), and
// dangles again waits the whole settle period again from its second
// disappearance: the first sight belongs to the first stretch only.
func TestRestartSettle_presentAbsentPresentRestarts(t *testing.T) {
	cfg, policy, vm, root := startingVMWithDanglingHotplug(t, 30*time.Second)
	c := fakeclient.FakeClient(interceptor.Funcs{}, vm, root)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Reconciler{Cache: c, Config: &cfg, Policy: policy, Now: func() time.Time { return now }, Log: logr.Discard(),
		Executor: &act.Executor{Client: c}, Records: restartRecords(c, &cfg, 0, func() time.Time { return now })} // acting is never allowed here
	reconcile := func() time.Duration {
		t.Helper()
		res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(vm)})
		if err != nil {
			t.Fatal(err)
		}
		return res.RequeueAfter
	}
	if wait := reconcile(); wait != 30*time.Second {
		t.Fatalf("claim missing, first sight: requeue %s, want the settle period", wait)
	}
	now = now.Add(20 * time.Second)
	claim := fixture.PVC("c1", fixture.InNamespace("ns"))
	if err := c.Create(context.Background(), claim); err != nil { // restored
		t.Fatal(err)
	}
	if wait := reconcile(); wait != 0 {
		t.Fatalf("claim back: requeue %s, want none", wait)
	}
	now = now.Add(20 * time.Second)
	if err := c.Delete(context.Background(), claim); err != nil { // deleted again
		t.Fatal(err)
	}
	if wait := reconcile(); wait != 30*time.Second {
		t.Fatalf("claim missing again 40s after the first sight: requeue %s, want the whole settle period again", wait)
	}
}

// FuzzRestartSettle drives settling and settle with a random sequence of
// passes over two volumes, each pass seeing each volume's dangling reference
// as safe or not, at random intervals, with start attempts ending in
// between. The oracle is the rule operators are given (docs/controller.md,
// danglingOnRestart.settle): a reference is acted on only after it has been
// seen safe, pass after pass without a pass that saw it otherwise, for the
// settle period within one start attempt. It keeps its own record of when
// each unbroken stretch began and never reads the reconciler's.
func FuzzRestartSettle(f *testing.F) {
	f.Add([]byte{0x13, 0x41, 0x03, 0x27, 0x80, 0x13})
	f.Add([]byte{0xff, 0x00, 0xff, 0x00, 0xff})
	f.Add([]byte{0x10, 0x05, 0x15, 0x1f, 0x35}) // present, absent, present again
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := config.Default()
		settlePeriod := 30 * time.Second
		cfg.DanglingOnRestart.Settle.Duration = settlePeriod
		r := &Reconciler{Config: &cfg}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		stretch := map[string]time.Time{} // volume -> start of its unbroken safe stretch
		for i, b := range data {
			now = now.Add(time.Duration(b&0x0f) * 4 * time.Second)
			if b&0x80 != 0 { // the start attempt ended (VM stopped or started)
				r.forget("vm")
				clear(stretch)
			}
			var findings []drift.Finding
			for j, volume := range []string{"v1", "v2"} {
				if b&(0x10<<j) != 0 {
					findings = append(findings, drift.Finding{Volume: volume, Action: drift.Action{Type: check.VMRemoveVolume, Safe: true}})
				} else {
					delete(stretch, volume)
				}
			}
			r.settling("vm", findings)
			for _, fd := range findings {
				if _, ok := stretch[fd.Volume]; !ok {
					stretch[fd.Volume] = now
				}
				want := stretch[fd.Volume].Add(settlePeriod).Sub(now)
				if want < 0 {
					want = 0
				}
				if got := r.settle("vm", fd.Volume, now); got != want {
					t.Fatalf("pass %d, volume %s: wait %s, want %s (safe since %s, now %s)",
						i, fd.Volume, got, want, stretch[fd.Volume].Format(time.TimeOnly), now.Format(time.TimeOnly))
				}
			}
		}
	})
}

// An action that RBAC forbids changed nothing, so it gives its budget back
// in the "on restart" mode as it does for the checks: a missing role must
// not trip the blast-radius limit for every other action.
func TestRestart_forbiddenActionRefundsTheBudget(t *testing.T) {
	cfg, policy, vm, root := startingVMWithDanglingHotplug(t, 0)
	cache := fakeclient.FakeClient(interceptor.Funcs{}, vm, root)
	forbidden := 0
	live := interceptor.NewClient(cache, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, claim := obj.(*corev1.PersistentVolumeClaim); claim {
			forbidden++
			return apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, key.Name, errors.New("no role"))
		}
		return c.Get(ctx, key, obj, opts...)
	}})
	cfg.Backoff.Base.Duration, cfg.Backoff.Max.Duration = time.Second, time.Second
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Reconciler{Cache: cache, Config: &cfg, Policy: policy, Now: func() time.Time { return now }, Log: logr.Discard(),
		Executor: &act.Executor{Client: live}, Records: restartRecords(live, &cfg, 1, func() time.Time { return now })}
	// Two attempts, the second once the first has backed off, within one
	// window of a budget of one action: the second runs only if the first
	// gave its action back.
	for attempt := 1; attempt <= 2; attempt++ {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(vm)}); err == nil {
			t.Fatalf("attempt %d: a forbidden action reported no error", attempt)
		}
		if forbidden != attempt {
			t.Fatalf("attempt %d: the live re-read reached the claim %d times: the forbidden action kept its budget", attempt, forbidden)
		}
		now = now.Add(time.Minute)
	}
}

// startingVMWithDanglingHotplug is an "on restart" configuration with the
// given settle period, its policy, and a VM about to start whose root claim
// exists and whose hot-plugged volume v1 refers to claim c1, which does not.
func startingVMWithDanglingHotplug(t *testing.T, settle time.Duration) (config.Config, check.Policy, *kubevirtv1.VirtualMachine, *corev1.PersistentVolumeClaim) {
	t.Helper()
	cfg := config.Default()
	cfg.DanglingOnRestart.Enabled = true
	cfg.DanglingOnRestart.Settle.Duration = settle
	policy, err := cfg.DanglingPolicy()
	if err != nil {
		t.Fatal(err)
	}
	vm := fixture.VM("vm", fixture.InNamespace("ns"), fixture.Running(),
		fixture.WithVolume("root", fixture.PVC("root")), fixture.WithVolume("v1", fixture.PVC("c1"), fixture.Hotpluggable()))
	return cfg, policy, vm, fixture.PVC("root", fixture.InNamespace("ns"))
}

// restartRecords is a record keeper for the "on restart" unit tests, on c
// for both cache and writes, recording Events through c.
func restartRecords(c client.Client, cfg *config.Config, maxActions int, now func() time.Time) *records.Keeper {
	limits := *cfg
	limits.BlastRadius.MaxActions, limits.BlastRadius.Interval.Duration = maxActions, time.Hour
	rs := records.New(&limits)
	rs.Config = cfg
	rs.Cache, rs.Live, rs.Now, rs.Log = c, c, now, logr.Discard()
	rs.Recorder = &act.Recorder{Client: c, Component: "test"}
	return rs
}
