package check

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// volumeMigrated builds the state KubeVirt leaves after a storage live
// migration of VMI name from node-1 to node-2: the VMI's volume names the
// destination claim name+"-dst", its migration state is completed, and the
// source launcher pod (created-by the VMI, on node-1, naming the source
// claim name+"-src") has Succeeded. The oracle is KubeVirt's record of a
// migration (status.migrationState, status.activePods, the launcher's
// created-by label) and PVC protection's rule that a scheduled pod naming
// a claim uses it even when it has finished.
func volumeMigrated(name string, opts ...f.Option) (*kubevirtv1.VirtualMachineInstance, *corev1.Pod) {
	vmi := f.VMI(name, append([]f.Option{f.OnNode("node-2"), f.WithVolume("disk", f.PVC(name+"-dst"))}, opts...)...)
	src := "virt-launcher-" + name + "-src"
	srcUID := f.UID("Pod", vmi.Namespace, src)
	end := metav1.NewTime(f.Epoch().Add(2 * time.Minute))
	vmi.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{
		MigrationUID: types.UID("mig-" + name), SourceNode: "node-1", TargetNode: "node-2",
		SourcePod: src, TargetPod: f.LauncherName(vmi), EndTimestamp: &end, Completed: true,
	}
	vmi.Status.ActivePods = map[types.UID]string{f.LauncherUID(vmi): "node-2"}
	pod := f.UserPod(src, f.InNamespace(vmi.Namespace), f.BoundTo("node-1"), f.Claims(name+"-src"), f.Labels(launcherCreatedBy, string(vmi.UID)), f.Finished(f.Epoch().Add(2*time.Minute)))
	pod.UID = srcUID
	pod.Spec.Containers[0].Name = launcherCompute
	pod.Status.ContainerStatuses[0].Name = launcherCompute
	return vmi, pod
}

