package check

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tether-dev/tether/internal/snapshot"
)

var poolDVPhase = []cdiv1.DataVolumePhase{cdiv1.Succeeded, cdiv1.Failed, cdiv1.ImportInProgress, cdiv1.Pending, cdiv1.WaitForFirstConsumer, "", cdiv1.Unknown, cdiv1.Succeeded}

// buildDangling makes a random snapshot for DanglingVolumeReference: the
// shared generator's VMs, VMIs and pods from the first half of data, PVCs,
// DataVolumes and dataVolumeTemplates from the second; the check is
// requested by name half of the time.
func buildDangling(data []byte) (*snapshot.Snapshot, Policy, time.Time) {
	g1, g2 := &gen{b: data[:len(data)/2]}, &gen{b: data[len(data)/2:]}
	s, p, now := g1.build()
	base := snapshot.Snapshot{VMs: s.VMs, VMIs: s.VMIs, AttachmentPods: s.AttachmentPods, FeatureGates: s.FeatureGates, Tenants: s.Tenants}
	seen := map[snapshot.Key]bool{}
	for i := g2.n(6); i > 0; i-- {
		if m, ok := g2.meta(poolVolume, seen); ok {
			base.PVCs = append(base.PVCs, corev1.PersistentVolumeClaim{ObjectMeta: m})
		}
	}
	seen = map[snapshot.Key]bool{}
	for i := g2.n(5); i > 0; i-- {
		if m, ok := g2.meta(poolVolume, seen); ok {
			base.DataVolumes = append(base.DataVolumes, cdiv1.DataVolume{ObjectMeta: m, Status: cdiv1.DataVolumeStatus{Phase: poolDVPhase[g2.n(len(poolDVPhase))]}})
		}
	}
	for i := range base.VMs {
		if g2.n(3) == 0 {
			base.VMs[i].Spec.DataVolumeTemplates = append(base.VMs[i].Spec.DataVolumeTemplates,
				kubevirtv1.DataVolumeTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: g2.of(poolVolume...)}})
		}
	}
	if g2.bool() {
		p.Checks = []string{DanglingVolumeReference}
	}
	return snapshot.New(base), p, now
}

// FuzzDanglingVolumeReference: no panic, deterministic, and no safe action
// that the independent rules below forbid.
func FuzzDanglingVolumeReference(f *testing.F) {
	for _, s := range [][]byte{{}, {1, 2, 3, 4}, []byte("dangling references are not always dangling"), {255, 0, 255, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, p, now := buildDangling(data)
		fs := FindDanglingVolumeReferences(NewInput(s, p, now))
		if !reflect.DeepEqual(fs, FindDanglingVolumeReferences(NewInput(s, p, now))) {
			t.Fatal("not deterministic")
		}
		for _, fd := range fs {
			assertWellFormed(t, fd)
			if why := unsafeDangling(s, p, fd); fd.Action.Safe && why != "" {
				t.Fatalf("safe %s proposed although %s\nfinding: %+v", fd.Action.Type, why, fd)
			}
		}
	})
}

func TestRandomSnapshotsKeepDanglingInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	seen := map[ActionType]int{}
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := 0; i < n; i++ {
		data := make([]byte, 64+rng.IntN(320))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		s, p, now := buildDangling(data)
		for _, fd := range FindDanglingVolumeReferences(NewInput(s, p, now)) {
			assertWellFormed(t, fd)
			if !fd.Action.Safe {
				continue
			}
			seen[fd.Action.Type]++
			if why := unsafeDangling(s, p, fd); why != "" {
				t.Fatalf("input %x: safe %s proposed although %s\nfinding: %+v", data, fd.Action.Type, why, fd)
			}
		}
	}
	for _, a := range []ActionType{VMRemoveVolume, VMIRemoveVolume} {
		if seen[a] == 0 && !testing.Short() {
			t.Errorf("the generator never reached a safe %s", a)
		}
	}
	t.Logf("safe actions seen: %v", seen)
}

