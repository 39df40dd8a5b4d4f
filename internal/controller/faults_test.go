package controller_test

// The fault-injection suite: on the real control plane with the emulator,
// processes stopped at the points of an action where a real one may be
// killed, leaders stopped after a trip, and a second process started over
// the records of the first. Each scenario asserts that nothing wrong
// happened (no double action, no action past the limit) and nothing was
// lost (the action counted, the record truthful).

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// killable runs a controller process whose death is injected: kill cancels
// its manager at once, so every request it makes from then on fails, as if
// it had been SIGKILLed at that point. dead is closed once it has stopped.
type killable struct {
	kill func()
	dead chan struct{}
}

func (w *world) startKillable(cfg *config.Config, faults func(kill func()) *controller.Faults) *killable {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	k := &killable{kill: cancel, dead: make(chan struct{})}
	o := controller.Options{RestConfig: saConfig(w.env), Config: cfg, Namespace: w.ns, Log: testr.New(w.t), SkipNameValidation: true,
		Faults: faults(cancel)}
	mgr, err := controller.New(o)
	if err != nil {
		w.t.Fatal(err)
	}
	go func() {
		defer close(k.dead)
		_ = mgr.Start(ctx)
	}()
	w.t.Cleanup(func() { cancel(); <-k.dead })
	return k
}

// once returns a hook that kills the process the first time it runs: it
// stops the manager and ends the reconcile there, as a killed process
// would, by a panic the controller recovers. Without the panic the
// reconcile went on to its next write, which succeeded whenever the
// manager had not yet cancelled the controllers' context (it stops the
// other runnables first): the process had not died at that point.
func once(kill func()) func(drift.Finding) {
	var o sync.Once
	return func(drift.Finding) {
		died := false
		o.Do(func() { kill(); died = true })
		if died {
			panic("tether test: the process was killed here")
		}
	}
}

// diesAt runs a process with a limit of max actions on one orphan, lets it
// die at the point hook names, and returns the record it left, which must
// show the claim (phase Acting, lastAttempt, claim) and no outcome.
func (w *world) diesAt(max int, vm, volume string, hook func(f *controller.Faults, kill func())) (*config.Config, *v1alpha1.Finding) {
	w.t.Helper()
	w.orphan(vm, volume)
	cfg := w.cfg(0)
	cfg.BlastRadius.MaxActions = max
	// The next process leaves a claim without outcome alone for this
	// long (it may still be running elsewhere).
	cfg.ActionTimeout.Duration = 3 * time.Second
	k := w.startKillable(cfg, func(kill func()) *controller.Faults { f := &controller.Faults{}; hook(f, kill); return f })
	w.waitDead(k)
	rec := w.finding(vm, volume)
	if rec == nil || rec.Status.Phase != v1alpha1.PhaseActing || rec.Status.LastAttempt == nil || rec.Status.Claim == "" {
		w.t.Fatalf("a process that died mid-action must leave its claim and no outcome: %+v", rec)
	}
	return cfg, rec
}

func (w *world) waitDead(k *killable) {
	w.t.Helper()
	select {
	case <-k.dead:
	case <-time.After(60 * time.Second):
		w.t.Fatal("the killed process did not stop")
	}
}

func (w *world) breaker() findingrecord.BreakerState {
	w.t.Helper()
	st, err := findingrecord.Breaker(w.ctx, w.c, w.ns)
	if err != nil {
		w.t.Fatal(err)
	}
	return st
}

func (w *world) resetBreaker() {
	w.t.Helper()
	if ok, err := findingrecord.ResetBreaker(w.ctx, w.c, w.ns, time.Now(), "the test"); err != nil || !ok {
		w.t.Fatalf("reset: cleared %v, error %v", ok, err)
	}
}

