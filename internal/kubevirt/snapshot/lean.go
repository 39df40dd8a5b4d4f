package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Lean drops from obj every field that no check, no gatherer (package
// observe) and no controller code reads, so that an informer cache holds
// only what decisions need. It keeps, per kind:
//
//   - every kind: name, namespace, uid, resourceVersion, generation,
//     creation and deletion timestamps, labels, owner references and
//     finalizers; annotations only where one is read (below); never
//     managedFields;
//   - VirtualMachine: spec.running, runStrategy, instancetype, preference,
//     updateVolumesStrategy, the names of its dataVolumeTemplates, the
//     template's labels and volumes (leanVolumes) and the names of its
//     disks marked shareable (leanDisks); status.printableStatus, the
//     Failure and ManualRecoveryRequired conditions, volumeUpdateState,
//     stateChangeRequests, volumeRequests, instancetypeRef and
//     preferenceRef;
//   - VirtualMachineInstance: spec.volumes (leanVolumes), the disks
//     marked shareable (leanDisks) and evictionStrategy; status.phase,
//     nodeName, activePods, the LiveMigratable condition, volumeStatus
//     (name, phase, hotplugVolume and the claim name of
//     persistentVolumeClaimInfo) and migrationState (its nodes, pods, uids,
//     times and outcome);
//   - Pod: spec.nodeName, the volumes (a claim or ephemeral source whole,
//     others by name only); status.phase and, of each container status, the
//     name and state (without messages);
//   - PersistentVolumeClaim: spec.volumeName, accessModes, volumeMode,
//     storageClassName; status.phase and accessModes;
//   - PersistentVolume: spec.claimRef, accessModes, storageClassName,
//     volumeMode, reclaim policy and the volume source (of a CSI source the
//     driver, handle, read-only flag and fsType); status.phase;
//   - Node: the annotations NodeIDAnnotation and
//     ControllerManagedAttachAnnotation; spec.taints, providerID,
//     unschedulable; status.conditions, volumesInUse and volumesAttached;
//   - VolumeAttachment: the annotation VANodeIDAnnotation; the whole spec;
//     status.attached and the attach and detach errors;
//   - DataVolume: status.phase and claimName.
//
// Lean changes obj in place and returns it: obj must belong to the caller,
// as the fresh object an informer transform receives does. Any other kind
// (and a nil pointer) is returned unchanged. Lean is idempotent.
//
// Nothing may write a lean object back (Update): the write paths re-read
// live and patch (package act, package protect).
func Lean(obj any) any {
	switch o := obj.(type) {
	case *kubevirtv1.VirtualMachine:
		leanIf(o, leanVM)
	case *kubevirtv1.VirtualMachineInstance:
		leanIf(o, leanVMI)
	case *corev1.Pod:
		leanIf(o, leanPod)
	case *corev1.PersistentVolumeClaim:
		leanIf(o, leanPVC)
	case *corev1.PersistentVolume:
		leanIf(o, leanPV)
	case *corev1.Node:
		leanIf(o, leanNode)
	case *storagev1.VolumeAttachment:
		leanIf(o, leanVA)
	case *cdiv1.DataVolume:
		leanIf(o, leanDV)
	}
	return obj
}

func leanIf[T any](o *T, lean func(*T)) {
	if o != nil {
		lean(o)
	}
}

// LeanTransform is Lean as an informer transform (a client-go
// TransformFunc).
func LeanTransform(obj any) (any, error) {
	return Lean(obj), nil
}

// leanMeta keeps the metadata every kind keeps, and of the annotations only
// those named.
func leanMeta(m *metav1.ObjectMeta, annotations ...string) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name:                       m.Name,
		GenerateName:               m.GenerateName,
		Namespace:                  m.Namespace,
		UID:                        m.UID,
		ResourceVersion:            m.ResourceVersion,
		Generation:                 m.Generation,
		CreationTimestamp:          m.CreationTimestamp,
		DeletionTimestamp:          m.DeletionTimestamp,
		DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
		Labels:                     m.Labels,
		OwnerReferences:            m.OwnerReferences,
		Finalizers:                 m.Finalizers,
	}
	for _, k := range annotations {
		if v, ok := m.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = make(map[string]string, len(annotations))
			}
			out.Annotations[k] = v
		}
	}
	return out
}

