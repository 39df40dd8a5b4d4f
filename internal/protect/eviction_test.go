package protect_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// evictionWorld is a VMI running on fixture.Node with hot-plug pvc-1
// through attachment pod hp-volume-vm-a, its launcher and that pod, as
// KubeVirt makes them (launcher label and domain annotation, the pod
// owned by the launcher).
func evictionWorld() protect.EvictionFacts {
	vmi := fixture.VMI("vm-a", fixture.WithHotplug("pvc-1"), fixture.WithHotplug("pvc-2"))
	launcher := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fixture.LauncherName(vmi), Namespace: vmi.Namespace, UID: fixture.LauncherUID(vmi),
		Labels: map[string]string{"kubevirt.io": "virt-launcher"}, Annotations: map[string]string{kubevirtv1.DomainAnnotation: vmi.Name}},
		Spec: corev1.PodSpec{NodeName: fixture.Node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	return protect.EvictionFacts{Pod: fixture.AttachmentPod("hp-volume-vm-a", fixture.LaunchedBy(vmi)), Launcher: launcher, VMI: vmi}
}

// TestDecideEviction: the oracle is what a drain must not do
// (kubevirt/kubevirt#13523: an attachment pod evicted while its VMI runs
// on the node takes the disk from the guest) and what it must still be
// able to do: the VMI's migration creates a target launcher and a target
// attachment pod on another node and evicts nothing, and once the VMI runs
// there the source node's pods may go (virt-api's own guard,
// pod-eviction-admitter.go:100-125 at v1.9.0, lets a finished launcher's
// attachment pods go too).
func TestDecideEviction(t *testing.T) {
	gone := metav1.NewTime(fixture.Epoch())
	cases := []struct {
		name    string
		change  func(f *protect.EvictionFacts)
		refused bool
	}{
		{"attachment pod of a VMI running on its node -> refused", func(*protect.EvictionFacts) {}, true},
		{"the VMI has moved to another node (migration done) -> allowed", func(f *protect.EvictionFacts) { f.VMI.Status.NodeName = "node-b" }, false},
		{"the pod is the migration target's, on another node -> allowed", func(f *protect.EvictionFacts) { f.Pod.Spec.NodeName = "node-b" }, false},
		{"the target launcher itself -> allowed (not an attachment pod)", func(f *protect.EvictionFacts) { f.Pod = f.Launcher.DeepCopy(); f.Pod.Spec.NodeName = "node-b" }, false},
		{"the source launcher -> allowed here (KubeVirt decides a launcher's eviction)", func(f *protect.EvictionFacts) { f.Pod = f.Launcher.DeepCopy() }, false},
		{"a plain pod -> allowed", func(f *protect.EvictionFacts) { f.Pod.Labels = map[string]string{"app": "x"} }, false},
		{"launcher finished (the VMI left or stopped) -> allowed", func(f *protect.EvictionFacts) { f.Launcher.Status.Phase = corev1.PodSucceeded }, false},
		{"launcher not found -> allowed", func(f *protect.EvictionFacts) { f.Launcher = nil }, false},
		{"owner is not a launcher -> allowed", func(f *protect.EvictionFacts) { f.Launcher.Labels = map[string]string{"kubevirt.io": "hotplug-disk"} }, false},
		{"pod owned by another launcher -> allowed", func(f *protect.EvictionFacts) { f.Pod.OwnerReferences[0].UID = "other" }, false},
		{"VMI not found -> allowed", func(f *protect.EvictionFacts) { f.VMI = nil }, false},
		{"VMI is another than the launcher's -> allowed", func(f *protect.EvictionFacts) { f.Launcher.Annotations[kubevirtv1.DomainAnnotation] = "vm-b" }, false},
		{"VMI finished -> allowed", func(f *protect.EvictionFacts) { f.VMI.Status.Phase = kubevirtv1.Succeeded }, false},
		{"VMI being deleted -> allowed", func(f *protect.EvictionFacts) { f.VMI.DeletionTimestamp = &gone }, false},
		{"attachment pod being deleted -> allowed", func(f *protect.EvictionFacts) { f.Pod.DeletionTimestamp = &gone }, false},
		{"attachment pod finished -> allowed", func(f *protect.EvictionFacts) { f.Pod.Status.Phase = corev1.PodFailed }, false},
		{"pod not found -> allowed", func(f *protect.EvictionFacts) { f.Pod = nil }, false},
		{"pod not scheduled -> allowed", func(f *protect.EvictionFacts) { f.Pod.Spec.NodeName = "" }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := evictionWorld()
			c.change(&f)
			v := protect.DecideEviction(f)
			if v.Allowed == c.refused {
				t.Fatalf("allowed %v, want refused %v: %+v", v.Allowed, c.refused, v)
			}
			if !c.refused {
				return
			}
			for _, want := range []string{"hp-volume-vm-a", "hot-plug(s) pvc-1, pvc-2", "VMI " + fixture.Namespace + "/vm-a", "still runs on node " + fixture.Node, "virtctl migrate vm-a -n " + fixture.Namespace, "kubevirt/kubevirt#13523"} {
				if !strings.Contains(v.Message, want) {
					t.Errorf("message lacks %q: %s", want, v.Message)
				}
			}
		})
	}
}
