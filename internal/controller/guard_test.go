package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// The controller publishes its blast-radius limit beside its breaker, for
// `tether fix` to say what its actions do to the window.
func TestController_publishesItsLimit(t *testing.T) {
	w := newWorld(t)
	cfg := w.cfg(time.Hour)
	cfg.BlastRadius.MaxActions, cfg.BlastRadius.Interval.Duration = 3, 7*time.Minute
	w.start(cfg)
	testenv.Eventually(t, 30*time.Second, "the published limit", func() (bool, error) {
		l, found, err := findingrecord.ReadLimits(w.ctx, w.c, w.ns)
		return found && l == findingrecord.Limits{Max: 3, Interval: 7 * time.Minute}, err
	})
}

// The anomaly guard: more findings become safe at once than its limit
// (maxSafe 1 here): it trips, the findings are held AnomalyGuard past their
// grace and nothing is detached, the metric says so; an operator resets it
// (`tether controller reset-guard`), accepting the picture, and the
// controller acts.
func TestController_anomalyGuardTripsAndHolds(t *testing.T) {
	w := newWorld(t)
	w.orphan("vm-g1", "pvc-g1")
	w.orphan("vm-g2", "pvc-g2")
	cfg := w.cfg(8 * time.Second)
	cfg.AnomalyGuard.MaxSafe = 1
	w.start(cfg, func(o *controller.Options) { o.GuardInterval = 500 * time.Millisecond })
	testenv.Eventually(t, 30*time.Second, "the guard tripped", func() (bool, error) {
		g, err := findingrecord.Guard(w.ctx, w.c, w.ns)
		return g.Tripped && strings.Contains(g.Message, "2 findings are safe to act on at once, more than the limit of 1"), err
	})
	for _, vm := range []string{"vm-g1", "vm-g2"} {
		w.waitFinding(vm, strings.Replace(vm, "vm", "pvc", 1), v1alpha1.PhaseBlocked, "AnomalyGuard")
	}
	if !lists(w.vmi("vm-g1"), "pvc-g1") || !lists(w.vmi("vm-g2"), "pvc-g2") {
		t.Fatal("acted while the anomaly guard was tripped")
	}
	if ok, err := findingrecord.ResetGuard(w.ctx, w.c, w.ns, time.Now(), "test"); err != nil || !ok {
		t.Fatalf("reset: %v %v", ok, err)
	}
	w.waitFinding("vm-g1", "pvc-g1", v1alpha1.PhaseResolved, string(drift.Applied))
	w.waitFinding("vm-g2", "pvc-g2", v1alpha1.PhaseResolved, string(drift.Applied))
	if g, _ := findingrecord.Guard(w.ctx, w.c, w.ns); g.Tripped {
		t.Fatalf("the accepted picture tripped the guard again: %s", g.Message)
	}
}

// The guard counts the VMIs of its scope from the informer's events (its
// tally), not from a walk of the cache: its first look records every VMI,
// and when they all go at once it trips, saying how many it held.
func TestController_anomalyGuardCountsTheVMIsItsInformerSees(t *testing.T) {
	w := newWorld(t)
	const n = kubevirt.AnomalyFloor + 2
	for i := range n {
		vmi := fixture.VMI(fmt.Sprintf("guarded-%02d", i), fixture.InNamespace(w.ns))
		vmi.UID = ""
		if err := w.c.Create(w.ctx, vmi); err != nil {
			t.Fatal(err)
		}
	}
	w.start(w.cfg(time.Hour), func(o *controller.Options) { o.GuardInterval = 300 * time.Millisecond })
	testenv.Eventually(t, 30*time.Second, "the guard's first look counts every VMI", func() (bool, error) {
		g, err := findingrecord.Guard(w.ctx, w.c, w.ns)
		return err == nil && g.Last != nil && g.Last.VMIs == n, err
	})
	if err := w.c.DeleteAllOf(w.ctx, &kubevirtv1.VirtualMachineInstance{}, client.InNamespace(w.ns)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the guard tripped on the VMIs gone", func() (bool, error) {
		g, err := findingrecord.Guard(w.ctx, w.c, w.ns)
		return g.Tripped && strings.Contains(g.Message, fmt.Sprintf("hold no VMI, where they held %d", n)), err
	})
}
