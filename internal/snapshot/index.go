package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Key names a namespaced object.
type Key struct {
	Namespace string
	Name      string
}

// AttachPodRef is a VMI volume status entry that names an attachment pod.
type AttachPodRef struct {
	VMI    *kubevirtv1.VirtualMachineInstance
	Volume string
	// PodUID is the attachPodUID of the entry; it may be empty.
	PodUID types.UID
}

// Index answers the lookups the checks need in constant time. It is built
// once per snapshot and never changed afterwards.
type Index struct {
	vms       map[Key]*kubevirtv1.VirtualMachine
	vmis      map[Key]*kubevirtv1.VirtualMachineInstance
	vmisByNS  map[string][]*kubevirtv1.VirtualMachineInstance
	pods      map[Key]*corev1.Pod
	pvcs      map[Key]*corev1.PersistentVolumeClaim
	dvs       map[Key]*cdiv1.DataVolume
	launchers map[types.UID]*kubevirtv1.VirtualMachineInstance
	// podRefs and migrationPods are only filled for namespaces that hold
	// attachment pods: nobody else asks.
	podRefs       map[Key][]AttachPodRef
	migrationPods map[types.UID]*kubevirtv1.VirtualMachineInstance

	tenantsByNS map[string][]*TenantIndex
	tenantsAll  []*TenantIndex
}

func buildIndex(s *Snapshot) *Index {
	ix := &Index{
		vms:           make(map[Key]*kubevirtv1.VirtualMachine, len(s.VMs)),
		vmis:          make(map[Key]*kubevirtv1.VirtualMachineInstance, len(s.VMIs)),
		vmisByNS:      map[string][]*kubevirtv1.VirtualMachineInstance{},
		pods:          make(map[Key]*corev1.Pod, len(s.AttachmentPods)),
		pvcs:          make(map[Key]*corev1.PersistentVolumeClaim, len(s.PVCs)),
		dvs:           make(map[Key]*cdiv1.DataVolume, len(s.DataVolumes)),
		launchers:     make(map[types.UID]*kubevirtv1.VirtualMachineInstance, len(s.AttachmentPods)),
		podRefs:       make(map[Key][]AttachPodRef, len(s.AttachmentPods)),
		migrationPods: map[types.UID]*kubevirtv1.VirtualMachineInstance{},
		tenantsByNS:   map[string][]*TenantIndex{},
	}
	for i := range s.VMs {
		vm := &s.VMs[i]
		ix.vms[Key{vm.Namespace, vm.Name}] = vm
	}
	for i := range s.PVCs {
		pvc := &s.PVCs[i]
		ix.pvcs[Key{pvc.Namespace, pvc.Name}] = pvc
	}
	for i := range s.DataVolumes {
		dv := &s.DataVolumes[i]
		ix.dvs[Key{dv.Namespace, dv.Name}] = dv
	}
	podNS := map[string]bool{}
	for i := range s.AttachmentPods {
		pod := &s.AttachmentPods[i]
		ix.pods[Key{pod.Namespace, pod.Name}] = pod
		podNS[pod.Namespace] = true
	}
	// Most pods are named by exactly one VMI: their ref lists are one-entry
	// windows into refBuf instead of separate allocations.
	refBuf := make([]AttachPodRef, 0, len(s.AttachmentPods))
	for i := range s.VMIs {
		vmi := &s.VMIs[i]
		ix.vmis[Key{vmi.Namespace, vmi.Name}] = vmi
		ix.vmisByNS[vmi.Namespace] = append(ix.vmisByNS[vmi.Namespace], vmi)
		if podNS[vmi.Namespace] {
			refBuf = ix.indexVMIForPods(vmi, refBuf)
		}
	}
	ix.indexTenants(s.Tenants)
	return ix
}