// Killed between the Acting claim and the action: nothing was done, but the
// claim counts. The next process, with a limit of one action, trips on it
// (durably) instead of acting; once an operator resets the breaker it acts,
// exactly once.
func TestFaults_killedAfterClaim_claimCountsAndNoDoubleAction(t *testing.T) {
	w := newWorld(t)
	cfg, _ := w.diesAt(1, "vm-c", "pvc-c", func(f *controller.Faults, kill func()) { f.AfterClaim = once(kill) })
	if !lists(w.vmi("vm-c"), "pvc-c") {
		t.Fatal("the action ran although the process died before it")
	}

	w.start(cfg)
	w.waitFinding("vm-c", "pvc-c", v1alpha1.PhaseBlocked, controller.ReasonBlastRadius)
	if br := w.breaker(); !br.Tripped {
		t.Fatalf("the trip is not durable: %+v", br)
	}
	time.Sleep(2 * time.Second)
	if !lists(w.vmi("vm-c"), "pvc-c") || len(w.events(act.ReasonOrphanDetached)) != 0 {
		t.Fatal("acted past the limit: the dead claim was not counted")
	}

	w.resetBreaker()
	w.waitFinding("vm-c", "pvc-c", v1alpha1.PhaseResolved, string(drift.Applied))
	if n := len(w.events(act.ReasonOrphanDetached)); n != 1 {
		t.Fatalf("want exactly one detach, got %d", n)
	}
}

// Killed between the action and the record of its outcome: the volume is
// detached and the record still says Acting. The next process does not act
// again, resolves the record truthfully, and counts the action: a second
// orphan in the same window, limit one, is held.
func TestFaults_killedAfterAction_noDoubleActionAndCounted(t *testing.T) {
	w := newWorld(t)
	cfg, _ := w.diesAt(1, "vm-a", "pvc-a1", func(f *controller.Faults, kill func()) { f.AfterAction = once(kill) })
	w.waitVMI("vm-a", "pvc-a1 unplugged", func(v *kubevirtv1.VirtualMachineInstance) bool { return !lists(v, "pvc-a1") })

	w.start(cfg)
	rec := w.waitFinding("vm-a", "pvc-a1", v1alpha1.PhaseResolved, controller.ReasonResolvedAfterAction)
	if rec.Status.LastAttempt == nil {
		t.Fatal("the resolved record lost the attempt's time")
	}
	w.orphan("vm-a", "pvc-a2")
	w.waitFinding("vm-a", "pvc-a2", v1alpha1.PhaseBlocked, controller.ReasonBlastRadius)
	if n := len(w.events(act.ReasonOrphanDetached)); n != 1 {
		t.Fatalf("want exactly one detach, got %d", n)
	}
	if !lists(w.vmi("vm-a"), "pvc-a2") {
		t.Fatal("acted past the limit: the action of the dead process was not counted")
	}
}

