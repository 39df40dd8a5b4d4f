package fakeattacher_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fakeattacher"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{ControllerManager: true, Attacher: true})
}

// world is one test's cluster-side helpers.
type world struct {
	t   *testing.T
	env *testenv.Env
	c   client.Client
	ns  string
	ctx context.Context
}

func newWorld(t *testing.T) *world {
	env := testenv.Get(t)
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, env: env, c: c, ns: env.Namespace(t), ctx: context.Background()}
}

func (w *world) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// node creates a Node managed by the attach/detach controller and sets its
// Ready condition; the test owns it (the KubeVirt emulator keeps only its
// own node-1/node-2 Ready).
func (w *world) node(name string) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{snapshot.ControllerManagedAttachAnnotation: "true"}}}
	w.must(w.c.Create(w.ctx, n))
	w.t.Cleanup(func() { _ = w.c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}) })
	w.setReady(name, corev1.ConditionTrue, nil)
}

func (w *world) setReady(name string, status corev1.ConditionStatus, inUse []corev1.UniqueVolumeName) {
	var n corev1.Node
	w.must(w.c.Get(w.ctx, client.ObjectKey{Name: name}, &n))
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test", LastHeartbeatTime: now, LastTransitionTime: now}}
	n.Status.VolumesInUse = inUse
	w.must(w.c.Status().Update(w.ctx, &n))
}

// volume creates PV pv (driver of the attacher, ReadWriteOnce) bound to
// claim data in the test namespace, with the claim Bound.
func (w *world) volume(pv string) {
	q := resource.MustParse("1Gi")
	p := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pv},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: q},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: w.ns, Name: "data"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: fakeattacher.DefaultDriver, VolumeHandle: "h-" + pv}},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
			VolumeName:  pv,
		},
	}
	w.must(w.c.Create(w.ctx, pvc))
	p.Spec.ClaimRef.UID = pvc.UID // the attach/detach controller checks it
	w.must(w.c.Create(w.ctx, p))
	w.t.Cleanup(func() {
		_ = w.c.Delete(context.Background(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv}})
	})
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pvc.Spec.AccessModes, Capacity: corev1.ResourceList{corev1.ResourceStorage: q}}
	w.must(w.c.Status().Update(w.ctx, pvc))
}

// pod creates a pod on node using claim data, with the status a kubelet
// would report: phase, and its container running or finished.
func (w *world) pod(name, node string, phase corev1.PodPhase) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:test"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	}
	w.must(w.c.Create(w.ctx, p))
	st := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	if phase == corev1.PodSucceeded {
		st = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", FinishedAt: metav1.Now()}}
	}
	p.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.invalid/app:test", State: st}}}
	w.must(w.c.Status().Update(w.ctx, p))
}

// attachment waits for the VolumeAttachment of pv to node and returns it
// once attached=want.
func (w *world) attachment(pv, node string, want bool) *storagev1.VolumeAttachment {
	w.t.Helper()
	var found *storagev1.VolumeAttachment
	testenv.Eventually(w.t, 90*time.Second, "VolumeAttachment of "+pv+" to "+node, func() (bool, error) {
		var list storagev1.VolumeAttachmentList
		if err := w.c.List(w.ctx, &list); err != nil {
			return false, err
		}
		for i := range list.Items {
			va := &list.Items[i]
			if va.Spec.NodeName == node && va.Spec.Source.PersistentVolumeName != nil && *va.Spec.Source.PersistentVolumeName == pv && va.Status.Attached == want {
				found = va
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// attachedPod creates node, the volume ns-pv bound to claim data, and pod
// on node using it, and returns the PV's name and its attachment once
// attached.
func (w *world) attachedPod(pod, node string) (string, *storagev1.VolumeAttachment) {
	w.t.Helper()
	pv := w.ns + "-pv"
	w.node(node)
	w.volume(pv)
	w.pod(pod, node, corev1.PodRunning)
	return pv, w.attachment(pv, node, true)
}

// partition makes node stop reporting (its last report had volume pv in
// use) and deletes pod there: with no kubelet to confirm, it stays
// Terminating and keeps the attachment desired.
func (w *world) partition(node, pv, pod string) {
	w.t.Helper()
	w.setReady(node, corev1.ConditionUnknown, []corev1.UniqueVolumeName{uniqueVolume(pv)})
	w.must(w.c.Delete(w.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: pod}}, client.GracePeriodSeconds(1)))
}

// taintOutOfService is the operator's assertion that node is down.
func (w *world) taintOutOfService(node string) {
	w.t.Helper()
	var n corev1.Node
	w.must(w.c.Get(w.ctx, client.ObjectKey{Name: node}, &n))
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: snapshot.OutOfServiceTaint, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	w.must(w.c.Update(w.ctx, &n))
}

func (w *world) policy() check.Policy {
	p := check.DefaultPolicy()
	p.Scope.Namespaces = []string{w.ns}
	p.Storage.StaleAttachmentGrace = time.Nanosecond
	p.Storage.MultiAttachGrace = time.Nanosecond
	p.Storage.BlockedDeletionGrace = time.Nanosecond
	return p
}

// audit observes the cluster and returns the findings of check.
func (w *world) audit(name string, p check.Policy) []drift.Finding {
	w.t.Helper()
	s, err := observe.Observe(w.ctx, w.c, observe.Options{})
	w.must(err)
	var out []drift.Finding
	for _, f := range check.Run(s, p, time.Now()) {
		if f.Check == name {
			out = append(out, f)
		}
	}
	return out
}

func evidence(f drift.Finding) string { return strings.Join(f.Evidence, "\n") }

func uniqueVolume(pv string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName("kubernetes.io/csi/" + fakeattacher.DefaultDriver + "^h-" + pv)
}
