package act_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/testing/emulator"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// migrated plants, on the real API server, what a storage live migration of
// VMI name from node-1 to node-2 leaves: a standalone VMI (left alone by
// the emulator) whose volume names claim name-dst and whose migration state
// is completed, and its finished source launcher pod naming name-src.
// Returns the pod as created.
func (s *scene) migrated(name string) *corev1.Pod {
	s.t.Helper()
	vmi := fixture.VMI(name, fixture.WithVolume("disk", fixture.PVC(name+"-dst")))
	vmi.Annotations = map[string]string{emulator.PausedAnnotation: "true"}
	vmi.Status = kubevirtv1.VirtualMachineInstanceStatus{}
	s.create(vmi)
	src := s.sourcePod(name, vmi, corev1.PodSucceeded)
	end := metav1.NewTime(time.Now())
	vmi.Status = kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: "node-2",
		ActivePods: map[types.UID]string{"target-uid": "node-2"},
		MigrationState: &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: "mig-" + types.UID(name),
			SourceNode: "node-1", TargetNode: "node-2", SourcePod: src.Name, TargetPod: "virt-launcher-" + name + "-tgt",
			EndTimestamp: &end, Completed: true}}
	if err := s.c.Update(s.ctx, vmi); err != nil {
		s.t.Fatalf("VMI status: %v", err)
	}
	return src
}

// sourcePod creates the VMI's source launcher pod on node-1 in phase.
func (s *scene) sourcePod(name string, vmi *kubevirtv1.VirtualMachineInstance, phase corev1.PodPhase) *corev1.Pod {
	s.t.Helper()
	pod := fixture.UserPod("virt-launcher-"+name+"-src", fixture.BoundTo("node-1"), fixture.Claims(name+"-src"),
		fixture.Labels("kubevirt.io/created-by", string(vmi.UID)), fixture.Owner("kubevirt.io/v1", "VirtualMachineInstance", vmi.Name, vmi.UID, true))
	pod.Spec.Containers[0].Name = "compute"
	s.create(pod)
	pod.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "compute", Image: pod.Spec.Containers[0].Image}}}
	if phase == corev1.PodSucceeded {
		pod.Status.ContainerStatuses[0].State.Terminated = &corev1.ContainerStateTerminated{Reason: "Completed", FinishedAt: metav1.NewTime(time.Now())}
	} else {
		pod.Status.ContainerStatuses[0].State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now())}
	}
	if err := s.c.Status().Update(s.ctx, pod); err != nil {
		s.t.Fatalf("pod status: %v", err)
	}
	return pod
}

// sourcePodFinding plans MigrationSourcePodLeftover for the scene's pod.
func (s *scene) sourcePodFinding(p check.Policy, pod string) drift.Finding {
	s.t.Helper()
	snap, err := observe.Observe(s.ctx, s.c, observe.Options{Namespace: s.ns})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, f := range check.Run(snap, p, time.Now()) {
		if f.Check == check.MigrationSourcePodLeftover && f.Object.Name == pod {
			return f
		}
	}
	s.t.Fatalf("no MigrationSourcePodLeftover finding for %s/%s", s.ns, pod)
	return drift.Finding{}
}

func (s *scene) podExists(name string) bool {
	var pod corev1.Pod
	err := s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, &pod)
	if err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatal(err)
	}
	return err == nil && pod.DeletionTimestamp == nil
}

func asked() check.Policy {
	p := policy()
	p.DeleteMigrationSourcePods = true
	return p
}

// The finished source pod is deleted only on request, through the live
// re-check, dry run and preconditions, with its Event.
func TestApply_migrationSourcePod(t *testing.T) {
	s := newScene(t)
	pod := s.migrated("ms-ok")
	if f := s.sourcePodFinding(policy(), pod.Name); f.Action.Safe || f.Action.BlockedBy != drift.NotRequested {
		t.Fatalf("without the request: want blocked by NotRequested, got %+v", f.Action)
	}
	f := s.sourcePodFinding(asked(), pod.Name)
	r := s.executor(asked(), observe.Options{}).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Applied {
		t.Fatalf("want Applied, got %s: %s (%v)", r.Outcome, r.Message, r.Err)
	}
	if s.podExists(pod.Name) {
		t.Fatal("source pod not deleted")
	}
	var found bool
	for _, ev := range s.events(f.ID) {
		found = found || ev.Reason == check.ReasonMigrationSourcePodDeleted
	}
	if !found {
		t.Errorf("no %s Event", check.ReasonMigrationSourcePodDeleted)
	}
}

// Between plan and apply the world changes: each change is refused and the
// pod stays.
func TestApply_migrationSourcePod_refused(t *testing.T) {
	cases := []struct {
		name   string
		change func(s *scene, name string, pod *corev1.Pod)
		why    string
	}{
		{"pod running again -> refused", func(s *scene, _ string, pod *corev1.Pod) {
			pod.Status.Phase = corev1.PodRunning
			pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now())}}
			if err := s.c.Status().Update(s.ctx, pod); err != nil {
				s.t.Fatal(err)
			}
		}, ""},
		{"pod replaced (new uid) -> refused", func(s *scene, name string, pod *corev1.Pod) {
			if err := s.c.Delete(s.ctx, pod); err != nil {
				s.t.Fatal(err)
			}
			s.sourcePod(name, s.vmi(name), corev1.PodSucceeded)
		}, "re-created"},
		{"VMI back on the source node -> refused", func(s *scene, name string, _ *corev1.Pod) {
			vmi := s.vmi(name)
			vmi.Status.NodeName = "node-1"
			if err := s.c.Update(s.ctx, vmi); err != nil {
				s.t.Fatal(err)
			}
		}, ""},
		{"VMI gone -> refused", func(s *scene, name string, _ *corev1.Pod) {
			if err := s.c.Delete(s.ctx, s.vmi(name)); err != nil {
				s.t.Fatal(err)
			}
		}, ""},
		{"migration state cleared -> refused", func(s *scene, name string, _ *corev1.Pod) {
			vmi := s.vmi(name)
			vmi.Status.MigrationState = nil
			if err := s.c.Update(s.ctx, vmi); err != nil {
				s.t.Fatal(err)
			}
		}, ""},
	}
	s := newScene(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.t = t
			name := "ms-" + string(rune('a'+i))
			pod := s.migrated(name)
			f := s.sourcePodFinding(asked(), pod.Name)
			var live corev1.Pod
			if err := s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: pod.Name}, &live); err != nil {
				t.Fatal(err)
			}
			tc.change(s, name, &live)
			r := s.executor(asked(), observe.Options{}).Apply(s.ctx, f, act.Evidence{})
			if r.Outcome != drift.Refused || !strings.Contains(r.Message, tc.why) {
				t.Fatalf("want Refused (%q), got %s: %s (%v)", tc.why, r.Outcome, r.Message, r.Err)
			}
			if !s.podExists(pod.Name) {
				t.Fatal("the pod was deleted")
			}
		})
	}
}
