package fakeattacher_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// A pod moves to another node while the old node is partitioned (NotReady,
// its kubelet's last report still lists the volume in use, no taint): the
// stale attachment and the waiting pod are reported, and nothing is done.
// Once an operator applies the out-of-service taint, tether force-deletes
// the pod stuck on the old node, the real attach/detach controller
// detaches, and the new attachment proceeds.
func TestPartitionedNode_reportedThenRemediatedWhenFenced(t *testing.T) {
	w := newWorld(t)
	oldNode, newNode := w.ns+"-a", w.ns+"-b"
	w.node(newNode)
	pv, _ := w.attachedPod("old", oldNode)

	// Partition: the node stops reporting; its last report had the volume
	// mounted. The workload deletes the old pod (it stays Terminating: no
	// kubelet confirms) and starts a new one elsewhere.
	w.partition(oldNode, pv, "old")
	time.Sleep(2 * time.Second)
	w.pod("new", newNode, corev1.PodPending)

	stale := w.audit(check.StaleVolumeAttachment, w.policy())
	if len(stale) != 1 || stale[0].Action.Safe || stale[0].Action.BlockedBy != check.NodeNotFenced || stale[0].Action.Type != check.DeletePodsOnFencedNode {
		t.Fatalf("partitioned node: want one StaleVolumeAttachment blocked by NodeNotFenced, got %+v", stale)
	}
	if ev := evidence(stale[0]); !strings.Contains(ev, "Ready=Unknown") || !strings.Contains(ev, "stuck terminating") {
		t.Errorf("evidence does not say why:\n%s", ev)
	}
	multi := w.audit(check.MultiAttachConflict, w.policy())
	if len(multi) != 1 || multi[0].Object.Name != "new" || !strings.Contains(evidence(multi[0]), "used there by pod(s) old") {
		t.Fatalf("want the waiting pod reported with its holder, got %+v", multi)
	}
	exec, err := act.NewExecutor(w.env.Config, w.policy(), observe.Options{})
	w.must(err)
	if r := exec.Apply(w.ctx, stale[0], act.Evidence{}); r.Outcome != drift.Refused {
		t.Fatalf("unfenced node: want Refused, got %+v", r)
	}
	w.attachment(pv, oldNode, true) // still there

	// Fencing: the operator asserts that the node is down.
	w.taintOutOfService(oldNode)

	stale = w.audit(check.StaleVolumeAttachment, w.policy())
	if len(stale) != 1 || !stale[0].Action.Safe || stale[0].Action.Type != check.DeletePodsOnFencedNode {
		t.Fatalf("fenced node: want a safe DeletePodsOnFencedNode, got %+v", stale)
	}
	if r := exec.Apply(w.ctx, stale[0], act.Evidence{}); r.Outcome != drift.Applied {
		t.Fatalf("fenced node: want Applied, got %+v", r)
	}
	w.attachment(pv, newNode, true)
	testenv.Eventually(t, 60*time.Second, "the old attachment to go", func() (bool, error) {
		return len(w.audit(check.StaleVolumeAttachment, w.policy())) == 0, nil
	})
}

// A node object deleted under an attached volume: reported, with the node
// named as gone; not remediated (how long it has been gone is unknown).
func TestNodeDeleted_reportedWithEvidence(t *testing.T) {
	w := newWorld(t)
	node := w.ns + "-c"
	_, va := w.attachedPod("app", node)
	w.must(w.c.Delete(w.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
	testenv.Eventually(t, 30*time.Second, "the node to go", func() (bool, error) {
		err := w.c.Get(w.ctx, client.ObjectKey{Name: node}, &corev1.Node{})
		return apierrors.IsNotFound(err), nil
	})
	stale := w.audit(check.StaleVolumeAttachment, w.policy())
	if len(stale) != 1 || stale[0].Object.Name != va.Name {
		t.Fatalf("want one finding on %s, got %+v", va.Name, stale)
	}
	f := stale[0]
	if f.Action.Safe || f.Action.BlockedBy != check.NodeNotFenced || !strings.Contains(evidence(f), "node "+node+" does not exist") ||
		!strings.Contains(evidence(f), "pod "+w.ns+"/app is still bound to the missing node") {
		t.Fatalf("want node-gone evidence and no action, got %+v", f)
	}
}

// A PVC deleted while a finished (never deleted) pod references it stays
// Terminating on kubernetes.io/pvc-protection; BlockedDeletion names the pod.
func TestPVCHeldByFinishedPod(t *testing.T) {
	w := newWorld(t)
	w.volume(w.ns + "-pv")
	w.pod("job", w.ns+"-nowhere", corev1.PodSucceeded)
	pvc := &corev1.PersistentVolumeClaim{}
	w.must(w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "data"}, pvc))
	w.must(w.c.Delete(w.ctx, pvc))
	var found []drift.Finding
	testenv.Eventually(t, 30*time.Second, "BlockedDeletion of the claim", func() (bool, error) {
		found = w.audit(check.BlockedDeletion, w.policy())
		return len(found) > 0, nil
	})
	f := found[0]
	if f.Object.Name != "data" || f.Action.BlockedBy != check.HeldByUsers ||
		!strings.Contains(evidence(f), "pod job (phase Succeeded, finished)") || !strings.Contains(f.Action.Remedy, "kubectl delete pod job -n "+w.ns) {
		t.Fatalf("want the finished pod named with its remedy, got %+v", f)
	}
	// Deleting the pod releases the claim: the PVC protection controller does
	// its job and the finding goes.
	w.must(w.c.Delete(w.ctx, w.podRef("job"), client.GracePeriodSeconds(0)))
	testenv.Eventually(t, 60*time.Second, "the claim to go", func() (bool, error) {
		err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "data"}, &corev1.PersistentVolumeClaim{})
		return apierrors.IsNotFound(err), nil
	})
}

func (w *world) podRef(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
}
