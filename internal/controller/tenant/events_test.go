package tenant

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// A tenant Node update that changes nothing the evidence keeps (a kubelet's
// status report: a new resourceVersion and heartbeat) wakes nothing, and
// comparing the kept views does not fail on their times; one that changes
// the Ready condition, the out-of-service taint or tether's annotation
// wakes the node's VMI and the node itself.
func TestNodeUpdates_wakeOnlyOnWhatIsKept(t *testing.T) {
	fact := informers.NewSharedInformerFactory(k8sfake.NewClientset(), 0)
	tw := &Watch{cfg: config.TenantConfig{Name: "guest", Namespace: "infra"},
		nodes: fact.Core().V1().Nodes().Informer(), csiNodes: fact.Storage().V1().CSINodes().Informer()}
	keep := keepNodeEvidence(tw.driver())
	since := metav1.NewTime(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	node := func(rv string, ready corev1.ConditionStatus, heartbeat time.Time, mod ...func(*corev1.Node)) any {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", ResourceVersion: rv, Annotations: map[string]string{snapshot.ClusterNamespaceAnnotation: "infra"}}}
		n.Spec.ProviderID = snapshot.ProviderIDPrefix + "vm-1"
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: since, LastHeartbeatTime: metav1.NewTime(heartbeat)}}
		for _, m := range mod {
			m(n)
		}
		kept, err := keep(n)
		if err != nil {
			t.Fatal(err)
		}
		return kept
	}
	t0 := since.Time
	base := node("1", corev1.ConditionTrue, t0)
	for _, tc := range []struct {
		name  string
		after any
		wakes bool
	}{
		{"heartbeat only", node("2", corev1.ConditionTrue, t0.Add(time.Minute)), false},
		{"Ready turns Unknown", node("2", corev1.ConditionUnknown, t0.Add(time.Minute), func(n *corev1.Node) {
			n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(time.Minute))
		}), true},
		{"the out-of-service taint", node("2", corev1.ConditionTrue, t0, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: snapshot.OutOfServiceTaint, Effect: corev1.TaintEffectNoExecute}}
		}), true},
		{"another taint", node("2", corev1.ConditionTrue, t0, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}}
		}), false},
		{"tether's fence annotation", node("2", corev1.ConditionTrue, t0, func(n *corev1.Node) {
			n.Annotations[snapshot.FencedAnnotation] = "infra VM infra/vm-1 down"
		}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmis, nodes := NewWakeQueue(), NewNodeWakeQueue()
			te := tenantEvents{tw: tw, q: vmis}
			te.nodeUpdated(base, tc.after)
			tw.nodeUpdated(nodes, base, tc.after)
			if got := vmis.size() > 0; got != tc.wakes {
				t.Errorf("VMIs woken: %v, want %v", got, tc.wakes)
			}
			if got := nodes.size() > 0; got != tc.wakes {
				t.Errorf("tenant node woken: %v, want %v", got, tc.wakes)
			}
		})
	}
}