// Two replicas; the leader acts once and trips (limit one). Stopping it
// hands over to the standby, which keeps the trip after the action has left
// the window: no further action until an operator resets the breaker, then
// exactly one more.
func TestFaults_leaderStoppedAfterTrip_standbyKeepsTheTrip(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-f", "pvc-f1")
	w.orphan("vm-f", "pvc-f2")
	cfg := w.cfg(0)
	cfg.BlastRadius.MaxActions = 1
	// A short window: the action that tripped it leaves the window during
	// the test, so only the durable trip can hold the new leader.
	cfg.BlastRadius.Interval.Duration = 4 * time.Second
	lease := "tether-test-" + w.ns
	stops := map[string]func(){}
	for _, id := range []string{"replica-a", "replica-b"} {
		stops[id] = w.start(cfg, elected(lease, id))
	}
	testenv.Eventually(t, 60*time.Second, "one applied, one held by the limit", func() (bool, error) {
		a, b := w.outcomes("vm-f", "pvc-f1", "pvc-f2")
		return a == 1 && b == 1, nil
	})
	if !w.breaker().Tripped {
		t.Fatal("the trip is not durable")
	}
	held := "pvc-f1"
	if f := w.finding("vm-f", "pvc-f2"); f != nil && f.Status.Reason == controller.ReasonBlastRadius {
		held = "pvc-f2"
	}
	evs := w.events(act.ReasonOrphanDetached)
	if len(evs) != 1 {
		t.Fatalf("want one detach, got %d", len(evs))
	}
	holder := func() string {
		var l coordinationv1.Lease
		if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: "tether-system", Name: lease}, &l); err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	// Stop the leader only once the action has left the window: a new
	// leader's fresh count then finds nothing, and only the durable trip
	// holds it.
	time.Sleep(cfg.BlastRadius.Interval.Duration + time.Second)
	was := holder()
	stopped := time.Now()
	stops[evs[0].ReportingInstance]()
	testenv.Eventually(t, 60*time.Second, "the standby takes the lease", func() (bool, error) {
		h := holder()
		return h != "" && h != was, nil
	})
	t.Logf("take-over after the leader stopped: %s", time.Since(stopped).Round(100*time.Millisecond))
	time.Sleep(5 * time.Second)
	if n := len(w.events(act.ReasonOrphanDetached)); n != 1 || !lists(w.vmi("vm-f"), held) {
		t.Fatalf("the new leader acted past the trip (%d detaches)", n)
	}
	reset := time.Now()
	w.resetBreaker()
	w.waitFinding("vm-f", held, v1alpha1.PhaseResolved, string(drift.Applied))
	t.Logf("acting resumed %s after the reset", time.Since(reset).Round(100*time.Millisecond))
	evs = w.events(act.ReasonOrphanDetached)
	if len(evs) != 2 {
		t.Fatalf("want two detaches in all, got %d", len(evs))
	}
	for _, e := range evs {
		if e.Message == "" {
			t.Fatal("an Event without a message")
		}
	}
}

// A second process started without leader election next to a leader (an
// operator's laptop next to the in-cluster controller) notices the holder
// and joins the election: exactly one acts, and the second takes over only
// when the first goes.
func TestFaults_secondControllerWithoutElection_doesNotActAlongside(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-2", "pvc-2a")
	lease := "tether-test-" + w.ns
	stopFirst := w.start(w.cfg(time.Second), elected(lease, "in-cluster"))
	w.waitFinding("vm-2", "pvc-2a", v1alpha1.PhaseResolved, string(drift.Applied))
	// Another config (no grace), no --leader-elect.
	w.start(w.cfg(0), elected(lease, "laptop"), func(o *controller.Options) { o.LeaderElect = false })
	w.orphan("vm-2", "pvc-2b")
	w.waitFinding("vm-2", "pvc-2b", v1alpha1.PhaseResolved, string(drift.Applied))
	who := map[string]int{}
	for _, e := range w.events(act.ReasonOrphanDetached) {
		who[e.ReportingInstance]++
	}
	if who["laptop"] != 0 || who["in-cluster"] != 2 {
		t.Fatalf("want both detaches by the leader, got %v", who)
	}
	stopFirst()
	w.orphan("vm-2", "pvc-2c")
	w.waitFinding("vm-2", "pvc-2c", v1alpha1.PhaseResolved, string(drift.Applied))
	who = map[string]int{}
	for _, e := range w.events(act.ReasonOrphanDetached) {
		who[e.ReportingInstance]++
	}
	if who["laptop"] != 1 {
		t.Fatalf("the second process did not take over once the first went: %v", who)
	}
}

