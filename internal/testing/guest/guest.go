// Package guest starts a guest (tenant) cluster for the end-to-end tests of
// fencing: a control plane whose kube-controller-manager runs the real
// attach/detach and pod garbage-collection controllers, the CSI attacher
// played in it (package fakeattacher), and a workload: a Node that is an
// infra VM, a claim of the attacher's driver bound to a PV, and a running
// pod using it on that Node, attached. There is no kubelet: the tests play
// its part (and the node lifecycle controller's) through SetNode.
package guest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
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

// The workload's names.
const (
	Node   = "guest-node"
	PV     = "pv-data"
	Claim  = "data"
	Pod    = "app"
	Handle = "dv-data"
)

// Cluster is a running guest cluster; its processes stop when the test
// ends.
type Cluster struct {
	CP       *controlplane.ControlPlane
	Attacher *fakeattacher.Attacher
	Client   client.Client
	// InUse is the workload's volume as the kubelet reports it in use.
	InUse []corev1.UniqueVolumeName
}

// Start starts the guest cluster and its workload on Node, the infra VM
// infraNS/vm, and waits until the workload's attachment is attached.
func Start(t testing.TB, infraNS, vm string) *Cluster {
	t.Helper()
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{ControllerManager: true,
		Controllers: []string{"persistentvolume-attach-detach-controller", "pod-garbage-collector-controller"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	att, err := fakeattacher.Start(ctx, fakeattacher.Options{Config: cp.Config})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(att.Stop)
	c, err := clients.New(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	g := &Cluster{CP: cp, Attacher: att, Client: c,
		InUse: []corev1.UniqueVolumeName{corev1.UniqueVolumeName("kubernetes.io/csi/" + att.Driver() + "^" + Handle)}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	node := fixture.TenantNodeObject(Node, infraNS, vm)
	node.Annotations[snapshot.ControllerManagedAttachAnnotation] = "true"
	node.SetUID("")
	must(c.Create(ctx, node))
	g.SetNode(t, corev1.ConditionTrue, time.Now(), false)
	q := resource.MustParse("1Gi")
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: Claim},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}}, VolumeName: PV}}
	must(c.Create(ctx, pvc))
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: PV},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: q},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: Claim, UID: pvc.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: att.Driver(), VolumeHandle: Handle}}}}
	must(c.Create(ctx, pv))
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pvc.Spec.AccessModes, Capacity: corev1.ResourceList{corev1.ResourceStorage: q}}
	must(c.Status().Update(ctx, pvc))
	g.RunPod(t)
	return g
}

// RunPod creates the workload's pod on Node, running (as the kubelet would
// report it), waits until its volume is attached there, and reports the
// volume in use, as the kubelet does once it mounted it.
func (g *Cluster) RunPod(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: Pod},
		Spec: corev1.PodSpec{NodeName: Node, Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:test"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: Claim}}}}}}
	if err := g.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.invalid/app:test",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
	if err := g.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 90*time.Second, "the guest's attachment attached", func() (bool, error) {
		va := g.Attachment(ctx)
		return va != nil && va.Status.Attached && va.DeletionTimestamp == nil, nil
	})
	g.SetNode(t, corev1.ConditionTrue, time.Now(), true)
}

// SetNode sets Node's Ready condition, changed at since, as its kubelet
// (True) or the node lifecycle controller (Unknown, once the kubelet went
// silent) would, with the workload's volume in use or not.
func (g *Cluster) SetNode(t testing.TB, status corev1.ConditionStatus, since time.Time, inUse bool) {
	t.Helper()
	n := testenv.Node(t, g.Client, Node)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test", LastHeartbeatTime: metav1.NewTime(since), LastTransitionTime: metav1.NewTime(since)}}
	n.Status.VolumesInUse = nil
	if inUse {
		n.Status.VolumesInUse = g.InUse
	}
	if err := g.Client.Status().Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

// DeletePod deletes the workload's pod gracefully, as its owner would: on
// a node nobody runs, it stays terminating until the node is fenced.
func (g *Cluster) DeletePod(t testing.TB) {
	t.Helper()
	if err := g.Client.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: Pod}}, client.GracePeriodSeconds(30)); err != nil {
		t.Fatal(err)
	}
}

// Attachment is the guest's VolumeAttachment of the workload's PV, or nil.
func (g *Cluster) Attachment(ctx context.Context) *storagev1.VolumeAttachment {
	var list storagev1.VolumeAttachmentList
	if err := g.Client.List(ctx, &list); err != nil {
		return nil
	}
	for i := range list.Items {
		if pv := list.Items[i].Spec.Source.PersistentVolumeName; pv != nil && *pv == PV {
			return &list.Items[i]
		}
	}
	return nil
}

// PodGone reports whether the workload's pod is gone.
func (g *Cluster) PodGone(ctx context.Context) bool {
	err := g.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: Pod}, &corev1.Pod{})
	return client.IgnoreNotFound(err) == nil && err != nil
}
