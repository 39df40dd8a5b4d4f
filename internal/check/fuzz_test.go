package check

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/snapshot"
)

// FuzzOrphanHotplugVolume builds random snapshots and policies and checks
// the safety invariants of both checks on every finding; any panic fails.
func FuzzOrphanHotplugVolume(f *testing.F) {
	seeds := [][]byte{
		{},
		{0, 0, 0, 0},
		{3, 1, 1, 1, 1, 1, 1, 1, 3, 1, 0, 0, 1, 1, 1},
		[]byte("tether: never act on a volume in use"),
		[]byte{255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240},
		[]byte{1, 0, 1, 2, 0, 1, 3, 1, 2, 0, 0, 2, 1, 1, 0, 3, 2, 1, 0, 1, 1, 2, 0, 3, 1, 0, 2, 2, 1, 0, 1, 3},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, p, now := (&gen{b: data}).build()
		fs := Run(s, p, now)
		again := Run(s, p, now)
		if !reflect.DeepEqual(fs, again) {
			t.Fatalf("Run is not deterministic")
		}
		for _, fd := range fs {
			assertWellFormed(t, fd)
			if !fd.Action.Safe {
				continue
			}
			var why string
			switch fd.Check {
			case OrphanHotplugVolume:
				why = unsafeVolume(s, p, fd)
			case OrphanAttachmentPod:
				why = unsafePod(s, p, now, fd)
			}
			if why != "" {
				t.Fatalf("safe %s proposed although %s\nfinding: %+v", fd.Action.Type, why, fd)
			}
		}
	})
}

// unsafeVolume re-derives, independently of the check, every reason a
// volume action must not be safe, and returns the first that applies.
func unsafeVolume(s *snapshot.Snapshot, p Policy, fd Finding) string {
	vmi := findVMI(s, fd.Namespace, fd.Object.Name)
	if vmi == nil || vmi.UID != fd.Object.UID {
		return "the VMI does not exist"
	}
	var vs *kubevirtv1.VolumeStatus
	for i := range vmi.Status.VolumeStatus {
		if vmi.Status.VolumeStatus[i].Name == fd.Volume && vmi.Status.VolumeStatus[i].HotplugVolume != nil {
			vs = &vmi.Status.VolumeStatus[i]
		}
	}
	switch {
	case vs == nil:
		return "the VMI lists no such hot-plug volume"
	case !nsInScope(p, vmi.Namespace):
		return "the namespace is out of scope"
	case p.Scope.Selector != nil && !p.Scope.Selector.Matches(labels.Set(vmi.Labels)):
		return "the VMI is not selected"
	case !strings.HasPrefix(fd.Volume, p.Scope.VolumePrefix):
		return "the volume is out of the prefix scope"
	case vmi.DeletionTimestamp != nil:
		return "the VMI is terminating"
	case vmi.Status.MigrationState != nil && !vmi.Status.MigrationState.Completed && !vmi.Status.MigrationState.Failed:
		return "the VMI is migrating"
	case vmi.Status.Phase != kubevirtv1.Running:
		return "the VMI is not running"
	case vs.Phase != kubevirtv1.VolumeReady:
		return "the volume is not Ready"
	case !vmiSpecLists(vmi, fd.Volume):
		return "the VMI spec no longer lists it (detach in progress)"
	}
	if why := tenantWantsOrUnknown(s, vmi, fd.Volume); why != "" {
		return why
	}
	return unsafeForOwner(s, p, vmi, fd)
}

func unsafeForOwner(s *snapshot.Snapshot, p Policy, vmi *kubevirtv1.VirtualMachineInstance, fd Finding) string {
	ref := metav1.GetControllerOf(vmi)
	vmOwned := ref != nil && ref.Kind == "VirtualMachine" && (ref.APIVersion == "" || strings.HasPrefix(ref.APIVersion, "kubevirt.io/"))
	// Only tenants that have a Node of the VMI's name judge its volumes.
	tenants := withNode(tenantsFor(s, vmi.Namespace), vmi.Name)
	if !vmOwned {
		if len(tenants) == 0 {
			return "the VMI is standalone and no tenant evidence applies"
		}
		return ""
	}
	if fd.Action.Type == VMIRemoveVolume && (!s.FeatureGates.Known || !contains(s.FeatureGates.Enabled, snapshot.HotplugVolumesGate)) {
		return "the VMI-level API needs the HotplugVolumes gate for a VM-owned VMI"
	}
	vm := findVM(s, vmi.Namespace, ref.Name)
	if vm == nil || (ref.UID != "" && vm.UID != "" && ref.UID != vm.UID) {
		return "" // the VM is gone
	}
	inSpec := false
	if vm.Spec.Template != nil {
		for _, v := range vm.Spec.Template.Spec.Volumes {
			inSpec = inSpec || v.Name == fd.Volume
		}
	}
	for _, r := range vm.Status.VolumeRequests {
		if (r.AddVolumeOptions != nil && r.AddVolumeOptions.Name == fd.Volume) || (r.RemoveVolumeOptions != nil && r.RemoveVolumeOptions.Name == fd.Volume) {
			return "a VM volume request is pending for it"
		}
	}
	switch {
	case vm.DeletionTimestamp != nil:
		return "the VM is terminating"
	case inSpec && !p.TenantAuthoritative:
		return "the VM spec lists it"
	case inSpec && len(tenants) == 0:
		return "the VM spec lists it and no tenant has a node of the VMI's name"
	case inSpec && fd.Action.Type != VMRemoveVolume:
		return "the VM spec lists it but the action is not VM-level"
	case len(tenants) == 0 && !p.AllowVMIOnlyDetach:
		return "it is a VMI-only hot-plug without tenant evidence or opt-in"
	}
	return ""
}