// The leader stops in the middle of a grace period: the standby keeps the
// record's first sight and deadline (it acts neither before the deadline
// nor long after the take-over), and exactly one replica acts.
func TestFaults_leaderStoppedMidGrace_standbyKeepsTheDeadline(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-g", "pvc-g")
	const grace = 10 * time.Second
	lease := "tether-test-" + w.ns
	stopLeader := w.start(w.cfg(grace), elected(lease, "replica-a"))
	before := w.waitFinding("vm-g", "pvc-g", v1alpha1.PhaseWaiting, "") // replica-a leads
	w.start(w.cfg(grace), elected(lease, "replica-b"))
	time.Sleep(3 * time.Second)
	stopLeader()
	after := w.waitFinding("vm-g", "pvc-g", v1alpha1.PhaseResolved, string(drift.Applied))
	if !after.Status.FirstObserved.Equal(before.Status.FirstObserved) {
		t.Fatalf("the change of leader moved the first sight: %s -> %s", before.Status.FirstObserved, after.Status.FirstObserved)
	}
	if after.Status.LastAttempt.Time.Before(before.Status.ActAfter.Time) {
		t.Fatalf("acted at %s, before the deadline %s", after.Status.LastAttempt, before.Status.ActAfter)
	}
	late := after.Status.LastAttempt.Sub(before.Status.ActAfter.Time)
	t.Logf("acted %s after the deadline kept across the change of leader", late)
	if late > 30*time.Second {
		t.Fatalf("acted %s after the deadline: the grace period started again", late)
	}
	evs := w.events(act.ReasonOrphanDetached)
	if len(evs) != 1 || evs[0].ReportingInstance != "replica-b" {
		t.Fatalf("want one detach, by the standby that took over; got %d", len(evs))
	}
}

// Objects change while the controller is down (its watch sees none of it):
// one orphan is removed by hand, another appears. After the restart its
// open records are exactly the findings of a fresh one-shot audit.
func TestFaults_changesWhileDown_decisionsEqualAFreshAudit(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-m", "pvc-m1")
	cfg := w.cfg(time.Hour) // never acts here
	stop := w.start(cfg)
	w.waitFinding("vm-m", "pvc-m1", v1alpha1.PhaseWaiting, "")
	stop()
	if err := virtapi.RemoveVolume(w.ctx, w.sub, virtapi.VMI, w.ns, "vm-m", &kubevirtv1.RemoveVolumeOptions{Name: "pvc-m1"}); err != nil {
		t.Fatal(err)
	}
	w.waitVMI("vm-m", "pvc-m1 unplugged by hand", func(v *kubevirtv1.VirtualMachineInstance) bool { return !lists(v, "pvc-m1") })
	w.orphan("vm-m", "pvc-m2")

	w.start(cfg)
	w.waitFinding("vm-m", "pvc-m1", v1alpha1.PhaseResolved, "ConditionGone")
	w.waitFinding("vm-m", "pvc-m2", v1alpha1.PhaseWaiting, "")

	policy, err := cfg.Policy()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := observe.Observe(w.ctx, w.c, observe.Options{Namespace: w.ns})
	if err != nil {
		t.Fatal(err)
	}
	audit := map[string]bool{}
	for _, f := range check.Run(snap, policy, time.Now()) {
		if f.Check == check.OrphanHotplugVolume {
			audit[f.ID] = true
		}
	}
	var recs v1alpha1.FindingList
	if err := w.c.List(w.ctx, &recs, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelCheck: check.OrphanHotplugVolume}); err != nil {
		t.Fatal(err)
	}
	open := map[string]bool{}
	for _, r := range recs.Items {
		if r.Status.Phase != v1alpha1.PhaseResolved {
			open[r.Spec.ID] = true
		}
	}
	if len(open) != len(audit) || len(open) != 1 {
		t.Fatalf("open records %v, fresh audit %v: want the same one finding", open, audit)
	}
	for id := range audit {
		if !open[id] {
			t.Fatalf("open records %v, fresh audit %v", open, audit)
		}
	}
}

// Killed between the server's dry run and the write: nothing was written.
// The claim counts; the next process (room for two actions) acts exactly
// once, and its record is truthful.
func TestFaults_killedBetweenDryRunAndWrite_actsOnceAfterRestart(t *testing.T) {
	w := newWorld(t)
	cfg, _ := w.diesAt(2, "vm-d", "pvc-d", func(f *controller.Faults, kill func()) { f.AfterDryRun = once(kill) })
	if !lists(w.vmi("vm-d"), "pvc-d") {
		t.Fatal("the write happened although the process died after the dry run")
	}
	w.start(cfg)
	w.waitFinding("vm-d", "pvc-d", v1alpha1.PhaseResolved, string(drift.Applied))
	if n := len(w.events(act.ReasonOrphanDetached)); n != 1 {
		t.Fatalf("want exactly one detach, got %d", n)
	}
}
