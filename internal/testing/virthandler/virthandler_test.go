package virthandler

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"
)

func vmiWith(vols map[string]virtv1.DiskBus, status ...virtv1.VolumeStatus) *virtv1.VirtualMachineInstance {
	v := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}}
	for name, bus := range vols {
		v.Spec.Volumes = append(v.Spec.Volumes, virtv1.Volume{Name: name, VolumeSource: virtv1.VolumeSource{
			PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}},
		}})
		v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks, virtv1.Disk{Name: name, DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: bus}}})
	}
	v.Status.VolumeStatus = status
	return v
}

func hp(uid types.UID) *virtv1.HotplugVolumeStatus {
	return &virtv1.HotplugVolumeStatus{AttachPodName: "p", AttachPodUID: uid}
}

// vm.go:498-531: mounted and in spec -> MountedToPod; in the domain ->
// Ready with a target; out of the spec -> out of the domain, then
// UnMountedFromPod; Detaching is left alone; a pod the host has not
// mounted (no UID yet, or not running there) mounts nothing.
func TestVolumeSteps(t *testing.T) {
	vmi := vmiWith(map[string]virtv1.DiskBus{"root": virtv1.DiskBusVirtio, "attached": "", "nouid": "", "elsewhere": "", "mounted": ""},
		virtv1.VolumeStatus{Name: "root"},
		virtv1.VolumeStatus{Name: "nouid", Phase: virtv1.HotplugVolumeAttachedToNode, HotplugVolume: hp("")},
		virtv1.VolumeStatus{Name: "mounted", Phase: virtv1.HotplugVolumeMounted, HotplugVolume: hp("u1")},
		virtv1.VolumeStatus{Name: "gone-ready", Phase: virtv1.VolumeReady, HotplugVolume: hp("u1")},
		virtv1.VolumeStatus{Name: "gone-indomain", Phase: virtv1.VolumeReady, Target: "sdb", HotplugVolume: hp("u1")},
		virtv1.VolumeStatus{Name: "gone-detaching", Phase: virtv1.HotplugVolumeDetaching, HotplugVolume: hp("u1")},
		virtv1.VolumeStatus{Name: "elsewhere", Phase: virtv1.HotplugVolumeAttachedToNode, HotplugVolume: hp("u2")},
		virtv1.VolumeStatus{Name: "attached", Phase: virtv1.HotplugVolumeAttachedToNode, HotplugVolume: hp("u1")},
	)
	got := Volumes(vmi, Mounted{"u1": true})
	m := map[string]virtv1.VolumeStatus{}
	for i, s := range got {
		m[s.Name] = s
		if i > 0 && got[i-1].Name > s.Name {
			t.Errorf("not sorted by name: %s before %s", got[i-1].Name, s.Name)
		}
	}
	check := func(name string, phase virtv1.VolumePhase, reason, target string) {
		t.Helper()
		if s := m[name]; s.Phase != phase || s.Reason != reason || s.Target != target {
			t.Errorf("%s: %s/%s target %q, want %s/%s target %q", name, s.Phase, s.Reason, s.Target, phase, reason, target)
		}
	}
	check("attached", virtv1.HotplugVolumeMounted, ReasonMounted, "")
	check("nouid", virtv1.HotplugVolumeAttachedToNode, "", "")
	check("elsewhere", virtv1.HotplugVolumeAttachedToNode, "", "")
	check("mounted", virtv1.VolumeReady, ReasonVolumeReady, "sda")
	check("gone-indomain", virtv1.VolumeReady, "", "")
	check("gone-ready", virtv1.HotplugVolumeUnMounted, ReasonUnmounted, "")
	check("gone-detaching", virtv1.HotplugVolumeDetaching, "", "")
	check("root", "", "", "vda")
	if m["gone-ready"].Message != "Volume gone-ready has been unmounted from virt-launcher pod" {
		t.Errorf("unmount message %q", m["gone-ready"].Message)
	}
}

// A hot-plug volume goes Pending/AttachedToNode -> MountedToPod -> Ready
// and, once out of the spec, loses its target, then UnMountedFromPod: one
// step per pass, and no change once it arrived.
func TestVolumeWalk(t *testing.T) {
	vmi := vmiWith(map[string]virtv1.DiskBus{"hot": ""},
		virtv1.VolumeStatus{Name: "hot", Phase: virtv1.HotplugVolumeAttachedToNode, HotplugVolume: hp("u1")})
	host := Mounted{"u1": true}
	var phases []string
	for i := 0; i < 4; i++ {
		SetVolumes(vmi, Volumes(vmi, host))
		s := vmi.Status.VolumeStatus[0]
		phases = append(phases, string(s.Phase)+"/"+s.Target)
	}
	vmi.Spec.Volumes = nil
	for i := 0; i < 3; i++ {
		SetVolumes(vmi, Volumes(vmi, host))
		s := vmi.Status.VolumeStatus[0]
		phases = append(phases, string(s.Phase)+"/"+s.Target)
	}
	want := "MountedToPod/ Ready/sda Ready/sda Ready/sda Ready/ UnMountedFromPod/ UnMountedFromPod/"
	if got := join(phases); got != want {
		t.Errorf("walk\n got %s\nwant %s", got, want)
	}
}

func join(s []string) string { return strings.Join(s, " ") }

// Start and Shutdown are one step each, and a down handler takes none.
func TestStartShutdownAndSwitch(t *testing.T) {
	vmi := &virtv1.VirtualMachineInstance{Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Scheduled, NodeName: "n1"}}
	sw := &Switch{}
	sw.SetDown("n1", true)
	if Step(vmi, nil, sw) || vmi.Status.Phase != virtv1.Scheduled {
		t.Fatalf("a down handler started the VMI: %s", vmi.Status.Phase)
	}
	if got := sw.List(); len(got) != 1 || got[0] != "n1" {
		t.Fatalf("down: %v", got)
	}
	sw.SetDown("n1", false)
	if !Step(vmi, nil, sw) || vmi.Status.Phase != virtv1.Running || vmi.Status.SelinuxContext != "none" || vmi.Status.Machine == nil {
		t.Fatalf("not started: %+v", vmi.Status)
	}
	if Step(vmi, nil, sw) {
		t.Fatal("a Running VMI without volumes changed")
	}
	now := metav1.Now()
	vmi.DeletionTimestamp = &now
	if !Step(vmi, nil, sw) || vmi.Status.Phase != virtv1.Succeeded {
		t.Fatalf("not shut down: %s", vmi.Status.Phase)
	}
	if Step(vmi, nil, sw) {
		t.Fatal("a final VMI changed")
	}
	if n := len(vmi.Status.PhaseTransitionTimestamps); n != 2 {
		t.Errorf("%d phase transitions, want 2", n)
	}
}
