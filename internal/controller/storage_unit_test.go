package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestPodFieldsChanged(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "db"}},
			Spec: corev1.PodSpec{NodeName: "n1", Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
		}
	}
	now := metav1.Now()
	for _, c := range []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{"a condition, an IP, a restart count -> no pass", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			p.Status.PodIP = "10.0.0.9"
			p.Status.ContainerStatuses[0].RestartCount = 3
		}, false},
		{"phase -> pass", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, true},
		{"node -> pass", func(p *corev1.Pod) { p.Spec.NodeName = "n2" }, true},
		{"deletion -> pass", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, true},
		{"a label -> pass", func(p *corev1.Pod) { p.Labels["tier"] = "x" }, true},
		{"a claim -> pass", func(p *corev1.Pod) { p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "other" }, true},
		{"a container stops -> pass", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: now}}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			old, upd := base(), base()
			c.change(upd)
			if got := podFieldsChanged().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: upd}); got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}
