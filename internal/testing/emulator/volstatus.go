package emulator

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator/volreq"
)

// KubeVirt's reasons and the filesystem overhead it reports without CDI.
const (
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	msgPodCreatedFmt       = "Created hotplug attachment pod %s, for volume %s"
	msgPodDeletedFmt       = "Deleted hotplug attachment pod %s, for volume %s"
	reasonPVCNotFound      = "FailedPvcNotFound"
	reasonPVCNotReady      = "PVCNotReady"
	defaultFSOverhead      = virtv1.Percent("0.055")
	msgPVCNotFoundFmt      = "PVC %s not found"
	msgDataVolumeNotDoneFm = "DataVolume %s is not ready (phase %q)"
)

// claimState is what the PVC of one VMI volume allows.
type claimState struct {
	pvc    *corev1.PersistentVolumeClaim // nil: missing
	ready  bool                          // may be attached
	phase  virtv1.VolumePhase            // when not ready
	reason string
	msg    string
}

// claimStates reads the namespace's PVCs (and DataVolumes) from the cache and judges
// every PVC-backed volume of vmi as KubeVirt's VolumeReadyToAttachToNode
// does: the PVC must exist, and a PVC owned by a DataVolume needs that
// DataVolume Succeeded or PendingPopulation.
func (e *Emulator) claimStates(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (map[string]claimState, error) {
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := e.ctrl.cache.List(ctx, pvcs, client.InNamespace(vmi.Namespace)); err != nil {
		return nil, err
	}
	byName := map[string]*corev1.PersistentVolumeClaim{}
	needDVs := false
	for i := range pvcs.Items {
		p := &pvcs.Items[i]
		byName[p.Name] = p
		if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "DataVolume" {
			needDVs = true
		}
	}
	dvs := map[string]*cdiv1.DataVolume{}
	if needDVs {
		list := &cdiv1.DataVolumeList{}
		if err := e.ctrl.cache.List(ctx, list, client.InNamespace(vmi.Namespace)); err != nil {
			return nil, err
		}
		for i := range list.Items {
			dvs[list.Items[i].Name] = &list.Items[i]
		}
	}
	out := map[string]claimState{}
	for _, v := range vmi.Spec.Volumes {
		if name := volreq.ClaimName(&v); name != "" {
			out[v.Name] = judgeClaim(name, byName[name], dvs)
		}
	}
	return out, nil
}

func judgeClaim(name string, pvc *corev1.PersistentVolumeClaim, dvs map[string]*cdiv1.DataVolume) claimState {
	if pvc == nil {
		return claimState{phase: virtv1.VolumePending, reason: reasonPVCNotFound, msg: fmt.Sprintf(msgPVCNotFoundFmt, name)}
	}
	st := claimState{pvc: pvc, ready: true}
	if owner := metav1.GetControllerOf(pvc); owner != nil && owner.Kind == "DataVolume" {
		dv := dvs[owner.Name]
		if dv == nil || (dv.Status.Phase != cdiv1.Succeeded && dv.Status.Phase != cdiv1.PendingPopulation) {
			var phase cdiv1.DataVolumePhase
			if dv != nil {
				phase = dv.Status.Phase
			}
			st.ready, st.phase, st.reason = false, virtv1.VolumePending, reasonPVCNotReady
			st.msg = fmt.Sprintf(msgDataVolumeNotDoneFm, owner.Name, phase)
			if pvc.Status.Phase == corev1.ClaimBound {
				st.phase = virtv1.VolumeBound
			}
		}
	}
	return st
}

// volumeStatuses is virt-controller's part of status.volumeStatus
// (pkg/virt-controller/watch/vmi/storage.go:231-342, KubeVirt v1.9.0). Spec
// volumes keep their entry; a hot-plug volume follows its PVC until an
// attachment pod exists, then is AttachedToNode with the pod's name, and the
// pod's UID once the pod is ready (blank while a newer pod is not). An entry
// whose volume left the spec stays while an attachment pod holds the volume
// (Ready and MountedToPod kept, anything else Detaching) and goes with the
// pod. Entries are sorted by name. Targets and the later phases are the
// handler's (package virthandler).
func volumeStatuses(vmi *virtv1.VirtualMachineInstance, hot map[string]bool, current *corev1.Pod, pods []*corev1.Pod, claims map[string]claimState) []virtv1.VolumeStatus {
	old := map[string]virtv1.VolumeStatus{}
	for _, s := range vmi.Status.VolumeStatus {
		old[s.Name] = *s.DeepCopy()
	}
	var out []virtv1.VolumeStatus
	for _, v := range vmi.Spec.Volumes {
		s, ok := old[v.Name]
		if !ok {
			s = virtv1.VolumeStatus{Name: v.Name}
		}
		delete(old, v.Name)
		c, hasClaim := claims[v.Name]
		if hot[v.Name] {
			attachedStatus(&s, current, c)
		}
		if hasClaim && c.pvc != nil {
			s.PersistentVolumeClaimInfo = pvcInfo(c.pvc)
		}
		out = append(out, s)
	}
	for name, s := range old {
		pod := podHolding(pods, name)
		if pod == nil || s.HotplugVolume == nil {
			continue // the attachment pod is gone: so is the entry
		}
		s.HotplugVolume.AttachPodName, s.HotplugVolume.AttachPodUID = pod.Name, pod.UID
		if s.Phase != virtv1.VolumeReady && s.Phase != virtv1.HotplugVolumeMounted {
			s.Phase = virtv1.HotplugVolumeDetaching
		}
		if s.Phase == virtv1.HotplugVolumeDetaching && pod.DeletionTimestamp != nil {
			s.Reason, s.Message = reasonSuccessfulDelete, fmt.Sprintf(msgPodDeletedFmt, pod.Name, name)
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// attachedStatus is storage.go:137-192 for one hot-plug volume in the spec.
func attachedStatus(s *virtv1.VolumeStatus, pod *corev1.Pod, c claimState) {
	if s.HotplugVolume == nil {
		s.HotplugVolume = &virtv1.HotplugVolumeStatus{}
	}
	fromClaim := false
	if pod == nil {
		if s.Phase != virtv1.VolumeReady {
			s.HotplugVolume.AttachPodUID = ""
			fromClaim = true
		}
	} else {
		s.HotplugVolume.AttachPodName = pod.Name
		s.HotplugVolume.AttachPodUID = ""
		if podReady(pod) {
			s.HotplugVolume.AttachPodUID = pod.UID
		}
		switch s.Phase {
		case "", virtv1.VolumePending, virtv1.VolumeBound:
			s.Phase, s.Reason = virtv1.HotplugVolumeAttachedToNode, reasonSuccessfulCreate
			s.Message = fmt.Sprintf(msgPodCreatedFmt, pod.Name, s.Name)
		case virtv1.HotplugVolumeDetaching:
			fromClaim = true // re-added while the old pod goes
		}
	}
	if fromClaim {
		s.Phase, s.Reason, s.Message = c.claimPhase()
	}
}

// claimPhase is the phase of a hot-plug volume without attachment pod
// (storage.go:360-372): it follows the PVC.
func (c claimState) claimPhase() (virtv1.VolumePhase, string, string) {
	switch {
	case c.pvc == nil:
		return virtv1.VolumePending, c.reason, c.msg
	case c.pvc.Status.Phase == corev1.ClaimPending:
		return virtv1.VolumePending, reasonPVCNotReady, "PVC is in phase ClaimPending"
	case c.pvc.Status.Phase == corev1.ClaimBound:
		return virtv1.VolumeBound, reasonPVCNotReady, "PVC is in phase Bound"
	}
	return virtv1.VolumePending, reasonPVCNotReady, "PVC is in phase Lost"
}

// podHolding is the first pod with a volume of that name.
func podHolding(pods []*corev1.Pod, volume string) *corev1.Pod {
	for _, p := range pods {
		for _, v := range p.Spec.Volumes {
			if v.Name == volume {
				return p
			}
		}
	}
	return nil
}

// podReady: the pod's single container is ready (storage.go:159-165).
func podReady(pod *corev1.Pod) bool {
	return len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].Ready
}

func pvcInfo(pvc *corev1.PersistentVolumeClaim) *virtv1.PersistentVolumeClaimInfo {
	overhead := defaultFSOverhead
	return &virtv1.PersistentVolumeClaimInfo{
		ClaimName:          pvc.Name,
		AccessModes:        pvc.Spec.AccessModes,
		VolumeMode:         pvc.Spec.VolumeMode,
		Capacity:           pvc.Status.Capacity,
		Requests:           pvc.Spec.Resources.Requests,
		FilesystemOverhead: &overhead,
	}
}
