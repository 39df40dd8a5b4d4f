package emulator

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/testing/emulator/volreq"
)

type vmiOpt func(*virtv1.VirtualMachineInstance)

func vmiWith(opts ...vmiOpt) *virtv1.VirtualMachineInstance {
	v := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}}
	for _, o := range opts {
		o(v)
	}
	return v
}

func withVolume(vol virtv1.Volume, bus virtv1.DiskBus) vmiOpt {
	return func(v *virtv1.VirtualMachineInstance) {
		v.Spec.Volumes = append(v.Spec.Volumes, vol)
		v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks, volreq.Disk(vol.Name, bus))
	}
}

func withStatus(s virtv1.VolumeStatus) vmiOpt {
	return func(v *virtv1.VirtualMachineInstance) { v.Status.VolumeStatus = append(v.Status.VolumeStatus, s) }
}

func names(vols []virtv1.Volume) []string {
	var out []string
	for _, v := range vols {
		out = append(out, v.Name)
	}
	return out
}

func diskNames(disks []virtv1.Disk) []string {
	var out []string
	for _, d := range disks {
		out = append(out, d.Name)
	}
	return out
}

func TestSyncDeclarativeVolumes(t *testing.T) {
	root := volreq.PVCVolume("root", "root", false)
	cases := []struct {
		name      string
		vm        *virtv1.VirtualMachineInstance // holds the VM template as a VMI spec
		vmi       *virtv1.VirtualMachineInstance
		wantVols  []string
		wantDisks []string
	}{
		{"VM gained a hot-pluggable volume -> added with its disk",
			vmiWith(withVolume(root, ""), withVolume(volreq.PVCVolume("a", "a", true), "scsi")),
			vmiWith(withVolume(root, "")),
			[]string{"root", "a"}, []string{"root", "a"}},
		{"VMI-only hot-plug -> removed",
			vmiWith(withVolume(root, "")),
			vmiWith(withVolume(root, ""), withVolume(volreq.PVCVolume("a", "a", true), "scsi")),
			[]string{"root"}, []string{"root"}},
		{"hot-plug still unplugging (status left) -> not re-added yet",
			vmiWith(withVolume(root, ""), withVolume(volreq.PVCVolume("a", "a", true), "scsi")),
			vmiWith(withVolume(root, ""), withStatus(virtv1.VolumeStatus{Name: "a", HotplugVolume: &virtv1.HotplugVolumeStatus{}})),
			[]string{"root"}, []string{"root"}},
		{"hot-plug changed in VM -> removed, to be re-added later",
			vmiWith(withVolume(root, ""), withVolume(volreq.PVCVolume("a", "new-claim", true), "scsi")),
			vmiWith(withVolume(root, ""), withVolume(volreq.PVCVolume("a", "a", true), "scsi")),
			[]string{"root"}, []string{"root"}},
		{"non-hotpluggable VMI volume missing from VM -> kept",
			vmiWith(),
			vmiWith(withVolume(root, "")),
			[]string{"root"}, []string{"root"}},
		{"in step -> unchanged",
			vmiWith(withVolume(root, ""), withVolume(volreq.PVCVolume("a", "a", true), "scsi")),
			vmiWith(withVolume(root, ""), withVolume(volreq.PVCVolume("a", "a", true), "scsi")),
			[]string{"root", "a"}, []string{"root", "a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := c.vmi.Spec.DeepCopy()
			syncDeclarativeVolumes(&c.vm.Spec, c.vmi, spec)
			if got := names(spec.Volumes); !slices.Equal(got, c.wantVols) {
				t.Errorf("volumes %v, want %v", got, c.wantVols)
			}
			if got := diskNames(spec.Domain.Devices.Disks); !slices.Equal(got, c.wantDisks) {
				t.Errorf("disks %v, want %v", got, c.wantDisks)
			}
		})
	}
}
