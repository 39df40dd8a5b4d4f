package emulator

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
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
		v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks, disk(vol.Name, bus))
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
	root := pvcVol("root", "root", false)
	cases := []struct {
		name      string
		vm        *virtv1.VirtualMachineInstance // holds the VM template as a VMI spec
		vmi       *virtv1.VirtualMachineInstance
		wantVols  []string
		wantDisks []string
	}{
		{"VM gained a hot-pluggable volume -> added with its disk",
			vmiWith(withVolume(root, ""), withVolume(pvcVol("a", "a", true), "scsi")),
			vmiWith(withVolume(root, "")),
			[]string{"root", "a"}, []string{"root", "a"}},
		{"VMI-only hot-plug -> removed",
			vmiWith(withVolume(root, "")),
			vmiWith(withVolume(root, ""), withVolume(pvcVol("a", "a", true), "scsi")),
			[]string{"root"}, []string{"root"}},
		{"hot-plug still unplugging (status left) -> not re-added yet",
			vmiWith(withVolume(root, ""), withVolume(pvcVol("a", "a", true), "scsi")),
			vmiWith(withVolume(root, ""), withStatus(virtv1.VolumeStatus{Name: "a", HotplugVolume: &virtv1.HotplugVolumeStatus{}})),
			[]string{"root"}, []string{"root"}},
		{"hot-plug changed in VM -> removed, to be re-added later",
			vmiWith(withVolume(root, ""), withVolume(pvcVol("a", "new-claim", true), "scsi")),
			vmiWith(withVolume(root, ""), withVolume(pvcVol("a", "a", true), "scsi")),
			[]string{"root"}, []string{"root"}},
		{"non-hotpluggable VMI volume missing from VM -> kept",
			vmiWith(),
			vmiWith(withVolume(root, "")),
			[]string{"root"}, []string{"root"}},
		{"in step -> unchanged",
			vmiWith(withVolume(root, ""), withVolume(pvcVol("a", "a", true), "scsi")),
			vmiWith(withVolume(root, ""), withVolume(pvcVol("a", "a", true), "scsi")),
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

func TestVolumeStatuses(t *testing.T) {
	vmi := vmiWith(
		withVolume(pvcVol("root", "root", false), virtv1.DiskBusVirtio),
		withVolume(pvcVol("a", "a", true), ""),
		withVolume(pvcVol("b", "b", true), virtv1.DiskBusSATA),
		withVolume(pvcVol("missing", "missing", true), ""),
		withStatus(virtv1.VolumeStatus{Name: "gone", Target: "sdz", HotplugVolume: &virtv1.HotplugVolumeStatus{AttachPodName: "old"}}),
	)
	pvc := func(n string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: n}}
	}
	claims := map[string]claimState{
		"root": {pvc: pvc("root"), ready: true}, "a": {pvc: pvc("a"), ready: true}, "b": {pvc: pvc("b"), ready: true},
		"missing": judgeClaim("missing", nil, nil),
	}
	attach := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hp-volume-abcde", UID: "u1"}}
	attach.Spec.Volumes = []corev1.Volume{
		{Name: "a", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "a"}}},
		{Name: "b", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "b"}}},
	}
	hot := map[string]bool{"a": true, "b": true, "missing": true}
	got := volumeStatuses(vmi, hot, attach, claims)
	byName := map[string]virtv1.VolumeStatus{}
	for _, s := range got {
		byName[s.Name] = s
	}
	if len(got) != 4 {
		t.Fatalf("statuses %+v: want one per spec volume, the removed one dropped", got)
	}
	if r := byName["root"]; r.HotplugVolume != nil || r.Target != "vda" || r.Phase != "" || r.PersistentVolumeClaimInfo == nil {
		t.Errorf("boot volume -> target vda, no hotplugVolume: %+v", r)
	}
	for _, n := range []string{"a", "b"} {
		s := byName[n]
		if s.HotplugVolume == nil || s.HotplugVolume.AttachPodName != "hp-volume-abcde" || s.HotplugVolume.AttachPodUID != "u1" ||
			s.Phase != virtv1.VolumeReady || s.Reason != "VolumeReady" {
			t.Errorf("attached hot-plug %s -> Ready with attachment pod: %+v", n, s)
		}
	}
	if byName["a"].Target != "sda" || byName["b"].Target != "sdb" {
		t.Errorf("targets a=%q b=%q, want sda, sdb", byName["a"].Target, byName["b"].Target)
	}
	if m := byName["missing"]; m.HotplugVolume == nil || m.HotplugVolume.AttachPodName != "" || m.Phase != virtv1.VolumePending ||
		m.Reason != "FailedPvcNotFound" || m.Target != "" || m.PersistentVolumeClaimInfo != nil {
		t.Errorf("hot-plug without PVC -> Pending, no pod: %+v", m)
	}
	if vmi.Status.VolumeStatus[0].HotplugVolume.AttachPodName != "old" {
		t.Error("volumeStatuses must not modify the VMI it reads")
	}
}