func TestMigrationSourcePodLeftover(t *testing.T) {
	type change func(vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod)
	cases := []struct {
		name   string
		change change
		want   bool
	}{
		{"finished source pod pins the source claim -> finding", nil, true},
		{"compute exited, pod still Running (a sidecar) -> finding", func(_ *kubevirtv1.VirtualMachineInstance, p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, true},
		{"source pod Failed -> finding", func(_ *kubevirtv1.VirtualMachineInstance, p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, true},
		{"source pod still running -> no finding", func(_ *kubevirtv1.VirtualMachineInstance, p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}, false},
		{"pod phase Running, no compute status -> no finding", func(_ *kubevirtv1.VirtualMachineInstance, p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses[0].Name = "other"
		}, false},
		{"migration not completed -> no finding", func(v *kubevirtv1.VirtualMachineInstance, _ *corev1.Pod) { v.Status.MigrationState.Completed = false }, false},
		{"migration failed -> no finding", func(v *kubevirtv1.VirtualMachineInstance, _ *corev1.Pod) { v.Status.MigrationState.Failed = true }, false},
		{"abort requested -> no finding", func(v *kubevirtv1.VirtualMachineInstance, _ *corev1.Pod) {
			v.Status.MigrationState.AbortRequested = true
		}, false},
		{"no migration state -> no finding", func(v *kubevirtv1.VirtualMachineInstance, _ *corev1.Pod) { v.Status.MigrationState = nil }, false},
		{"VMI back on the source node -> no finding", func(v *kubevirtv1.VirtualMachineInstance, _ *corev1.Pod) { v.Status.NodeName = "node-1" }, false},
		{"VMI not running -> no finding", func(v *kubevirtv1.VirtualMachineInstance, _ *corev1.Pod) { v.Status.Phase = kubevirtv1.Failed }, false},
		{"VMI terminating -> no finding", func(v *kubevirtv1.VirtualMachineInstance, _ *corev1.Pod) {
			at := metav1.NewTime(f.Epoch())
			v.DeletionTimestamp = &at
		}, false},
		{"pod listed in activePods, as KubeVirt lists every pod the VMI controls -> finding", func(v *kubevirtv1.VirtualMachineInstance, p *corev1.Pod) { v.Status.ActivePods[p.UID] = "node-1" }, true},
		{"pod on the node the VMI runs on -> no finding", func(v *kubevirtv1.VirtualMachineInstance, p *corev1.Pod) {
			v.Status.MigrationState.SourceNode, v.Status.MigrationState.TargetNode, p.Spec.NodeName = "node-2", "node-2", "node-2"
		}, false},
		{"pod is the migration's target pod -> no finding", func(v *kubevirtv1.VirtualMachineInstance, p *corev1.Pod) { v.Status.MigrationState.TargetPod = p.Name }, false},
		{"pod not the migration's source pod -> no finding", func(v *kubevirtv1.VirtualMachineInstance, _ *corev1.Pod) {
			v.Status.MigrationState.SourcePod = "virt-launcher-older"
		}, false},
		{"pod created by another VMI -> no finding", func(_ *kubevirtv1.VirtualMachineInstance, p *corev1.Pod) {
			p.Labels[launcherCreatedBy] = "someone-else"
		}, false},
		{"pod on another node than the source -> no finding", func(_ *kubevirtv1.VirtualMachineInstance, p *corev1.Pod) { p.Spec.NodeName = "node-3" }, false},
		{"VMI still uses the pod's claim (compute migration) -> no finding", func(v *kubevirtv1.VirtualMachineInstance, _ *corev1.Pod) {
			v.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = v.Name + "-src"
		}, false},
		{"VMI volume status names the pod's claim -> no finding", func(v *kubevirtv1.VirtualMachineInstance, _ *corev1.Pod) {
			v.Status.VolumeStatus = append(v.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: "disk", PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: v.Name + "-src"}})
		}, false},
		{"source and target node the same -> no finding", func(v *kubevirtv1.VirtualMachineInstance, p *corev1.Pod) {
			v.Status.MigrationState.SourceNode, p.Spec.NodeName = "node-2", "node-2"
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vmi, pod := volumeMigrated("vm-a")
			if tc.change != nil {
				tc.change(vmi, pod)
			}
			s := f.Snapshot(vmi, pod, f.PVC("vm-a-src"), f.PVC("vm-a-dst"))
			got := FindMigrationSourcePodLeftovers(NewInput(s, DefaultPolicy(), now))
			if (len(got) == 1) != tc.want || len(got) > 1 {
				t.Fatalf("got %d findings, want finding=%v: %+v", len(got), tc.want, got)
			}
			if !tc.want {
				return
			}
			fd := got[0]
			if fd.Object.Kind != "Pod" || fd.Object.Name != pod.Name || fd.Object.UID != pod.UID {
				t.Errorf("subject = %+v, want the source pod", fd.Object)
			}
			ev := strings.Join(fd.Evidence, "\n")
			for _, want := range []string{"vm-a-src", "node-2", "source node node-1", "mig-vm-a"} {
				if !strings.Contains(ev, want) {
					t.Errorf("evidence lacks %q:\n%s", want, ev)
				}
			}
			if fd.Action.Type != DeleteMigrationSourcePod || fd.Action.Safe || fd.Action.BlockedBy != drift.NotRequested || !strings.Contains(fd.Action.Remedy, "kubectl delete pod "+pod.Name) {
				t.Errorf("action = %+v, want DeleteMigrationSourcePod blocked by NotRequested, with the delete command", fd.Action)
			}
			p := DefaultPolicy()
			p.DeleteMigrationSourcePods = true
			if asked := FindMigrationSourcePodLeftovers(NewInput(s, p, now)); len(asked) != 1 || !asked[0].Action.Safe || asked[0].Action.BlockedBy != "" {
				t.Errorf("on request: %+v, want one safe DeleteMigrationSourcePod", asked)
			}
		})
	}
}

func TestMigrationSourcePodLeftover_scope(t *testing.T) {
	vmi, pod := volumeMigrated("vm-a")
	s := f.Snapshot(vmi, pod)
	p := DefaultPolicy()
	p.Scope.Namespaces = []string{"other"}
	if got := FindMigrationSourcePodLeftovers(NewInput(s, p, now)); len(got) != 0 {
		t.Errorf("namespace out of scope: %d findings", len(got))
	}
}
