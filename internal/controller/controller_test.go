package controller_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// Orphan appears -> Waiting -> acted on once the grace period passes ->
// Resolved, running as the ServiceAccount of config/rbac.
func TestController_orphan_waitsGraceThenActs(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-a", "pvc-a")
	w.start(w.cfg(4 * time.Second))
	rec := w.waitFinding("vm-a", "pvc-a", v1alpha1.PhaseWaiting, "")
	actAfter := rec.Status.ActAfter.Time
	if got := actAfter.Sub(rec.Status.FirstObserved.Time); got != 4*time.Second {
		t.Fatalf("actAfter - firstObserved = %s, want the grace period", got)
	}
	// Not before the deadline.
	if until := time.Until(actAfter) - 500*time.Millisecond; until > 0 {
		time.Sleep(until)
		if !lists(w.vmi("vm-a"), "pvc-a") {
			t.Fatal("acted before the grace period ended")
		}
	}
	w.waitVMI("vm-a", "pvc-a detached", func(v *kubevirtv1.VirtualMachineInstance) bool { return !lists(v, "pvc-a") })
	t.Logf("detached %s after the grace period ended (stored times have second precision)", time.Since(actAfter).Round(10*time.Millisecond))
	w.waitFinding("vm-a", "pvc-a", v1alpha1.PhaseResolved, string(drift.Applied))
	if evs := w.events(act.ReasonOrphanDetached); len(evs) != 1 {
		t.Fatalf("want one %s event, got %d", act.ReasonOrphanDetached, len(evs))
	}
}

// A restart in the middle of the grace period credits only the time the
// controller watched: the stretch up to the record's lastObserved counts,
// the downtime after it does not, so the deadline moves by the gap.
func TestController_restartMidGrace_creditsOnlyWatchedTime(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-r", "pvc-r")
	const grace = 8 * time.Second
	stop := w.start(w.cfg(grace))
	before := w.waitFinding("vm-r", "pvc-r", v1alpha1.PhaseWaiting, "")
	time.Sleep(2 * time.Second)
	stop()
	time.Sleep(2 * time.Second) // downtime: watched by nobody
	restarted := time.Now()
	w.start(w.cfg(grace))
	w.waitVMI("vm-r", "pvc-r detached", func(v *kubevirtv1.VirtualMachineInstance) bool { return !lists(v, "pvc-r") })
	after := w.waitFinding("vm-r", "pvc-r", v1alpha1.PhaseResolved, "")
	if !after.Status.FirstObserved.Equal(before.Status.FirstObserved) {
		t.Fatalf("restart moved the first sight: %s -> %s", before.Status.FirstObserved, after.Status.FirstObserved)
	}
	// Watched before the stop: safeSince..lastObserved (lastObserved is
	// refreshed once a minute, so here it is the first write).
	watched := before.Status.LastObserved.Sub(before.Status.SafeSince.Time)
	earliest := restarted.Add(grace - watched).Add(-time.Second) // stored times have second precision
	if after.Status.LastAttempt.Time.Before(earliest) {
		t.Fatalf("acted at %s, before the restart (%s) plus the grace not yet watched (%s): downtime was credited",
			after.Status.LastAttempt, restarted, grace-watched)
	}
	if !after.Status.ActAfter.After(before.Status.ActAfter.Time) {
		t.Fatalf("actAfter %s -> %s: the deadline did not move by the unwatched gap", before.Status.ActAfter, after.Status.ActAfter)
	}
}

// A record whose status was edited by hand (another field manager) to
// hide a long downtime is no evidence: it is replaced, the replacement is
// reported with an Event, and the full grace period runs from the restart.
func TestController_handEditedRecord_replacedAndGraceRestarts(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-h", "pvc-h")
	const grace = 10 * time.Second
	stop := w.start(w.cfg(grace))
	w.waitFinding("vm-h", "pvc-h", v1alpha1.PhaseWaiting, "")
	stop()
	time.Sleep(grace + time.Second) // down for longer than the grace period
	rec := w.finding("vm-h", "pvc-h")
	old := rec.UID
	now := metav1.Now()
	rec.Status.LastObserved = &now // as if it had been watched all along
	if err := w.c.Status().Update(w.ctx, rec, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	w.start(w.cfg(grace))
	testenv.Eventually(t, 20*time.Second, "the hand-edited record replaced", func() (bool, error) {
		f := w.finding("vm-h", "pvc-h")
		return f != nil && f.UID != old, nil
	})
	if evs := w.events(controller.EventRecordDistrusted); len(evs) == 0 || !strings.Contains(evs[0].Message, "kubectl-edit") {
		t.Fatalf("want a %s Event naming the other field manager, got %+v", controller.EventRecordDistrusted, evs)
	}
	w.waitVMI("vm-h", "pvc-h detached", func(v *kubevirtv1.VirtualMachineInstance) bool { return !lists(v, "pvc-h") })
	after := w.waitFinding("vm-h", "pvc-h", v1alpha1.PhaseResolved, "")
	if after.Status.LastAttempt.Time.Before(restarted.Add(grace - time.Second)) {
		t.Fatalf("acted at %s, less than the grace period after the restart at %s", after.Status.LastAttempt, restarted)
	}
}

// The volume becomes wanted during the grace period (persisted to the VM
// spec): the finding is resolved and nothing is done.
func TestController_conditionDisappearsMidGrace_resolvedNoAction(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-d", "pvc-d")
	w.start(w.cfg(time.Hour))
	w.waitFinding("vm-d", "pvc-d", v1alpha1.PhaseWaiting, "")
	if err := virtapi.AddVolume(w.ctx, w.sub, virtapi.VM, w.ns, "vm-d", fixture.AddVolumeOptions("pvc-d")); err != nil {
		t.Fatal(err)
	}
	w.waitFinding("vm-d", "pvc-d", v1alpha1.PhaseResolved, "ConditionGone")
	if !lists(w.vmi("vm-d"), "pvc-d") {
		t.Fatal("the volume was touched")
	}
	if evs := w.events(act.ReasonOrphanDetached); len(evs) != 0 {
		t.Fatalf("unexpected action events: %v", evs)
	}
}

// A migrating VMI holds the action; it proceeds once the migration is done.
func TestController_migrating_blockedThenActs(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-m", "pvc-m")
	mig := &kubevirtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Name: "mig", Namespace: w.ns},
		Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: "vm-m"}}
	if err := w.c.Create(w.ctx, mig); err != nil {
		t.Fatal(err)
	}
	w.waitVMI("vm-m", "migrating", func(v *kubevirtv1.VirtualMachineInstance) bool {
		return v.Status.MigrationState != nil && !v.Status.MigrationState.Completed
	})
	w.start(w.cfg(time.Second))
	w.waitFinding("vm-m", "pvc-m", v1alpha1.PhaseBlocked, "VMIMigrating")
	w.waitVMI("vm-m", "pvc-m detached after the migration", func(v *kubevirtv1.VirtualMachineInstance) bool {
		return !lists(v, "pvc-m") && v.Status.MigrationState != nil && v.Status.MigrationState.Completed
	})
	w.waitFinding("vm-m", "pvc-m", v1alpha1.PhaseResolved, string(drift.Applied))
}

