package check

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
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
				snapshot.DataVolumeTemplate{Name: g2.of(poolVolume...)})
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
	seen := map[drift.ActionType]int{}
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
	for _, a := range []drift.ActionType{VMRemoveVolume, VMIRemoveVolume} {
		if seen[a] == 0 && !testing.Short() {
			t.Errorf("the generator never reached a safe %s", a)
		}
	}
	t.Logf("safe actions seen: %v", seen)
}

// unsafeDangling says why the platform forbids a safe DanglingVolumeReference
// action, or "" when it allows it. A reference dangles only when nothing of
// the name exists or will exist (k8sExists, kvStorageExists, kvTemplated),
// and removevolume may drop only a hot-pluggable volume (kvHotpluggable)
// of a subject that still is the one the finding names (same UID), is not
// being deleted, and, with a VMI, does not use the volume (kvVolumeInUse)
// and is not migrating (kvMigrating); no VM volume request may be pending
// for it (kvRequestPending).
func unsafeDangling(s *snapshot.Snapshot, p Policy, fd drift.Finding) string {
	ns := fd.Namespace
	if !slices.Contains(p.Checks, DanglingVolumeReference) {
		return "the check was not requested"
	}
	if fd.Volume == "" {
		return "the volume has no name"
	}
	vm, vmi := findVM(s, ns, fd.Object.Name), findVMI(s, ns, fd.Object.Name)
	var vol *kubevirtv1.Volume
	switch fd.Object.Kind {
	case kindVM:
		if vm == nil || vm.UID != fd.Object.UID || vm.Spec.Template == nil {
			return "the VM does not exist"
		}
		if why := tetherInScope(p, ns, vm.Spec.Template.ObjectMeta.Labels, fd.Volume); why != "" {
			return why
		}
		if vm.DeletionTimestamp != nil {
			return "the VM is being deleted"
		}
		vol = kvVolume(vm.Spec.Template.Spec.Volumes, fd.Volume)
	case kindVMI:
		if vmi == nil || vmi.UID != fd.Object.UID {
			return "the VMI does not exist"
		}
		if why := tetherInScope(p, ns, vmi.Labels, fd.Volume); why != "" {
			return why
		}
		if vmi.Status.Phase != kubevirtv1.Running {
			return "the VMI is not running (VMI-level removevolume needs a running VMI)"
		}
		if _, owned := kvVMOwned(vmi); owned && !kvGateOn(s, kvHotplugGate) {
			return "the VMI-level API needs the HotplugVolumes gate for a VM-owned VMI"
		}
		vol = kvVolume(vmi.Spec.Volumes, fd.Volume)
	default:
		return "unknown subject kind " + fd.Object.Kind
	}
	if !kvHotpluggable(vol) {
		return "the volume is not hot-pluggable (a boot or regular disk)"
	}
	name := kvStorageName(vol)
	if why := kvStorageExists(s, ns, name); why != "" {
		return why
	}
	if kvTemplated(s, ns, name) {
		return "a dataVolumeTemplate will create it"
	}
	if vm != nil && vm.UID == fd.Object.UID && kvRequestPending(vm, fd.Volume) {
		return "a VM volume request is pending for it"
	}
	if vmi == nil {
		return ""
	}
	switch {
	case vmi.DeletionTimestamp != nil:
		return "the VMI is being deleted"
	case kvMigrating(vmi):
		return "the VMI is migrating"
	}
	return kvVolumeInUse(s, vmi, fd.Volume, name)
}