// leanVolumes keeps each volume's name and the sources that name storage
// (a claim, a DataVolume, an ephemeral claim, a memory dump claim); other
// sources (container disks, cloud-init data, config maps, ...) are read by
// nothing beyond the volume's existence.
func leanVolumes(vols []kubevirtv1.Volume) []kubevirtv1.Volume {
	if vols == nil {
		return nil
	}
	out := make([]kubevirtv1.Volume, len(vols))
	for i := range vols {
		v := &vols[i]
		if c := v.PersistentVolumeClaim; c != nil && c.ClaimName == v.Name {
			c.ClaimName = v.Name // one string for both (a claim is usually its volume's name)
		}
		out[i] = kubevirtv1.Volume{Name: v.Name, VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: v.PersistentVolumeClaim,
			DataVolume:            v.DataVolume,
			Ephemeral:             v.Ephemeral,
			MemoryDump:            v.MemoryDump,
		}}
	}
	return out
}

// sameString returns the name of the volume among vols called name, so that
// the lean object holds one copy of it, or name itself.
func sameString(name string, vols []kubevirtv1.Volume) string {
	for i := range vols {
		if vols[i].Name == name {
			return vols[i].Name
		}
	}
	return name
}

func leanVM(vm *kubevirtv1.VirtualMachine) {
	in := &vm.Spec
	spec := kubevirtv1.VirtualMachineSpec{
		Running:               in.Running,
		RunStrategy:           in.RunStrategy,
		Instancetype:          in.Instancetype,
		Preference:            in.Preference,
		UpdateVolumesStrategy: in.UpdateVolumesStrategy,
	}
	if t := in.Template; t != nil {
		spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: t.ObjectMeta.Labels},
			Spec:       kubevirtv1.VirtualMachineInstanceSpec{Volumes: leanVolumes(t.Spec.Volumes), Domain: leanDisks(t.Spec.Domain.Devices.Disks)},
		}
	}
	if in.DataVolumeTemplates != nil {
		spec.DataVolumeTemplates = make([]kubevirtv1.DataVolumeTemplateSpec, len(in.DataVolumeTemplates))
		for i := range in.DataVolumeTemplates {
			t := &in.DataVolumeTemplates[i]
			spec.DataVolumeTemplates[i].ObjectMeta = metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace}
		}
	}
	st := &vm.Status
	status := kubevirtv1.VirtualMachineStatus{
		Created:             st.Created,
		Ready:               st.Ready,
		PrintableStatus:     st.PrintableStatus,
		StateChangeRequests: st.StateChangeRequests,
		VolumeRequests:      st.VolumeRequests,
		InstancetypeRef:     st.InstancetypeRef,
		PreferenceRef:       st.PreferenceRef,
		ObservedGeneration:  st.ObservedGeneration,
		DesiredGeneration:   st.DesiredGeneration,
		VolumeUpdateState:   st.VolumeUpdateState,
	}
	for _, c := range st.Conditions {
		// A VM sync error is a Failure condition; an interrupted volume
		// migration is ManualRecoveryRequired; no other is read.
		if c.Type == kubevirtv1.VirtualMachineFailure || c.Type == kubevirtv1.VirtualMachineManualRecoveryRequired {
			status.Conditions = append(status.Conditions, c)
		}
	}
	*vm = kubevirtv1.VirtualMachine{TypeMeta: vm.TypeMeta, ObjectMeta: leanMeta(&vm.ObjectMeta), Spec: spec, Status: status}
}

