package realkv

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/guest"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// End to end: a guest cluster whose kube-controller-manager runs the real
// attach/detach and pod garbage-collection controllers, with the CSI
// attacher played in it, has a pod using a claim on a node that is an infra
// VM on real KubeVirt. The VM stops; the guest's kubelet (played: there is
// none) last reported the volume in use, and the workload's pod is deleted.
// Without a fence Kubernetes keeps the attachment (it waits six minutes for
// an unmount nobody will confirm). tether fix taints the node out of
// service; the real controllers then delete the pod and start the detach at
// once, which the attacher holds (a detach in flight). The VM starts again
// and the node turns Ready: tether keeps the taint while the detach is in
// flight (KEP-2268: the taint goes once the volumes are detached), then
// cordons the node and removes the taint, keeps the node cordoned for
// --unfence-settle and uncordons it. The workload's pod then runs on the
// recovered node again and its new attachment is never deleted. The times
// are logged.
func TestReal_tenantNodeDown_endToEnd_realControllersRelease(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.vm("infra")
	g := guest.Start(t, w.NS, "infra")
	scope := []string{"-n", w.NS, "--tenant", "guest-e2e=" + g.CP.Kubeconfig + ":" + w.NS, "--tenant-driver", g.Attacher.Driver(), "--checks", "TenantNodeDown",
		"--fence-after", "5s", "--unfence-settle", "5s"}
	fix := func() string {
		t.Helper()
		r := tether(t, w.Env, append([]string{"fix", "--apply"}, scope...)...)
		if r.Code > 1 {
			t.Fatalf("fix --apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		return r.Stdout + r.Stderr
	}

	// The VM stops; its VMI ends and goes.
	w.PatchVM("infra", `{"spec":{"runStrategy":"Halted"}}`)
	testenv.Eventually(t, 90*time.Second, "VMI infra gone", func() (bool, error) {
		_, err := w.vmi("infra")
		return apierrors.IsNotFound(err), nil
	})
	vmiGone := time.Now()
	// The guest node's kubelet went silent with the volume in use (as the
	// node lifecycle controller marks it); the workload deletes its pod.
	g.SetNode(t, corev1.ConditionUnknown, vmiGone, true)
	g.DeletePod(t)
	// The storage side of the node is unreachable too: a detach started
	// there does not complete until it is back.
	g.Attacher.Hang(guest.Node)

	// Unfenced, Kubernetes keeps the attachment: nobody confirms the unmount.
	time.Sleep(5 * time.Second)
	if va := g.Attachment(ctx); va == nil || va.DeletionTimestamp != nil {
		t.Fatalf("the attachment went without a fence: %+v", va)
	}

	if out := fix(); !strings.Contains(out, "Applied") {
		t.Fatalf("fix --apply did not fence:\n%s", out)
	}
	tainted := time.Now()
	testenv.Eventually(t, 90*time.Second, "the detach started (the attachment being deleted)", func() (bool, error) {
		va := g.Attachment(ctx)
		return va != nil && va.DeletionTimestamp != nil, nil
	})
	detaching := time.Now()
	testenv.Eventually(t, 60*time.Second, "the terminating pod deleted", func() (bool, error) { return g.PodGone(ctx), nil })

	// Back: the VM runs, the node posts Ready, the detach still in flight.
	w.PatchVM("infra", `{"spec":{"runStrategy":"Always"}}`)
	w.running("infra")
	g.SetNode(t, corev1.ConditionTrue, time.Now(), false)
	for i := 0; i < 2; i++ {
		out := fix()
		n := testenv.Node(t, g.Client, guest.Node)
		if !snapshot.HasOutOfServiceTaint(n) || n.Spec.Unschedulable || strings.Contains(out, "Applied") {
			t.Fatalf("the fence was touched while a detach of the node was in flight:\n%s\ntaints %v, unschedulable %v", out, n.Spec.Taints, n.Spec.Unschedulable)
		}
		if !strings.Contains(out, string(check.TenantNodeReleasing)) {
			t.Fatalf("fix --apply does not say what it waits for:\n%s", out)
		}
		time.Sleep(time.Second)
	}

	// The detach completes: tether cordons, then lifts the taint.
	g.Attacher.Release(guest.Node)
	testenv.Eventually(t, 60*time.Second, "the detach done (the attachment gone)", func() (bool, error) { return g.Attachment(ctx) == nil, nil })
	released := time.Now()
	out := fix()
	n := testenv.Node(t, g.Client, guest.Node)
	if !strings.Contains(out, "Applied") || snapshot.HasOutOfServiceTaint(n) || n.Annotations[snapshot.FencedAnnotation] != "" ||
		!n.Spec.Unschedulable || n.Annotations[snapshot.CordonedAnnotation] == "" || n.Annotations[snapshot.UnfencedAnnotation] == "" {
		t.Fatalf("after the detach, fix --apply must cordon and remove the taint:\n%s\ntaints %v, unschedulable %v, annotations %v", out, n.Spec.Taints, n.Spec.Unschedulable, n.Annotations)
	}
	untainted := time.Now()
	// Within the settle time it stays cordoned.
	if out := fix(); strings.Contains(out, "Applied") || !testenv.Node(t, g.Client, guest.Node).Spec.Unschedulable || !strings.Contains(out, string(check.UnfenceSettling)) {
		t.Fatalf("uncordoned within --unfence-settle:\n%s", out)
	}
	time.Sleep(6 * time.Second)
	if out := fix(); !strings.Contains(out, "Applied") {
		t.Fatalf("fix --apply after --unfence-settle did not uncordon:\n%s", out)
	}
	n = testenv.Node(t, g.Client, guest.Node)
	if n.Spec.Unschedulable || n.Annotations[snapshot.CordonedAnnotation] != "" || n.Annotations[snapshot.UnfencedAnnotation] != "" || snapshot.HasOutOfServiceTaint(n) {
		t.Fatalf("after the un-fence: unschedulable %v, taints %v, annotations %v", n.Spec.Unschedulable, n.Spec.Taints, n.Annotations)
	}
	t.Logf("VMI gone -> taint %s (--fence-after 5s and a 5s look at the unfenced state); taint -> detach started %s; detach done -> cordon and taint removed %s; uncordoned %s later (--unfence-settle 5s)",
		tainted.Sub(vmiGone).Round(time.Millisecond), detaching.Sub(tainted).Round(time.Millisecond), untainted.Sub(released).Round(time.Millisecond), time.Since(untainted).Round(time.Millisecond))

	// The workload runs on the recovered node again: its new attachment
	// stays (the real controllers saw no taint to force a detach by).
	g.RunPod(t)
	va := g.Attachment(ctx)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		now := g.Attachment(ctx)
		if now == nil || now.UID != va.UID || now.DeletionTimestamp != nil || !now.Status.Attached {
			t.Fatalf("the attachment of the pod running on the recovered node was detached or deleted: %+v", now)
		}
	}
	if out := fix(); strings.Contains(out, "Applied") {
		t.Fatalf("fix --apply acted on a healthy node:\n%s", out)
	}
}
