package restart

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/eventreason"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/testing/fakeclient"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// The "on restart" mode keeps its records through the same sequence as the
// checks' reconcilers, so it tells of them as they do: a new record is
// announced with an Event (TetherFindingObserved), and a finding that
// becomes blocked counts once in tether_blocked_total, however many passes
// see it.
func TestRestart_recordsTellAsTheOthers(t *testing.T) {
	cfg, policy, _, _ := startingVMWithDanglingHotplug(t, time.Minute)
	vm := fixture.VM("vm-b", fixture.InNamespace("ns"), fixture.Running(), fixture.WithVolume("boot", fixture.PVC("missing-boot")))
	// The fake client keeps no managedFields: mark the records as the
	// controller's, as the server would.
	c := fakeclient.FakeClient(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if recs, ok := list.(*v1alpha1.FindingList); ok {
			for i := range recs.Items {
				recs.Items[i].ManagedFields = []metav1.ManagedFieldsEntry{fakeclient.StatusBy(v1alpha1.FieldManager)}
			}
		}
		return nil
	}}, vm)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Reconciler{Cache: c, Config: &cfg, Policy: policy, Now: func() time.Time { return now }, Log: logr.Discard(),
		Executor: &act.Executor{Client: c}, Records: restartRecords(c, &cfg, 1, func() time.Time { return now })}
	blocked := metrics.Blocked.WithLabelValues(check.DanglingVolumeReference, string(check.VolumeNotHotpluggable))
	before := testutil.ToFloat64(blocked)
	for pass := 0; pass < 2; pass++ {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(vm)}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(10 * time.Second)
	}
	if got := testutil.ToFloat64(blocked) - before; got != 1 {
		t.Errorf("tether_blocked_total{check=%q,reason=%q} rose by %v over two passes, want 1", check.DanglingVolumeReference, check.VolumeNotHotpluggable, got)
	}
	var evs corev1.EventList
	if err := c.List(context.Background(), &evs, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, ev := range evs.Items {
		count[ev.Reason]++
	}
	if count[eventreason.FindingObserved] != 1 {
		t.Errorf("want one %s Event for the new record, got %d (all: %v)", eventreason.FindingObserved, count[eventreason.FindingObserved], count)
	}
	if count[EventDanglingBlocksStart] != 1 {
		t.Errorf("want one %s Event, got %d (all: %v)", EventDanglingBlocksStart, count[EventDanglingBlocksStart], count)
	}
}