// indexVMIForPods records which attachment and launcher pods a VMI names.
func (ix *Index) indexVMIForPods(vmi *kubevirtv1.VirtualMachineInstance, refBuf []AttachPodRef) []AttachPodRef {
	for uid := range vmi.Status.ActivePods {
		ix.launchers[uid] = vmi
	}
	if ms := vmi.Status.MigrationState; ms != nil && ms.TargetAttachmentPodUID != "" {
		ix.migrationPods[ms.TargetAttachmentPodUID] = vmi
	}
	var last *kubevirtv1.HotplugVolumeStatus
	for i := range vmi.Status.VolumeStatus {
		vs := &vmi.Status.VolumeStatus[i]
		hp := vs.HotplugVolume
		if hp == nil || hp.AttachPodName == "" {
			continue
		}
		if last != nil && *last == *hp {
			continue // one pod usually attaches all of a VMI's hot-plugs
		}
		last = hp
		ref := AttachPodRef{VMI: vmi, Volume: vs.Name, PodUID: hp.AttachPodUID}
		k := Key{vmi.Namespace, hp.AttachPodName}
		if refs, ok := ix.podRefs[k]; ok {
			ix.podRefs[k] = append(refs, ref)
			continue
		}
		refBuf = append(refBuf, ref)
		ix.podRefs[k] = refBuf[len(refBuf)-1 : len(refBuf) : len(refBuf)]
	}
	return refBuf
}

// VM returns the VirtualMachine ns/name, or nil.
func (ix *Index) VM(ns, name string) *kubevirtv1.VirtualMachine {
	return ix.vms[Key{ns, name}]
}

// VMI returns the VirtualMachineInstance ns/name, or nil.
func (ix *Index) VMI(ns, name string) *kubevirtv1.VirtualMachineInstance {
	return ix.vmis[Key{ns, name}]
}

// VMIsIn returns the VMIs of namespace ns, in snapshot order.
func (ix *Index) VMIsIn(ns string) []*kubevirtv1.VirtualMachineInstance {
	return ix.vmisByNS[ns]
}

// AttachmentPod returns the attachment pod ns/name, or nil.
func (ix *Index) AttachmentPod(ns, name string) *corev1.Pod {
	return ix.pods[Key{ns, name}]
}

// PVC returns the PersistentVolumeClaim ns/name, or nil.
func (ix *Index) PVC(ns, name string) *corev1.PersistentVolumeClaim {
	return ix.pvcs[Key{ns, name}]
}

// DataVolume returns the DataVolume ns/name, or nil.
func (ix *Index) DataVolume(ns, name string) *cdiv1.DataVolume {
	return ix.dvs[Key{ns, name}]
}

// VMIByLauncherPod returns the VMI in ns whose status.activePods lists the
// pod uid (its virt-launcher pod), or nil. Only answered for namespaces that
// hold attachment pods.
func (ix *Index) VMIByLauncherPod(ns string, uid types.UID) *kubevirtv1.VirtualMachineInstance {
	vmi := ix.launchers[uid]
	if vmi == nil || vmi.Namespace != ns {
		return nil
	}
	return vmi
}

// AttachPodRefs returns the VMI volume statuses in ns that name attachment
// pod name. Only answered for namespaces that hold attachment pods.
func (ix *Index) AttachPodRefs(ns, name string) []AttachPodRef {
	return ix.podRefs[Key{ns, name}]
}

// MigrationTargetOf returns the VMI in ns whose migration state names the
// attachment pod uid as its target attachment pod, or nil.
func (ix *Index) MigrationTargetOf(ns string, uid types.UID) *kubevirtv1.VirtualMachineInstance {
	vmi := ix.migrationPods[uid]
	if vmi == nil || vmi.Namespace != ns {
		return nil
	}
	return vmi
}

// TenantsFor returns the tenants whose evidence applies to VMIs in ns: those
// configured for ns and those configured for every namespace.
func (ix *Index) TenantsFor(ns string) []*TenantIndex {
	if t, ok := ix.tenantsByNS[ns]; ok {
		return t
	}
	return ix.tenantsAll
}
