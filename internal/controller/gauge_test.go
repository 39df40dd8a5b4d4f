package controller

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/metrics"
)

func TestFindingGauge_countsByCheckAndPhase(t *testing.T) {
	rec := func(name, check string, phase v1alpha1.Phase) *v1alpha1.Finding {
		return &v1alpha1.Finding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: v1alpha1.FindingSpec{Check: check}, Status: v1alpha1.FindingStatus{Phase: phase}}
	}
	c := fake.NewClientBuilder().WithScheme(clients.Scheme).WithObjects(
		rec("a", "OrphanHotplugVolume", v1alpha1.PhaseWaiting),
		rec("b", "OrphanHotplugVolume", v1alpha1.PhaseWaiting),
		rec("c", "OrphanHotplugVolume", v1alpha1.PhaseResolved),
	).Build()
	metrics.Findings.WithLabelValues("Stale", "Acting").Set(7) // must be cleared
	findingGauge{cache: c}.count(context.Background())
	for _, w := range []struct {
		phase string
		want  float64
	}{{"Waiting", 2}, {"Resolved", 1}} {
		if got := testutil.ToFloat64(metrics.Findings.WithLabelValues("OrphanHotplugVolume", w.phase)); got != w.want {
			t.Errorf("%s: got %v, want %v", w.phase, got, w.want)
		}
	}
	if n := testutil.CollectAndCount(metrics.Findings); n != 2 {
		t.Errorf("want 2 series after a recount, got %d", n)
	}
}