// tenantWantsOrUnknown reports any applicable tenant that is unreachable or
// has a KubeVirt CSI attachment to the VMI's node that may be this volume.
func tenantWantsOrUnknown(s *snapshot.Snapshot, vmi *kubevirtv1.VirtualMachineInstance, volume string) string {
	claims := map[string]bool{volume: true}
	for _, v := range vmi.Spec.Volumes {
		if v.Name == volume && v.PersistentVolumeClaim != nil {
			claims[v.PersistentVolumeClaim.ClaimName] = true
		}
		if v.Name == volume && v.DataVolume != nil {
			claims[v.DataVolume.Name] = true
		}
	}
	for _, t := range tenantsFor(s, vmi.Namespace) {
		if !t.Reachable {
			return "an applicable tenant is unreachable"
		}
		for _, va := range t.VolumeAttachments {
			if va.Spec.Attacher != snapshot.KubevirtCSIAttacher || va.Spec.NodeName != vmi.Name {
				continue
			}
			handle, known := vaHandle(t, va.Spec.Source.PersistentVolumeName, va.Spec.Source.InlineVolumeSpec)
			if !known || claims[handle] {
				return "tenant " + t.Name + " may attach it to the VMI's node"
			}
		}
	}
	return ""
}

func vaHandle(t snapshot.Tenant, pvName *string, inline *corev1.PersistentVolumeSpec) (string, bool) {
	switch {
	case pvName != nil:
		for _, pv := range t.PVs {
			if pv.Name == *pvName && pv.Spec.CSI != nil && pv.Spec.CSI.VolumeHandle != "" {
				return pv.Spec.CSI.VolumeHandle, true
			}
		}
	case inline != nil && inline.CSI != nil && inline.CSI.VolumeHandle != "":
		return inline.CSI.VolumeHandle, true
	}
	return "", false
}

// unsafePod re-derives every reason a pod deletion must not be safe.
func unsafePod(s *snapshot.Snapshot, p Policy, now time.Time, fd Finding) string {
	pod := findPod(s, fd.Namespace, fd.Object.Name)
	minAge := p.MinAttachmentPodAge
	if minAge == 0 {
		minAge = DefaultMinAttachmentPodAge
	}
	switch {
	case pod == nil || pod.UID != fd.Object.UID:
		return "the pod does not exist"
	case !p.DeleteAttachmentPods:
		return "deletion was not requested"
	case !nsInScope(p, pod.Namespace):
		return "the namespace is out of scope"
	case pod.DeletionTimestamp != nil:
		return "the pod is terminating"
	case pod.CreationTimestamp.IsZero() || now.Sub(pod.CreationTimestamp.Time) < minAge:
		return "the pod is too young"
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && !strings.HasPrefix(v.Name, p.Scope.VolumePrefix) {
			return "a pod volume is out of the prefix scope"
		}
	}
	owner := podOwnerVMI(s, pod)
	if p.Scope.Selector != nil && !p.Scope.Selector.Empty() && (owner == nil || !p.Scope.Selector.Matches(labels.Set(owner.Labels))) {
		return "the pod's VMI is not selected"
	}
	if owner != nil && (owner.DeletionTimestamp != nil || (owner.Status.MigrationState != nil && !owner.Status.MigrationState.Completed && !owner.Status.MigrationState.Failed)) {
		return "its VMI is terminating or migrating"
	}
	return podStillUsed(s, pod)
}

