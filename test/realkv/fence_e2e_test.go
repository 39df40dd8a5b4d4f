package realkv

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/controlplane"
	"github.com/tether-dev/tether/internal/testing/fakeattacher"
	"github.com/tether-dev/tether/internal/testing/fixture"
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
	guest, err := controlplane.Start(ctx, controlplane.Options{ControllerManager: true,
		Controllers: []string{"persistentvolume-attach-detach-controller", "pod-garbage-collector-controller"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(guest.Stop)
	att, err := fakeattacher.Start(ctx, fakeattacher.Options{Config: guest.Config})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(att.Stop)
	gc, err := clients.New(guest.Config)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	w.vm("infra")
	// The guest: its node is infra VM w.ns/infra, under the attach/detach
	// controller; a claim of the attacher's driver; a running pod using it.
	node := fixture.TenantNodeObject("guest-node", w.ns, "infra")
	node.Annotations[snapshot.ControllerManagedAttachAnnotation] = "true"
	node.SetUID("")
	must(gc.Create(ctx, node))
	setGuestNode(t, gc, "guest-node", corev1.ConditionTrue, time.Now(), nil)
	q := resource.MustParse("1Gi")
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}}, VolumeName: "pv-data"}}
	must(gc.Create(ctx, pvc))
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: q},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: "data", UID: pvc.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: att.Driver(), VolumeHandle: "dv-data"}}}}
	must(gc.Create(ctx, pv))
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pvc.Spec.AccessModes, Capacity: corev1.ResourceList{corev1.ResourceStorage: q}}
	must(gc.Status().Update(ctx, pvc))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"},
		Spec: corev1.PodSpec{NodeName: "guest-node", Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:test"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	must(gc.Create(ctx, pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.invalid/app:test",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
	must(gc.Status().Update(ctx, pod))
	testenv.Eventually(t, 90*time.Second, "the guest's attachment attached", func() (bool, error) {
		va := guestAttachment(ctx, gc)
		return va != nil && va.Status.Attached, nil
	})
	inUse := []corev1.UniqueVolumeName{corev1.UniqueVolumeName("kubernetes.io/csi/" + att.Driver() + "^dv-data")}
	setGuestNode(t, gc, "guest-node", corev1.ConditionTrue, time.Now(), inUse)

	scope := []string{"-n", w.ns, "--tenant", "guest-e2e=" + guest.Kubeconfig + ":" + w.ns, "--tenant-driver", att.Driver(), "--checks", "TenantNodeDown", "--fence-after", "5s"}

	// The VM stops; its VMI ends and goes.
	w.patchVM("infra", `{"spec":{"runStrategy":"Halted"}}`)
	testenv.Eventually(t, 90*time.Second, "VMI infra gone", func() (bool, error) {
		_, err := w.vmi("infra")
		return apierrors.IsNotFound(err), nil
	})
	vmiGone := time.Now()
	// The guest node's kubelet went silent with the volume in use (as the
	// node lifecycle controller marks it); the workload deletes its pod.
	setGuestNode(t, gc, "guest-node", corev1.ConditionUnknown, vmiGone, inUse)
	must(gc.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"}}, client.GracePeriodSeconds(30)))

	// Unfenced, Kubernetes keeps the attachment: nobody confirms the unmount.
	time.Sleep(5 * time.Second)
	if va := guestAttachment(ctx, gc); va == nil || va.DeletionTimestamp != nil {
		t.Fatalf("the attachment went without a fence: %+v", va)
	}

	r := tether(t, w.env, append([]string{"fix", "--apply"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	tainted := time.Now()
	testenv.Eventually(t, 90*time.Second, "the guest's attachment detached and gone", func() (bool, error) {
		return guestAttachment(ctx, gc) == nil, nil
	})
	vaGone := time.Now()
	testenv.Eventually(t, 60*time.Second, "the terminating pod deleted", func() (bool, error) {
		err := gc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "app"}, &corev1.Pod{})
		return apierrors.IsNotFound(err), nil
	})
	t.Logf("VMI gone -> taint %s (with --fence-after 5s and a 5s look at the unfenced state); taint -> VolumeAttachment gone %s; pod gone %s after the taint",
		tainted.Sub(vmiGone).Round(time.Millisecond), vaGone.Sub(tainted).Round(time.Millisecond), time.Since(tainted).Round(time.Millisecond))

	// Back: the VM runs, the node posts Ready; tether removes its taint.
	w.patchVM("infra", `{"spec":{"runStrategy":"Always"}}`)
	w.running("infra")
	setGuestNode(t, gc, "guest-node", corev1.ConditionTrue, time.Now(), nil)
	r = tether(t, w.env, append([]string{"fix", "--apply"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply with the VM back: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	var n corev1.Node
	must(gc.Get(ctx, client.ObjectKey{Name: "guest-node"}, &n))
	if snapshot.HasOutOfServiceTaint(&n) || n.Annotations[snapshot.FencedAnnotation] != "" {
		t.Fatalf("taint left after the VM came back: %v %v", n.Spec.Taints, n.Annotations)
	}
}

func setGuestNode(t *testing.T, c client.Client, name string, status corev1.ConditionStatus, since time.Time, inUse []corev1.UniqueVolumeName) {
	t.Helper()
	var n corev1.Node
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test", LastHeartbeatTime: metav1.NewTime(since), LastTransitionTime: metav1.NewTime(since)}}
	n.Status.VolumesInUse = inUse
	if err := c.Status().Update(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
}

// guestAttachment is the guest's VolumeAttachment of pv-data, or nil.
func guestAttachment(ctx context.Context, c client.Client) *storagev1.VolumeAttachment {
	var list storagev1.VolumeAttachmentList
	if err := c.List(ctx, &list); err != nil {
		return nil
	}
	for i := range list.Items {
		if pv := list.Items[i].Spec.Source.PersistentVolumeName; pv != nil && *pv == "pv-data" {
			return &list.Items[i]
		}
	}
	return nil
}