// Dry-run mode records the finding and never acts.
func TestController_dryRun_neverActs(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-y", "pvc-y")
	cfg := w.cfg(0)
	cfg.DryRun = true
	w.start(cfg)
	w.waitFinding("vm-y", "pvc-y", v1alpha1.PhaseBlocked, controller.ReasonDryRun)
	time.Sleep(time.Second)
	if !lists(w.vmi("vm-y"), "pvc-y") {
		t.Fatal("dry run acted")
	}
}

// With a limit of one action, the second orphan is not touched: acting
// stops, the finding says why, and an Event is raised.
func TestController_blastRadius_stopsAndReports(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-b", "pvc-b1")
	w.orphan("vm-b", "pvc-b2")
	w.orphan("vm-b", "pvc-b3")
	cfg := w.cfg(0)
	cfg.BlastRadius.MaxActions = 1
	w.start(cfg)
	testenv := func() (applied, blocked int) { return w.outcomes("vm-b", "pvc-b1", "pvc-b2", "pvc-b3") }
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, b := testenv()
		if a == 1 && b == 2 {
			break
		}
		if a > 1 {
			t.Fatalf("%d actions despite a limit of 1", a)
		}
		if time.Now().After(deadline) {
			t.Fatalf("want 1 applied and 2 blocked by %s, got %d and %d", controller.ReasonBlastRadius, a, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(w.events(controller.EventBlastRadius)) == 0 {
		t.Fatalf("no %s event", controller.EventBlastRadius)
	}
	left := 0
	for _, v := range []string{"pvc-b1", "pvc-b2", "pvc-b3"} {
		if lists(w.vmi("vm-b"), v) {
			left++
		}
	}
	if left != 2 {
		t.Fatalf("want 2 volumes left, got %d", left)
	}
}

// Two replicas with leader election: exactly one acts.
func TestController_leaderElection_exactlyOneActs(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-l", "pvc-l1")
	w.orphan("vm-l", "pvc-l2")
	for _, id := range []string{"replica-a", "replica-b"} {
		w.start(w.cfg(time.Second), elected("tether-test-"+w.ns, id))
	}
	w.waitFinding("vm-l", "pvc-l1", v1alpha1.PhaseResolved, string(drift.Applied))
	w.waitFinding("vm-l", "pvc-l2", v1alpha1.PhaseResolved, string(drift.Applied))
	who := map[string]int{}
	for _, e := range w.events(act.ReasonOrphanDetached) {
		who[e.ReportingInstance]++
	}
	if len(who) != 1 {
		t.Fatalf("want exactly one replica acting, got %v", who)
	}
}

// A Finding deleted by hand is recreated from the observed state, and its
// clock starts again (it is never trusted to shorten the grace period).
func TestController_recordDeletedByHand_recreated(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-h", "pvc-h")
	w.start(w.cfg(time.Hour))
	first := w.waitFinding("vm-h", "pvc-h", v1alpha1.PhaseWaiting, "")
	if err := w.c.Delete(w.ctx, first); err != nil {
		t.Fatal(err)
	}
	var again *v1alpha1.Finding
	deadline := time.Now().Add(30 * time.Second)
	for {
		again = w.finding("vm-h", "pvc-h")
		if again != nil && again.UID != first.UID && again.Status.Phase == v1alpha1.PhaseWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deleted Finding was not recreated")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if again.Status.FirstObserved.Time.Before(again.CreationTimestamp.Time) {
		t.Fatal("a recreated record must not inherit an earlier first-observed time")
	}
	var vmi kubevirtv1.VirtualMachineInstance
	_ = w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "vm-h"}, &vmi)
	if !lists(&vmi, "pvc-h") {
		t.Fatal("the volume was touched")
	}
}
