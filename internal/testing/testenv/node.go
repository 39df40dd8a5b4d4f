package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SetNodeReady sets Node name's Ready condition through c, as the node
// lifecycle controller (Unknown or False, when the kubelet went silent) or
// the kubelet (True) would, changed at since.
func SetNodeReady(t testing.TB, c client.Client, name string, status corev1.ConditionStatus, since time.Time) {
	t.Helper()
	n := Node(t, c, name)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(since), LastHeartbeatTime: metav1.NewTime(since)}}
	if err := c.Status().Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

// Node reads Node name through c.
func Node(t testing.TB, c client.Client, name string) *corev1.Node {
	t.Helper()
	var n corev1.Node
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	return &n
}
