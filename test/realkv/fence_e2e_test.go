package realkv

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
// service; the real controllers then delete the pod and detach the volume
// at once. The VM starts again and the node turns Ready: tether removes its
// taint. The times from the VMI's end to the taint and to the attachment
// gone are logged.
func TestReal_tenantNodeDown_endToEnd_realControllersRelease(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.vm("infra")
	g := guest.Start(t, w.ns, "infra")
	scope := []string{"-n", w.ns, "--tenant", "guest-e2e=" + g.CP.Kubeconfig + ":" + w.ns, "--tenant-driver", g.Attacher.Driver(), "--checks", "TenantNodeDown", "--fence-after", "5s"}

	// The VM stops; its VMI ends and goes.
	w.patchVM("infra", `{"spec":{"runStrategy":"Halted"}}`)
	testenv.Eventually(t, 90*time.Second, "VMI infra gone", func() (bool, error) {
		_, err := w.vmi("infra")
		return apierrors.IsNotFound(err), nil
	})
	vmiGone := time.Now()
	// The guest node's kubelet went silent with the volume in use (as the
	// node lifecycle controller marks it); the workload deletes its pod.
	g.SetNode(t, corev1.ConditionUnknown, vmiGone, true)
	g.DeletePod(t)

	// Unfenced, Kubernetes keeps the attachment: nobody confirms the unmount.
	time.Sleep(5 * time.Second)
	if va := g.Attachment(ctx); va == nil || va.DeletionTimestamp != nil {
		t.Fatalf("the attachment went without a fence: %+v", va)
	}

	r := tether(t, w.env, append([]string{"fix", "--apply"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	tainted := time.Now()
	testenv.Eventually(t, 90*time.Second, "the guest's attachment detached and gone", func() (bool, error) {
		return g.Attachment(ctx) == nil, nil
	})
	vaGone := time.Now()
	testenv.Eventually(t, 60*time.Second, "the terminating pod deleted", func() (bool, error) { return g.PodGone(ctx), nil })
	t.Logf("VMI gone -> taint %s (with --fence-after 5s and a 5s look at the unfenced state); taint -> VolumeAttachment gone %s; pod gone %s after the taint",
		tainted.Sub(vmiGone).Round(time.Millisecond), vaGone.Sub(tainted).Round(time.Millisecond), time.Since(tainted).Round(time.Millisecond))

	// Back: the VM runs, the node posts Ready; tether removes its taint.
	w.patchVM("infra", `{"spec":{"runStrategy":"Always"}}`)
	w.running("infra")
	g.SetNode(t, corev1.ConditionTrue, time.Now(), false)
	r = tether(t, w.env, append([]string{"fix", "--apply"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply with the VM back: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if n := testenv.Node(t, g.Client, guest.Node); snapshot.HasOutOfServiceTaint(n) || n.Annotations[snapshot.FencedAnnotation] != "" {
		t.Fatalf("taint left after the VM came back: %v %v", n.Spec.Taints, n.Annotations)
	}
}
