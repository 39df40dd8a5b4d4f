package controller_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// The un-fence killed at each of its steps (the fault suite's way: the
// process stops at once at a hook of the action): before the cordon is
// written, after the cordon and before the taint's removal, after the
// taint's removal and before the uncordon. Each time the node the dead
// process leaves is tainted or cordoned (never schedulable under a taint
// the tenant's controllers may still see in their caches), and the next
// process finishes the sequence: the taint gone, the node uncordoned no
// sooner than unfenceSettle after the taint went, tether's records gone.
func TestFaults_unfenceKilledAtEachStep_nextProcessFinishesIt(t *testing.T) {
	const settle = 4 * time.Second
	isUnfence := func(f drift.Finding) bool { return f.Action.Type == check.RemoveOutOfServiceTaint }
	// killAt returns a hook that kills the process at the nth call for an
	// un-fence finding.
	killAt := func(n int32, kill func()) func(drift.Finding) {
		var calls atomic.Int32
		die := once(kill)
		return func(f drift.Finding) {
			if isUnfence(f) && calls.Add(1) == n {
				die(f)
			}
		}
	}
	cases := []struct {
		name   string
		faults func(kill func()) *controller.Faults
		// left says what is wrong with the node the dead process left, or "".
		left func(n *corev1.Node) string
	}{
		{name: "before the cordon is written",
			faults: func(kill func()) *controller.Faults { return &controller.Faults{AfterDryRun: killAt(1, kill)} },
			left: func(n *corev1.Node) string {
				if !snapshot.HasOutOfServiceTaint(n) || n.Spec.Unschedulable {
					return "want tainted and not cordoned"
				}
				return ""
			}},
		{name: "after the cordon, before the taint's removal",
			faults: func(kill func()) *controller.Faults { return &controller.Faults{AfterDryRun: killAt(2, kill)} },
			left: func(n *corev1.Node) string {
				if !snapshot.HasOutOfServiceTaint(n) || !n.Spec.Unschedulable || n.Annotations[snapshot.CordonedAnnotation] == "" {
					return "want tainted and cordoned by tether"
				}
				return ""
			}},
		{name: "after the taint's removal, before the uncordon",
			faults: func(kill func()) *controller.Faults { return &controller.Faults{AfterAction: killAt(1, kill)} },
			left: func(n *corev1.Node) string {
				if snapshot.HasOutOfServiceTaint(n) || !n.Spec.Unschedulable || n.Annotations[snapshot.UnfencedAnnotation] == "" {
					return "want untainted, cordoned, with the time of the taint's removal"
				}
				return ""
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			tenant := w.env.Tenants["guest"]
			tc, node := fencedAndBack(t, w, "unfence-"+w.ns, "vm-u")

			cfg := w.cfg(time.Hour)
			cfg.Checks = map[string]config.CheckConfig{check.TenantNodeDown: {Enabled: true, GracePeriod: metav1.Duration{}}}
			cfg.Fencing.UnfenceSettle.Duration = settle
			cfg.ActionTimeout.Duration = 3 * time.Second
			cfg.Tenants = []config.TenantConfig{{Name: "guest", Kubeconfig: tenantAccount(t, tenant, w.ns, true), Namespace: w.ns}}

			k := w.startKillable(cfg, c.faults)
			w.waitDead(k)
			n := testenv.Node(t, tc, node.Name)
			if why := c.left(n); why != "" {
				t.Fatalf("the dead process left the node: %s; taints %v, unschedulable %v, annotations %v", why, n.Spec.Taints, n.Spec.Unschedulable, n.Annotations)
			}

			w.start(cfg)
			var unfencedAt time.Time
			testenv.Eventually(t, 60*time.Second, "the un-fence finished by the next process", func() (bool, error) {
				n := testenv.Node(t, tc, node.Name)
				tainted := snapshot.HasOutOfServiceTaint(n)
				if at, err := time.Parse(time.RFC3339, n.Annotations[snapshot.UnfencedAnnotation]); err == nil {
					unfencedAt = at
				}
				switch {
				case tainted && n.Annotations[snapshot.FencedAnnotation] == "":
					t.Fatalf("the taint without tether's record: %v", n.Annotations)
				case tainted || n.Spec.Unschedulable:
					return false, nil
				case unfencedAt.IsZero():
					t.Fatalf("schedulable and untainted, and the time of the taint's removal never seen: %v", n.Annotations)
				case time.Since(unfencedAt) < settle-time.Second: // the stored time has second precision
					t.Fatalf("uncordoned %s after the taint went, before unfenceSettle %s", time.Since(unfencedAt), settle)
				}
				for _, a := range []string{snapshot.FencedAnnotation, snapshot.CordonedAnnotation, snapshot.UnfencedAnnotation} {
					if n.Annotations[a] != "" {
						t.Fatalf("record %s left after the un-fence: %v", a, n.Annotations)
					}
				}
				return true, nil
			})
			t.Logf("taint removed at %s; uncordoned %s later (unfenceSettle %s)", unfencedAt.Format(time.RFC3339), time.Since(unfencedAt).Round(100*time.Millisecond), settle)
		})
	}
}

