package doctor

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// DriverRoute reads, from the infra cluster's VMIs and VMs, which route
// the tenant's CSI driver hot-plugs its volumes through. The driver names
// a hot-plug after the DataVolume or claim that is the tenant PV's volume
// handle. A hot-plug of a VM-owned VMI that the VM spec also lists came
// through the VM (the VM-level route, or declarative hot-plug); one the VM
// spec lacks came through the VMI. Standalone VMIs say nothing: the VMI
// route is the only one they have.
func DriverRoute(vms []kubevirtv1.VirtualMachine, vmis []kubevirtv1.VirtualMachineInstance, t *snapshot.Tenant) RouteEvidence {
	handles := map[string]bool{}
	for i := range t.PVs {
		if csi := t.PVs[i].Spec.CSI; csi != nil && csi.Driver == t.CSIDriver() && csi.VolumeHandle != "" {
			handles[csi.VolumeHandle] = true
		}
	}
	var e RouteEvidence
	if len(handles) == 0 {
		return e
	}
	specs := map[[2]string]map[string]bool{}
	for i := range vms {
		vm := &vms[i]
		names := map[string]bool{}
		if vm.Spec.Template != nil {
			for _, v := range vm.Spec.Template.Spec.Volumes {
				names[v.Name] = true
			}
		}
		specs[[2]string{vm.Namespace, vm.Name}] = names
	}
	for i := range vmis {
		vmi := &vmis[i]
		owner := metav1.GetControllerOf(vmi)
		if owner == nil || owner.Kind != "VirtualMachine" {
			continue
		}
		spec, ok := specs[[2]string{vmi.Namespace, owner.Name}]
		if !ok {
			continue // the VM is gone: OrphanHotplugVolume's business
		}
		for _, st := range vmi.Status.VolumeStatus {
			if st.HotplugVolume == nil || !(handles[st.Name] || handles[sourceName(vmi, st.Name)]) {
				continue
			}
			if spec[st.Name] {
				e.InVMSpec++
				continue
			}
			e.VMIOnly++
			if e.Example == "" {
				e.Example = "volume " + st.Name + " of VMI " + vmi.Namespace + "/" + vmi.Name
			}
		}
	}
	return e
}

// sourceName is the claim or DataVolume a VMI volume uses, "" if none.
func sourceName(vmi *kubevirtv1.VirtualMachineInstance, volume string) string {
	for _, v := range vmi.Spec.Volumes {
		if v.Name != volume {
			continue
		}
		switch {
		case v.PersistentVolumeClaim != nil:
			return v.PersistentVolumeClaim.ClaimName
		case v.DataVolume != nil:
			return v.DataVolume.Name
		}
	}
	return ""
}
