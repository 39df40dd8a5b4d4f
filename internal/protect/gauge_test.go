package protect

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// The gauge tells deletions that wait for a VM (postponed, as intended)
// from those that wait for tether (releasing: a backlog if they stay), and
// dates the oldest of each.
func TestDeletingGauge_postponedAndReleasing(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	claim := func(name string, finalizer bool, deleted *time.Time) client.Object {
		c := fixture.PVC(name)
		c.UID = ""
		if finalizer {
			c.Finalizers = []string{inuse.Finalizer}
		}
		if deleted != nil {
			c.DeletionTimestamp = &metav1.Time{Time: *deleted}
		}
		return c
	}
	at := func(d time.Duration) *time.Time { t := t0.Add(d); return &t }
	vm := fixture.VM("vm", fixture.WithVolume("disk", fixture.PVC("used")), fixture.WithVolume("disk2", fixture.PVC("used-later")))
	c := fake.NewClientBuilder().WithScheme(clients.Scheme()).WithObjects(
		vm,
		claim("used", true, at(time.Hour)),
		claim("used-later", true, at(2*time.Hour)),
		claim("unused", true, at(3*time.Hour)),
		claim("not-deleted", true, nil),
		claim("other-finalizer", false, nil),
	).Build()
	metrics.ProtectionDeletingOldest.WithLabelValues("DataVolume", "releasing").Set(5) // must be cleared
	deletingGauge{cache: c, kinds: []inuse.Kind{inuse.KindPVC}}.count(context.Background())

	for state, want := range map[string]float64{metrics.DeletingPostponed: 2, metrics.DeletingReleasing: 1} {
		if got := testutil.ToFloat64(metrics.ProtectionDeleting.WithLabelValues(string(inuse.KindPVC), state)); got != want {
			t.Errorf("tether_protection_deleting %s: got %v, want %v", state, got, want)
		}
	}
	for state, want := range map[string]time.Time{metrics.DeletingPostponed: t0.Add(time.Hour), metrics.DeletingReleasing: t0.Add(3 * time.Hour)} {
		if got := testutil.ToFloat64(metrics.ProtectionDeletingOldest.WithLabelValues(string(inuse.KindPVC), state)); got != float64(want.Unix()) {
			t.Errorf("oldest %s: got %v, want %v", state, got, want.Unix())
		}
	}
	if n := testutil.CollectAndCount(metrics.ProtectionDeletingOldest); n != 2 {
		t.Errorf("want 2 series of the oldest deletion, got %d", n)
	}

	// Once released and gone, the count is 0 and the oldest has no series.
	if err := c.Delete(context.Background(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: fixture.Namespace, Name: "unused"}}); err != nil {
		t.Fatal(err)
	}
	unused := &corev1.PersistentVolumeClaim{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: fixture.Namespace, Name: "unused"}, unused); err == nil {
		unused.Finalizers = nil
		if err := c.Update(context.Background(), unused); err != nil {
			t.Fatal(err)
		}
	}
	deletingGauge{cache: c, kinds: []inuse.Kind{inuse.KindPVC}}.count(context.Background())
	if got := testutil.ToFloat64(metrics.ProtectionDeleting.WithLabelValues(string(inuse.KindPVC), metrics.DeletingReleasing)); got != 0 {
		t.Errorf("after the release: releasing %v, want 0", got)
	}
	if n := testutil.CollectAndCount(metrics.ProtectionDeletingOldest); n != 1 {
		t.Errorf("after the release: want 1 series of the oldest deletion (postponed), got %d", n)
	}
}