// The taint's removal, chained to the cordon, loses a race (the infra VM
// changes between its dry run and its write): the action ends Pending, not
// Applied, with the node cordoned and still tainted; the next attempt,
// from a fresh live read, removes the taint. Pending keeps the record
// acting, so the controller resumes at once rather than after the
// blast-radius window a resolved record cools down in.
func TestUnfence_taintRemovalLosesARace_pendingThenResumed(t *testing.T) {
	w := newWorld(t)
	tenant := w.env.Tenants["guest"]
	tc, node := fencedAndBack(t, w, "race-"+w.ns, "vm-r")

	p := check.DefaultPolicy()
	p.Scope.Namespaces = []string{w.ns}
	o := observe.Options{Namespace: w.ns, Tenants: []observe.TenantSource{{Name: "guest", Namespace: w.ns, Config: tenant.Config}}}
	ex, err := act.NewExecutor(w.env.Config, p, o)
	if err != nil {
		t.Fatal(err)
	}
	finding := func() drift.Finding {
		s, err := observe.ForTenantNode(w.ctx, ex.Client, o, "guest", node.Name)
		if err != nil {
			t.Fatal(err)
		}
		f, ok := check.CheckTenantNode(s, p, time.Now(), "guest", node.Name)
		if !ok || f.Action.Type != check.RemoveOutOfServiceTaint || !f.Action.Safe {
			t.Fatalf("want a safe un-fence, got %v %+v", ok, f)
		}
		return f
	}
	var dryRuns int
	ex.AfterDryRun = func(drift.Finding) {
		if dryRuns++; dryRuns == 2 { // the taint's removal, after the cordon
			// Someone writes the VM: its resourceVersion moves.
			var v kubevirtv1.VirtualMachine
			if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "vm-r"}, &v); err != nil {
				t.Fatal(err)
			}
			v.Labels = map[string]string{"touched": "yes"}
			if err := w.c.Update(w.ctx, &v); err != nil {
				t.Fatal(err)
			}
		}
	}
	res := ex.Apply(w.ctx, finding(), act.Evidence{})
	n := testenv.Node(t, tc, node.Name)
	if res.Outcome != drift.Pending || !strings.Contains(res.Message, "did not follow") || !snapshot.HasOutOfServiceTaint(n) || !n.Spec.Unschedulable {
		t.Fatalf("a cordon whose taint removal lost the race: want Pending, cordoned and tainted; got %s: %s; taints %v, unschedulable %v", res.Outcome, res.Message, n.Spec.Taints, n.Spec.Unschedulable)
	}
	ex.AfterDryRun = nil
	res = ex.Apply(w.ctx, finding(), act.Evidence{})
	n = testenv.Node(t, tc, node.Name)
	if res.Outcome != drift.Applied || snapshot.HasOutOfServiceTaint(n) || !n.Spec.Unschedulable || n.Annotations[snapshot.UnfencedAnnotation] == "" {
		t.Fatalf("the next attempt: want Applied, untainted, still cordoned; got %s: %s; taints %v, unschedulable %v, annotations %v", res.Outcome, res.Message, n.Spec.Taints, n.Spec.Unschedulable, n.Annotations)
	}
}

// fencedAndBack makes, in the shared tenant, a Ready node that carries
// tether's out-of-service taint and record, whose infra VM vm runs (again)
// in w's namespace; it returns a client of the tenant and the node.
func fencedAndBack(t *testing.T, w *world, name, vm string) (client.Client, *corev1.Node) {
	t.Helper()
	tc, err := clients.New(w.env.Tenants["guest"].Config)
	if err != nil {
		t.Fatal(err)
	}
	node := fixture.TenantNodeObject(name, w.ns, vm)
	node.UID = ""
	node.Spec.Taints = []corev1.Taint{{Key: snapshot.OutOfServiceTaint, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
	node.Annotations[snapshot.FencedAnnotation] = "infra VM " + w.ns + "/" + vm + " down"
	if err := tc.Create(w.ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.Delete(context.Background(), node) })
	testenv.SetNodeReady(t, tc, node.Name, corev1.ConditionTrue, time.Now())
	obj := fixture.VM(vm, fixture.Running(), fixture.InNamespace(w.ns))
	obj.UID = ""
	if err := w.c.Create(w.ctx, obj); err != nil {
		t.Fatal(err)
	}
	w.waitVMI(vm, "running", func(v *kubevirtv1.VirtualMachineInstance) bool { return v.Status.Phase == kubevirtv1.Running })
	return tc, node
}
