package emulator

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator/volreq"
)

// Label values of KubeVirt's pods (label kubevirt.io).
const (
	launcherApp = "virt-launcher"
	hotplugApp  = "hotplug-disk"
	// placeholderImage is what the pods claim to run; nothing runs them.
	placeholderImage = "registry.invalid/kubevirt-emulator/placeholder:latest"
)

var podGVK = corev1.SchemeGroupVersion.WithKind("Pod")

// launcherPod renders a virt-launcher pod for vmi on node: one pod volume per
// VMI volume, named like it, except hot-plug volumes, which KubeVirt leaves
// to attachment pods (rendervolumes.go): those marked hotpluggable and those
// in skip (reported hot-plugged by the status). So "in the VMI spec but not
// in the launcher pod" means hot-plugged, as in KubeVirt.
func launcherPod(vmi *virtv1.VirtualMachineInstance, node string, skip map[string]bool) *corev1.Pod {
	labels := map[string]string{}
	for k, v := range vmi.Labels {
		labels[k] = v
	}
	labels[virtv1.AppLabel] = launcherApp
	labels[virtv1.CreatedByLabel] = string(vmi.UID)
	labels[virtv1.DeprecatedVirtualMachineNameLabel] = vmi.Name
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    "virt-launcher-" + vmi.Name + "-",
			Namespace:       vmi.Namespace,
			Labels:          labels,
			Annotations:     map[string]string{virtv1.DomainAnnotation: vmi.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vmi, virtv1.VirtualMachineInstanceGroupVersionKind)},
		},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr(int64(0)),
			AutomountServiceAccountToken:  ptr(false),
			Containers: []corev1.Container{{
				Name: "compute", Image: placeholderImage, Command: []string{"/usr/bin/virt-launcher-monitor"},
			}},
		},
	}
	for _, v := range vmi.Spec.Volumes {
		if skip[v.Name] || volreq.Hotpluggable(&v) {
			continue
		}
		pv := corev1.Volume{Name: v.Name}
		if claim := volreq.ClaimName(&v); claim != "" {
			pv.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}
		} else {
			pv.EmptyDir = &corev1.EmptyDirVolumeSource{}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, pv)
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: v.Name, MountPath: "/var/run/kubevirt-private/vmi-disks/" + v.Name})
	}
	return pod
}

// attachmentPod renders KubeVirt's hot-plug attachment pod for volumes,
// controlled by the launcher pod and bound to its node.
func attachmentPod(launcher *corev1.Pod, volumes []virtv1.Volume) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    "hp-volume-",
			Namespace:       launcher.Namespace,
			Labels:          map[string]string{virtv1.AppLabel: hotplugApp},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(launcher, podGVK)},
		},
		Spec: corev1.PodSpec{
			NodeName:                      launcher.Spec.NodeName,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr(int64(0)),
			AutomountServiceAccountToken:  ptr(false),
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{launcher.Spec.NodeName},
					}}}},
				},
			}},
			Containers: []corev1.Container{{
				Name:         hotplugApp,
				Image:        placeholderImage,
				Command:      []string{"/bin/sh", "-c", "/usr/bin/container-disk --copy-path /path/hp"},
				VolumeMounts: []corev1.VolumeMount{{Name: "hotplug-disks", MountPath: "/path"}},
			}},
			Volumes: []corev1.Volume{{Name: "hotplug-disks", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	for _, v := range volumes {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
			Name:         v.Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: volreq.ClaimName(&v)}},
		})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: v.Name, MountPath: "/" + v.Name})
	}
	return pod
}

// claimsOf maps a pod's PVC volumes to their claims.
func claimsOf(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out[v.Name] = v.PersistentVolumeClaim.ClaimName
		}
	}
	return out
}

// podMatches reports whether an attachment pod holds exactly volumes.
func podMatches(pod *corev1.Pod, volumes []virtv1.Volume) bool {
	claims := claimsOf(pod)
	if len(claims) != len(volumes) {
		return false
	}
	for _, v := range volumes {
		if c, ok := claims[v.Name]; !ok || c != volreq.ClaimName(&v) {
			return false
		}
	}
	return true
}

// markRunning writes the status a kubelet would: Running and Ready.
func (e *Emulator) markRunning(ctx context.Context, vmi types.NamespacedName, pod *corev1.Pod) error {
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.HostIP = "127.0.0.1"
	pod.Status.StartTime = &now
	pod.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if err := e.client.Status().Update(ctx, pod); err != nil {
		return err
	}
	e.ctrl.expect.expect(vmi, pod.Name, podRunning)
	return nil
}

func running(pod *corev1.Pod) bool { return pod.Status.Phase == corev1.PodRunning }

// deletePod deletes at once (grace 0, as KubeVirt does for attachment pods)
// with a UID precondition.
func (e *Emulator) deletePod(ctx context.Context, vmi types.NamespacedName, pod *corev1.Pod) error {
	e.log.Info("deleting pod", "namespace", pod.Namespace, "pod", pod.Name)
	err := e.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		e.ctrl.expect.expect(vmi, pod.Name, podGone)
	}
	return err
}

// listPods lists the namespace's pods with label kubevirt.io=app from the
// informer cache (copies), newest first. See expectations.
func (e *Emulator) listPods(ctx context.Context, ns, app string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := e.ctrl.cache.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{virtv1.AppLabel: app}); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[j].CreationTimestamp.Before(&list.Items[i].CreationTimestamp)
	})
	return list.Items, nil
}

func ptr[T any](v T) *T { return &v }
