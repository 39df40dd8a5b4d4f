package act

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// fenced derives each write from the node as read, and refuses a node whose
// state does not call for it: the oracle is the un-fence's order (cordon,
// then the taint, then the uncordon), and that tether lifts only its own
// taint and its own cordon.
func TestFenced_stepsFollowTheNode(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	vm := snapshot.InfraVM{Namespace: "infra", Name: "vm-a"}
	tainted := func(ann map[string]string, unschedulable bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: ann}}
		n.Spec.Unschedulable = unschedulable
		n.Spec.Taints = []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}, OutOfServiceTaint}
		return n
	}
	find := func(a drift.ActionType) drift.Finding {
		return drift.Finding{Cluster: "t1", Action: drift.Action{Type: a, Safe: true}}
	}
	fencedAnn := func() map[string]string { return map[string]string{snapshot.FencedAnnotation: "x"} }

	// Schedulable under tether's taint: cordon first, recorded as tether's.
	n, step, r := fenced(find(check.RemoveOutOfServiceTaint), tainted(fencedAnn(), false), vm, now)
	if r != nil || step != stepCordon || !n.Spec.Unschedulable || n.Annotations[snapshot.CordonedAnnotation] == "" || !snapshot.HasOutOfServiceTaint(n) {
		t.Fatalf("schedulable: want a recorded cordon with the taint kept, got %s %+v %+v", step, n, r)
	}
	// Cordoned by tether: the taint goes, the other taint stays, the time is recorded.
	ann := fencedAnn()
	ann[snapshot.CordonedAnnotation] = "y"
	n, step, r = fenced(find(check.RemoveOutOfServiceTaint), tainted(ann, true), vm, now)
	if r != nil || step != stepUntaint || snapshot.HasOutOfServiceTaint(n) || len(n.Spec.Taints) != 1 || n.Annotations[snapshot.FencedAnnotation] != "" ||
		n.Annotations[snapshot.UnfencedAnnotation] != now.Format(time.RFC3339) || !n.Spec.Unschedulable {
		t.Fatalf("tether's cordon: want the taint removed and the time recorded, got %s %+v %+v", step, n, r)
	}
	if msg := stepDone(find(check.RemoveOutOfServiceTaint), step, "n1", check.Policy{}, true); !strings.Contains(msg, "then tether uncordons it") {
		t.Errorf("message: %s", msg)
	}
	// Cordoned by someone else: the taint goes, no time (tether will not uncordon).
	n, step, r = fenced(find(check.RemoveOutOfServiceTaint), tainted(fencedAnn(), true), vm, now)
	if r != nil || step != stepUntaint || n.Annotations[snapshot.UnfencedAnnotation] != "" || !n.Spec.Unschedulable {
		t.Fatalf("an operator's cordon: want the taint removed, no uncordon due, got %s %+v %+v", step, n, r)
	}
	if msg := stepDone(find(check.RemoveOutOfServiceTaint), step, "n1", check.Policy{}, false); !strings.Contains(msg, "the cordon someone else set stays") {
		t.Errorf("message: %s", msg)
	}
	// Refusals: a taint that is not tether's; a taint already gone; an
	// uncordon without tether's record, or under a taint.
	for name, c := range map[string]struct {
		a    drift.ActionType
		node *corev1.Node
		says string
	}{
		"an operator's taint":             {check.RemoveOutOfServiceTaint, tainted(nil, false), "is not tether's"},
		"the taint removed by another":    {check.RemoveOutOfServiceTaint, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: fencedAnn()}}, "someone else removed it"},
		"an uncordon of another's cordon": {check.UncordonTenantNode, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Unschedulable: true}}, "its cordon is not tether's"},
		"an uncordon under the taint":     {check.UncordonTenantNode, tainted(map[string]string{snapshot.CordonedAnnotation: "y"}, true), "carries the out-of-service taint again"},
	} {
		if _, _, r := fenced(find(c.a), c.node, vm, now); r == nil || r.Outcome != drift.Refused || !strings.Contains(r.Message, c.says) {
			t.Errorf("%s: want refused saying %q, got %+v", name, c.says, r)
		}
	}
	// The uncordon: schedulable again, tether's records gone.
	n, step, r = fenced(find(check.UncordonTenantNode), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Annotations: map[string]string{snapshot.CordonedAnnotation: "y", snapshot.UnfencedAnnotation: now.Format(time.RFC3339)}}, Spec: corev1.NodeSpec{Unschedulable: true}}, vm, now)
	if r != nil || step != stepUncordon || n.Spec.Unschedulable || len(n.Annotations) != 0 {
		t.Fatalf("uncordon: got %s %+v %+v", step, n, r)
	}
}