func leanVMI(vmi *kubevirtv1.VirtualMachineInstance) {
	st := &vmi.Status
	status := kubevirtv1.VirtualMachineInstanceStatus{
		NodeName:   st.NodeName,
		Phase:      st.Phase,
		ActivePods: st.ActivePods,
	}
	volumes := leanVolumes(vmi.Spec.Volumes)
	if st.VolumeStatus != nil {
		status.VolumeStatus = make([]kubevirtv1.VolumeStatus, len(st.VolumeStatus))
		var last *kubevirtv1.HotplugVolumeStatus
		for i := range st.VolumeStatus {
			vs := &st.VolumeStatus[i]
			out := kubevirtv1.VolumeStatus{Name: sameString(vs.Name, volumes), Phase: vs.Phase, HotplugVolume: vs.HotplugVolume}
			if hp := vs.HotplugVolume; hp != nil && last != nil && *hp == *last {
				// One attachment pod usually serves all of a VMI's
				// hot-plugs: equal entries share one value.
				out.HotplugVolume = last
			}
			last = out.HotplugVolume
			if info := vs.PersistentVolumeClaimInfo; info != nil {
				claim := info.ClaimName
				if claim == out.Name {
					claim = out.Name
				}
				out.PersistentVolumeClaimInfo = &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: claim}
			}
			status.VolumeStatus[i] = out
		}
	}
	status.Conditions = LiveMigratableOnly(st.Conditions)
	if ms := st.MigrationState; ms != nil {
		status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{
			StartTimestamp:         ms.StartTimestamp,
			EndTimestamp:           ms.EndTimestamp,
			TargetNode:             ms.TargetNode,
			TargetPod:              ms.TargetPod,
			TargetAttachmentPodUID: ms.TargetAttachmentPodUID,
			SourceNode:             ms.SourceNode,
			SourcePod:              ms.SourcePod,
			Completed:              ms.Completed,
			Failed:                 ms.Failed,
			AbortRequested:         ms.AbortRequested,
			AbortStatus:            ms.AbortStatus,
			MigrationUID:           ms.MigrationUID,
			Mode:                   ms.Mode,
		}
	}
	*vmi = kubevirtv1.VirtualMachineInstance{
		TypeMeta:   vmi.TypeMeta,
		ObjectMeta: leanMeta(&vmi.ObjectMeta),
		Spec:       kubevirtv1.VirtualMachineInstanceSpec{Volumes: volumes, Domain: leanDisks(vmi.Spec.Domain.Devices.Disks), EvictionStrategy: vmi.Spec.EvictionStrategy},
		Status:     status,
	}
}

// LiveMigratableOnly returns, of a VMI's conditions, the LiveMigratable
// one (type, status, reason and message): whether a drain can move the
// VMI reads no other. Nil when there is none.
func LiveMigratableOnly(conds []kubevirtv1.VirtualMachineInstanceCondition) []kubevirtv1.VirtualMachineInstanceCondition {
	for i := range conds {
		if c := &conds[i]; c.Type == kubevirtv1.VirtualMachineInstanceIsMigratable {
			return []kubevirtv1.VirtualMachineInstanceCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}}
		}
	}
	return nil
}

// leanDisks keeps, of a domain, the disks marked shareable (name and flag):
// whether a claim may be used by two VMs reads nothing else of it.
func leanDisks(disks []kubevirtv1.Disk) kubevirtv1.DomainSpec {
	var out []kubevirtv1.Disk
	for i := range disks {
		if d := &disks[i]; d.Shareable != nil || LongVirtioSerial(d) {
			out = append(out, KeptDisk(d))
		}
	}
	return kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Disks: out}}
}

// VirtioSerialBytes is how much of a disk's serial a guest sees on the
// virtio bus: the virtio-blk device ID is 20 bytes (VIRTIO_BLK_ID_BYTES),
// and QEMU cuts a longer serial there.
const VirtioSerialBytes = 20

// LongVirtioSerial reports whether a disk is on the virtio bus with a
// serial its guest sees cut short.
func LongVirtioSerial(d *kubevirtv1.Disk) bool {
	return d.Disk != nil && d.Disk.Bus == kubevirtv1.DiskBusVirtio && len(d.Serial) > VirtioSerialBytes
}

// KeptDisk is what the lean objects keep of a disk: its name, its
// shareable flag, and for a virtio disk whose serial is cut short, the bus
// and the serial.
func KeptDisk(d *kubevirtv1.Disk) kubevirtv1.Disk {
	out := kubevirtv1.Disk{Name: d.Name, Shareable: d.Shareable}
	if LongVirtioSerial(d) {
		out.Serial = d.Serial
		out.DiskDevice = kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}
	}
	return out
}