// unsafeDangling re-derives, without the check's code, every reason a
// DanglingVolumeReference action must not be safe.
func unsafeDangling(s *snapshot.Snapshot, p Policy, fd Finding) string {
	ns := fd.Namespace
	switch {
	case !slices.Contains(p.Checks, DanglingVolumeReference):
		return "the check was not requested"
	case fd.Volume == "":
		return "the volume has no name"
	case !nsInScope(p, ns) || !strings.HasPrefix(fd.Volume, p.Scope.VolumePrefix):
		return "out of scope"
	}
	vm, vmi := findVM(s, ns, fd.Object.Name), findVMI(s, ns, fd.Object.Name)
	var vol *kubevirtv1.Volume
	switch fd.Object.Kind {
	case kindVM:
		if vm == nil || vm.UID != fd.Object.UID || vm.Spec.Template == nil {
			return "the VM does not exist"
		}
		if p.Scope.Selector != nil && !p.Scope.Selector.Matches(labels.Set(vm.Spec.Template.ObjectMeta.Labels)) {
			return "the VM is not selected"
		}
		if vm.DeletionTimestamp != nil {
			return "the VM is terminating"
		}
		vol = snapshot.VMVolume(vm, fd.Volume)
	case kindVMI:
		if vmi == nil || vmi.UID != fd.Object.UID {
			return "the VMI does not exist"
		}
		if p.Scope.Selector != nil && !p.Scope.Selector.Matches(labels.Set(vmi.Labels)) {
			return "the VMI is not selected"
		}
		if vmi.Status.Phase != kubevirtv1.Running {
			return "the VMI is not running"
		}
		ref := metav1.GetControllerOf(vmi)
		vmOwned := ref != nil && ref.Kind == "VirtualMachine" && (ref.APIVersion == "" || strings.HasPrefix(ref.APIVersion, "kubevirt.io/"))
		if vmOwned && (!s.FeatureGates.Known || !contains(s.FeatureGates.Enabled, snapshot.HotplugVolumesGate)) {
			return "the VMI-level API needs the HotplugVolumes gate for a VM-owned VMI"
		}
		vol = snapshot.VMIVolume(vmi, fd.Volume)
	default:
		return "unknown subject kind " + fd.Object.Kind
	}
	if !snapshot.Hotpluggable(vol) {
		return "the volume is not hot-pluggable (a boot or regular disk)"
	}
	claim := snapshot.ClaimName(vol)
	if why := storageStillThere(s, ns, claim, vol.DataVolume != nil); why != "" {
		return why
	}
	if vmi == nil {
		return ""
	}
	return vmiUsesClaim(s, vmi, fd.Volume, claim)
}

func storageStillThere(s *snapshot.Snapshot, ns, claim string, isDV bool) string {
	var pvc *corev1.PersistentVolumeClaim
	for i := range s.PVCs {
		if s.PVCs[i].Namespace == ns && s.PVCs[i].Name == claim {
			pvc = &s.PVCs[i]
		}
	}
	var dv *cdiv1.DataVolume
	for i := range s.DataVolumes {
		if s.DataVolumes[i].Namespace == ns && s.DataVolumes[i].Name == claim {
			dv = &s.DataVolumes[i]
		}
	}
	switch {
	case pvc != nil && pvc.DeletionTimestamp == nil && (!isDV || dv == nil || (dv.DeletionTimestamp == nil && dv.Status.Phase == cdiv1.Succeeded)):
		return "the PVC exists"
	case dv != nil && dv.DeletionTimestamp == nil && dv.Status.Phase != cdiv1.Succeeded && dv.Status.Phase != cdiv1.Failed:
		return "the DataVolume is still provisioning"
	case dv == nil && pvc == nil:
		for _, vm := range s.VMs {
			for _, t := range vm.Spec.DataVolumeTemplates {
				if vm.Namespace == ns && t.Name == claim {
					return "a dataVolumeTemplate will create it"
				}
			}
		}
	}
	return ""
}

func vmiUsesClaim(s *snapshot.Snapshot, vmi *kubevirtv1.VirtualMachineInstance, volume, claim string) string {
	switch {
	case vmi.DeletionTimestamp != nil:
		return "the VMI is terminating"
	case vmi.Status.MigrationState != nil && !vmi.Status.MigrationState.Completed && !vmi.Status.MigrationState.Failed:
		return "the VMI is migrating"
	}
	for _, pvc := range s.PVCs {
		if pvc.Namespace == vmi.Namespace && pvc.Name == claim {
			return "a PVC of the claim's name exists while the VM runs"
		}
	}
	for _, vs := range vmi.Status.VolumeStatus {
		if vs.Name != volume {
			continue
		}
		if (vs.HotplugVolume != nil && vs.HotplugVolume.AttachPodName != "") || vs.Phase == kubevirtv1.VolumeReady ||
			vs.Phase == kubevirtv1.HotplugVolumeMounted || vs.Phase == kubevirtv1.HotplugVolumeAttachedToNode {
			return "the VMI status shows the volume attached"
		}
	}
	for _, pod := range s.AttachmentPods {
		if pod.Namespace != vmi.Namespace {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
				return "an attachment pod mounts the claim"
			}
		}
	}
	return ""
}
