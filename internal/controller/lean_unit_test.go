package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/testing/fixture"
)

// The storage reconciler's pod predicate compares what the checks read of a
// pod (podView); the cached pods it compares are lean, and leanCache must
// keep all of that.
func TestLeanCache_keepsThePodView(t *testing.T) {
	done := metav1.NewTime(fixture.Epoch())
	pod := fixture.UserPod("app", fixture.InNamespace("ns"))
	pod.Labels = map[string]string{"app": "db"}
	pod.Annotations = map[string]string{"a": "b"}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	pod.DeletionTimestamp = &done
	pod.Spec.NodeName = "node-1"
	pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "img"}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "i", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: done, Message: "m"}}}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "img", RestartCount: 4, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: done}}}}
	pod.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "e", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "r", Message: "m"}}}}
	want := podView(pod)
	got, err := leanCache(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	lean := got.(*corev1.Pod)
	if v := podView(lean); v != want {
		t.Errorf("podView of the lean pod\n got %s\nwant %s", v, want)
	}
	if lean.Annotations != nil || lean.ManagedFields != nil || lean.Spec.Containers != nil || lean.Status.Conditions != nil {
		t.Errorf("the pod is not lean: %+v", lean)
	}
}

// Kinds Lean does not know lose their managedFields only.
func TestLeanCache_stripsManagedFieldsOfOtherKinds(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Annotations: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	got, err := leanCache(ns)
	if err != nil {
		t.Fatal(err)
	}
	if n := got.(*corev1.Namespace); n.ManagedFields != nil || n.Annotations["a"] != "b" {
		t.Errorf("got %+v", n.ObjectMeta)
	}
}