func podStillUsed(s *snapshot.Snapshot, pod *corev1.Pod) string {
	claims := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.PersistentVolumeClaim.ClaimName] = true
		}
	}
	for i := range s.VMIs {
		vmi := &s.VMIs[i]
		if vmi.Namespace != pod.Namespace {
			continue
		}
		if ms := vmi.Status.MigrationState; ms != nil && pod.UID != "" && ms.TargetAttachmentPodUID == pod.UID {
			return "a VMI migrates to it"
		}
		for j := range vmi.Status.VolumeStatus {
			vs := &vmi.Status.VolumeStatus[j]
			if hp := vs.HotplugVolume; hp != nil && hp.AttachPodName == pod.Name && (hp.AttachPodUID == "" || pod.UID == "" || hp.AttachPodUID == pod.UID) {
				return "VMI " + vmi.Name + " references it"
			}
			for _, c := range snapshot.VolumeStatusClaims(vmi, vs) {
				if claims[c] {
					return "VMI " + vmi.Name + " still lists its claim " + c
				}
			}
		}
	}
	return ""
}

func podOwnerVMI(s *snapshot.Snapshot, pod *corev1.Pod) *kubevirtv1.VirtualMachineInstance {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil
	}
	for i := range s.VMIs {
		vmi := &s.VMIs[i]
		if vmi.Namespace != pod.Namespace {
			continue
		}
		if ref.Kind == "VirtualMachineInstance" && vmi.Name == ref.Name && (ref.UID == "" || vmi.UID == "" || vmi.UID == ref.UID) {
			return vmi
		}
		if _, ok := vmi.Status.ActivePods[ref.UID]; ok && ref.Kind == "Pod" && ref.UID != "" {
			return vmi
		}
	}
	return nil
}

func findPod(s *snapshot.Snapshot, ns, name string) *corev1.Pod {
	for i := range s.AttachmentPods {
		if s.AttachmentPods[i].Namespace == ns && s.AttachmentPods[i].Name == name {
			return &s.AttachmentPods[i]
		}
	}
	return nil
}

func vmiSpecLists(vmi *kubevirtv1.VirtualMachineInstance, volume string) bool {
	for _, v := range vmi.Spec.Volumes {
		if v.Name == volume {
			return true
		}
	}
	return false
}

func tenantsFor(s *snapshot.Snapshot, ns string) []snapshot.Tenant {
	var out []snapshot.Tenant
	for _, t := range s.Tenants {
		if t.Namespace == "" || t.Namespace == ns {
			out = append(out, t)
		}
	}
	return out
}

func nsInScope(p Policy, ns string) bool {
	return len(p.Scope.Namespaces) == 0 || contains(p.Scope.Namespaces, ns)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func findVMI(s *snapshot.Snapshot, ns, name string) *kubevirtv1.VirtualMachineInstance {
	for i := range s.VMIs {
		if s.VMIs[i].Namespace == ns && s.VMIs[i].Name == name {
			return &s.VMIs[i]
		}
	}
	return nil
}

func findVM(s *snapshot.Snapshot, ns, name string) *kubevirtv1.VirtualMachine {
	for i := range s.VMs {
		if s.VMs[i].Namespace == ns && s.VMs[i].Name == name {
			return &s.VMs[i]
		}
	}
	return nil
}

// TestRandomSnapshotsKeepInvariants runs the fuzz body over seeded random
// inputs in every plain test run, and checks that the generator reaches
// every safe action, so that the invariants are not vacuous.
func TestRandomSnapshotsKeepInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[ActionType]int{}
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := 0; i < n; i++ {
		data := make([]byte, 64+rng.IntN(192))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		s, p, now := (&gen{b: data}).build()
		for _, fd := range Run(s, p, now) {
			assertWellFormed(t, fd)
			if !fd.Action.Safe {
				continue
			}
			seen[fd.Action.Type]++
			why := unsafeVolume(s, p, fd)
			if fd.Check == OrphanAttachmentPod {
				why = unsafePod(s, p, now, fd)
			}
			if why != "" {
				t.Fatalf("input %x: safe %s proposed although %s\nfinding: %+v", data, fd.Action.Type, why, fd)
			}
		}
	}
	for _, a := range []ActionType{VMIRemoveVolume, VMRemoveVolume, DeleteAttachmentPod} {
		if seen[a] == 0 && !testing.Short() {
			t.Errorf("the generator never reached a safe %s", a)
		}
	}
	t.Logf("safe actions seen: %v", seen)
}

func withNode(ts []snapshot.Tenant, node string) []snapshot.Tenant {
	var out []snapshot.Tenant
	for _, t := range ts {
		if contains(t.Nodes, node) {
			out = append(out, t)
		}
	}
	return out
}
