package doctor

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// The KubeVirt CSI driver hot-plugs a tenant volume under the name of the
// infra DataVolume or claim that is the tenant PV's volume handle; through
// the VM (csi-driver#130) the volume is in the VM spec, through the VMI
// only in the VMI.

func vmNamed(name string, volumes ...string) kubevirtv1.VirtualMachine {
	vm := kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
	for _, v := range volumes {
		vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, kubevirtv1.Volume{Name: v})
	}
	return vm
}

// vmiOf is a VMI owned by VM owner ("" for none) with hot-plugs of claims
// (each volume named as its claim).
func vmiOf(name, owner string, claims ...string) kubevirtv1.VirtualMachineInstance {
	vmi := kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: name}}
	if owner != "" {
		yes := true
		vmi.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: owner, Controller: &yes}}
	}
	for _, c := range claims {
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, kubevirtv1.Volume{Name: c, VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}}})
		vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: c, HotplugVolume: &kubevirtv1.HotplugVolumeStatus{}})
	}
	return vmi
}

func tenantWithHandles(driver string, handles ...string) *snapshot.Tenant {
	t := &snapshot.Tenant{Name: "g"}
	for _, h := range handles {
		t.PVs = append(t.PVs, corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: h}}}})
	}
	return t
}

func TestDriverRoute(t *testing.T) {
	for _, tc := range []struct {
		name   string
		vms    []kubevirtv1.VirtualMachine
		vmis   []kubevirtv1.VirtualMachineInstance
		tenant *snapshot.Tenant
		want   RouteEvidence
	}{
		{"hot-plug in the VM spec -> VM-level", []kubevirtv1.VirtualMachine{vmNamed("n1", "pvc-a")}, []kubevirtv1.VirtualMachineInstance{vmiOf("n1", "n1", "pvc-a")},
			tenantWithHandles(snapshot.DefaultCSIDriver, "pvc-a"), RouteEvidence{InVMSpec: 1}},
		{"hot-plug only in the VMI -> VMI-level", []kubevirtv1.VirtualMachine{vmNamed("n1")}, []kubevirtv1.VirtualMachineInstance{vmiOf("n1", "n1", "pvc-a")},
			tenantWithHandles(snapshot.DefaultCSIDriver, "pvc-a"), RouteEvidence{VMIOnly: 1, Example: "volume pvc-a of VMI infra/n1"}},
		{"not the tenant's volume -> nothing", []kubevirtv1.VirtualMachine{vmNamed("n1")}, []kubevirtv1.VirtualMachineInstance{vmiOf("n1", "n1", "pvc-x")},
			tenantWithHandles(snapshot.DefaultCSIDriver, "pvc-a"), RouteEvidence{}},
		{"a PV of another driver -> nothing", []kubevirtv1.VirtualMachine{vmNamed("n1")}, []kubevirtv1.VirtualMachineInstance{vmiOf("n1", "n1", "pvc-a")},
			tenantWithHandles("ebs.csi.aws.com", "pvc-a"), RouteEvidence{}},
		{"standalone VMI -> nothing (the VMI route is its only one)", nil, []kubevirtv1.VirtualMachineInstance{vmiOf("n1", "", "pvc-a")},
			tenantWithHandles(snapshot.DefaultCSIDriver, "pvc-a"), RouteEvidence{}},
		{"the handle names the claim of a volume named otherwise -> counted", []kubevirtv1.VirtualMachine{vmNamed("n1")}, []kubevirtv1.VirtualMachineInstance{func() kubevirtv1.VirtualMachineInstance {
			v := vmiOf("n1", "n1", "pvc-a")
			v.Spec.Volumes[0].Name, v.Status.VolumeStatus[0].Name = "disk1", "disk1"
			return v
		}()}, tenantWithHandles(snapshot.DefaultCSIDriver, "pvc-a"), RouteEvidence{VMIOnly: 1, Example: "volume disk1 of VMI infra/n1"}},
		{"VM gone -> nothing", nil, []kubevirtv1.VirtualMachineInstance{vmiOf("n1", "n1", "pvc-a")},
			tenantWithHandles(snapshot.DefaultCSIDriver, "pvc-a"), RouteEvidence{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DriverRoute(tc.vms, tc.vmis, tc.tenant); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
