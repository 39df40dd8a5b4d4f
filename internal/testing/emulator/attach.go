package emulator

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"
)

// virt-controller's attachment pods (KubeVirt v1.9.0
// pkg/virt-controller/watch/vmi/volume-hotplug.go).

// splitAttachmentPods returns the newest live pod holding exactly volumes,
// and the pods that do not (getActiveAndOldAttachmentPods).
func splitAttachmentPods(pods []*corev1.Pod, volumes []virtv1.Volume) (current *corev1.Pod, old []*corev1.Pod) {
	for _, p := range pods {
		switch {
		case len(volumes) == 0 || !podMatches(p, volumes):
			old = append(old, p)
		case current == nil && p.DeletionTimestamp == nil:
			current = p
		}
	}
	return current, old
}

// needsAttachmentSync is needsHandleHotplug (volume-hotplug.go:41-50): with
// a single attachment pod that holds exactly the hot-plug volumes,
// virt-controller leaves the pods alone, even while that pod is being
// deleted (so no new pod is made until it is gone).
func needsAttachmentSync(hot []virtv1.Volume, pods []*corev1.Pod) bool {
	if len(pods) == 1 && podMatches(pods[0], hot) {
		return false
	}
	return len(hot) > 0 || len(pods) > 0
}

// syncAttachmentPods creates the pod for the ready volumes (not while an
// older one is still pending) or deletes old pods whose removed volumes are
// no longer Ready or MountedToPod; the newest running old pod stays as a
// fallback while the new one does not run (volume-hotplug.go:77-154).
func (e *Emulator) syncAttachmentPods(ctx context.Context, id types.NamespacedName, vmi *virtv1.VirtualMachineInstance, launcher *corev1.Pod, mine []*corev1.Pod, ready []virtv1.Volume, hot map[string]bool) (bool, error) {
	current, old := splitAttachmentPods(mine, ready)
	if current == nil && len(ready) > 0 && !anyPending(old) {
		e.log.Info("creating attachment pod", "namespace", vmi.Namespace, "vmi", vmi.Name, "volumes", len(ready))
		pod := attachmentPod(launcher, ready)
		if err := e.client.Create(ctx, pod); err != nil {
			return false, err
		}
		e.ctrl.expect.expect(id, pod.Name, podExists)
		return true, nil
	}
	removed := map[string]virtv1.VolumePhase{}
	for _, s := range vmi.Status.VolumeStatus {
		if s.HotplugVolume != nil && !hot[s.Name] {
			removed[s.Name] = s.Phase
		}
	}
	currentDown := current == nil || !running(current)
	fallback, wrote := false, false
	for _, p := range old {
		if p.DeletionTimestamp != nil {
			continue
		}
		if !fallback && running(p) && len(ready) > 0 && currentDown && preserves(p, removed, hot) {
			fallback = true
			continue
		}
		if holdsMounted(p, removed) {
			continue
		}
		if err := e.deletePod(ctx, id, p); err != nil {
			return wrote, err
		}
		wrote = true
	}
	return wrote, nil
}

func mountedPhase(p virtv1.VolumePhase) bool {
	return p == virtv1.VolumeReady || p == virtv1.HotplugVolumeMounted
}

// holdsMounted: the pod holds a removed volume that is still Ready or
// MountedToPod.
func holdsMounted(pod *corev1.Pod, removed map[string]virtv1.VolumePhase) bool {
	for _, v := range pod.Spec.Volumes {
		if p, ok := removed[v.Name]; ok && mountedPhase(p) {
			return true
		}
	}
	return false
}

// preserves: the pod holds a volume still in the spec, or a removed one
// still mounted (podContainsVolumesToPreserve).
func preserves(pod *corev1.Pod, removed map[string]virtv1.VolumePhase, hot map[string]bool) bool {
	for _, v := range pod.Spec.Volumes {
		if hot[v.Name] {
			return true
		}
	}
	return holdsMounted(pod, removed)
}

func anyPending(pods []*corev1.Pod) bool {
	for _, p := range pods {
		switch p.Status.Phase {
		case corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed:
		default:
			return true
		}
	}
	return false
}
