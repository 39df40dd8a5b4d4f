package emulator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KubeVirt's reasons and the filesystem overhead it reports without CDI.
const (
	reasonVolumeReady      = "VolumeReady"
	reasonPVCNotFound      = "FailedPvcNotFound"
	reasonPVCNotReady      = "PVCNotReady"
	defaultFSOverhead      = virtv1.Percent("0.055")
	msgVolumeReadyFmt      = "Successfully attach hotplugged volume %s to VM"
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
		if name := claimName(&v); name != "" {
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

// volumeStatuses computes status.volumeStatus in VMI spec order. Entries of
// volumes no longer in the spec are dropped (their attachment pod is gone by
// the time this runs).
func volumeStatuses(vmi *virtv1.VirtualMachineInstance, hot map[string]bool, attach *corev1.Pod, claims map[string]claimState) []virtv1.VolumeStatus {
	old := map[string]virtv1.VolumeStatus{}
	for _, s := range vmi.Status.VolumeStatus {
		old[s.Name] = *s.DeepCopy()
	}
	inSpec := map[string]bool{}
	for _, v := range vmi.Spec.Volumes {
		inSpec[v.Name] = true
	}
	used := map[string]bool{}
	for name, s := range old {
		if inSpec[name] && s.Target != "" {
			used[s.Target] = true
		}
	}
	var attached map[string]string
	if attach != nil {
		attached = claimsOf(attach)
	}
	var out []virtv1.VolumeStatus
	for _, v := range vmi.Spec.Volumes {
		s, ok := old[v.Name]
		if !ok {
			s = virtv1.VolumeStatus{Name: v.Name}
		}
		c, hasClaim := claims[v.Name]
		if hot[v.Name] {
			if s.HotplugVolume == nil {
				s.HotplugVolume = &virtv1.HotplugVolumeStatus{}
			}
			if _, in := attached[v.Name]; in {
				s.HotplugVolume.AttachPodName, s.HotplugVolume.AttachPodUID = attach.Name, attach.UID
				s.Phase, s.Reason, s.Message = virtv1.VolumeReady, reasonVolumeReady, fmt.Sprintf(msgVolumeReadyFmt, v.Name)
				if s.Target == "" {
					s.Target = nextTarget(used, diskPrefix(vmi, v.Name, true))
				}
			} else {
				s.HotplugVolume.AttachPodName, s.HotplugVolume.AttachPodUID = "", ""
				s.Phase, s.Reason, s.Message = c.phase, c.reason, c.msg
				if s.Phase == "" {
					s.Phase = virtv1.VolumePending
				}
				if s.Target != "" {
					delete(used, s.Target)
					s.Target = ""
				}
			}
		} else {
			s.HotplugVolume = nil
			if s.Target == "" {
				if prefix := diskPrefix(vmi, v.Name, false); prefix != "" {
					s.Target = nextTarget(used, prefix)
				}
			}
		}
		if hasClaim && c.pvc != nil {
			s.PersistentVolumeClaimInfo = pvcInfo(c.pvc)
		} else {
			s.PersistentVolumeClaimInfo = nil
		}
		out = append(out, s)
	}
	return out
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

// diskPrefix is the device prefix of the volume's disk: "vd" for virtio,
// "sd" for sata, scsi and usb. Hot-plugged disks default to scsi, others to
// virtio; a volume without a disk gets "".
func diskPrefix(vmi *virtv1.VirtualMachineInstance, volume string, hot bool) string {
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		if d.Name != volume {
			continue
		}
		var bus virtv1.DiskBus
		switch {
		case d.Disk != nil:
			bus = d.Disk.Bus
		case d.CDRom != nil:
			bus = d.CDRom.Bus
		case d.LUN != nil:
			bus = d.LUN.Bus
		}
		if bus == "" {
			bus = virtv1.DiskBusVirtio
			if hot {
				bus = virtv1.DiskBusSCSI
			}
		}
		if bus == virtv1.DiskBusVirtio {
			return "vd"
		}
		return "sd"
	}
	return ""
}

func nextTarget(used map[string]bool, prefix string) string {
	if prefix == "" {
		return ""
	}
	for c := 'a'; c <= 'z'; c++ {
		t := prefix + string(c)
		if !used[t] {
			used[t] = true
			return t
		}
	}
	return ""
}