func leanPod(pod *corev1.Pod) {
	var spec corev1.PodSpec
	spec.NodeName = pod.Spec.NodeName
	if vols := pod.Spec.Volumes; vols != nil {
		spec.Volumes = make([]corev1.Volume, len(vols))
		for i := range vols {
			spec.Volumes[i] = corev1.Volume{Name: vols[i].Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: vols[i].PersistentVolumeClaim,
				Ephemeral:             vols[i].Ephemeral,
			}}
		}
	}
	st := &pod.Status
	status := corev1.PodStatus{
		Phase:                      st.Phase,
		InitContainerStatuses:      leanContainerStatuses(st.InitContainerStatuses),
		ContainerStatuses:          leanContainerStatuses(st.ContainerStatuses),
		EphemeralContainerStatuses: leanContainerStatuses(st.EphemeralContainerStatuses),
	}
	*pod = corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: leanMeta(&pod.ObjectMeta), Spec: spec, Status: status}
}

// leanContainerStatuses keeps each container's name and state: whether it
// runs, and when it finished.
func leanContainerStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i := range in {
		s := &in[i].State
		state := corev1.ContainerState{Running: s.Running}
		if w := s.Waiting; w != nil {
			state.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason}
		}
		if t := s.Terminated; t != nil {
			state.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Signal: t.Signal, Reason: t.Reason, StartedAt: t.StartedAt, FinishedAt: t.FinishedAt}
		}
		out[i] = corev1.ContainerStatus{Name: in[i].Name, State: state}
	}
	return out
}

func leanPVC(pvc *corev1.PersistentVolumeClaim) {
	in := &pvc.Spec
	*pvc = corev1.PersistentVolumeClaim{
		TypeMeta:   pvc.TypeMeta,
		ObjectMeta: leanMeta(&pvc.ObjectMeta),
		Spec: corev1.PersistentVolumeClaimSpec{
			VolumeName:       in.VolumeName,
			AccessModes:      in.AccessModes,
			VolumeMode:       in.VolumeMode,
			StorageClassName: in.StorageClassName,
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: pvc.Status.Phase, AccessModes: pvc.Status.AccessModes},
	}
}

func leanPV(pv *corev1.PersistentVolume) {
	in := &pv.Spec
	spec := corev1.PersistentVolumeSpec{
		PersistentVolumeSource:        in.PersistentVolumeSource,
		AccessModes:                   in.AccessModes,
		ClaimRef:                      in.ClaimRef,
		PersistentVolumeReclaimPolicy: in.PersistentVolumeReclaimPolicy,
		StorageClassName:              in.StorageClassName,
		VolumeMode:                    in.VolumeMode,
	}
	if c := in.CSI; c != nil {
		spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: c.Driver, VolumeHandle: c.VolumeHandle, ReadOnly: c.ReadOnly, FSType: c.FSType}
	}
	*pv = corev1.PersistentVolume{TypeMeta: pv.TypeMeta, ObjectMeta: leanMeta(&pv.ObjectMeta), Spec: spec,
		Status: corev1.PersistentVolumeStatus{Phase: pv.Status.Phase}}
}

func leanNode(node *corev1.Node) {
	*node = corev1.Node{
		TypeMeta:   node.TypeMeta,
		ObjectMeta: leanMeta(&node.ObjectMeta, NodeIDAnnotation, ControllerManagedAttachAnnotation),
		Spec:       corev1.NodeSpec{Taints: node.Spec.Taints, ProviderID: node.Spec.ProviderID, Unschedulable: node.Spec.Unschedulable},
		Status: corev1.NodeStatus{
			Conditions:      node.Status.Conditions,
			VolumesInUse:    node.Status.VolumesInUse,
			VolumesAttached: node.Status.VolumesAttached,
		},
	}
}

func leanVA(va *storagev1.VolumeAttachment) {
	*va = storagev1.VolumeAttachment{
		TypeMeta:   va.TypeMeta,
		ObjectMeta: leanMeta(&va.ObjectMeta, VANodeIDAnnotation),
		Spec:       va.Spec,
		Status:     storagev1.VolumeAttachmentStatus{Attached: va.Status.Attached, AttachError: va.Status.AttachError, DetachError: va.Status.DetachError},
	}
}

func leanDV(dv *cdiv1.DataVolume) {
	*dv = cdiv1.DataVolume{
		TypeMeta:   dv.TypeMeta,
		ObjectMeta: leanMeta(&dv.ObjectMeta),
		Status:     cdiv1.DataVolumeStatus{Phase: dv.Status.Phase, ClaimName: dv.Status.ClaimName},
	}
}
