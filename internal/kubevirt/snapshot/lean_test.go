package snapshot

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

var (
	leanNow  = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	leanYes  = true
	leanRun  = kubevirtv1.RunStrategyAlways
	leanMigr = kubevirtv1.UpdateVolumesStrategyMigration
)

func fullMeta(annotations map[string]string) metav1.ObjectMeta {
	grace := int64(30)
	ann := map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"big":"json"}`}
	for k, v := range annotations {
		ann[k] = v
	}
	return metav1.ObjectMeta{
		Name: "x", GenerateName: "x-", Namespace: "ns", UID: "uid-x", ResourceVersion: "42", Generation: 3,
		CreationTimestamp: leanNow, DeletionTimestamp: &leanNow, DeletionGracePeriodSeconds: &grace,
		Labels:          map[string]string{"cluster": "c1"},
		Annotations:     ann,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "x", UID: "uid-vm", Controller: &leanYes}},
		Finalizers:      []string{"kubernetes.io/pvc-protection"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
}

// wantMeta is fullMeta as Lean keeps it.
func wantMeta(annotations map[string]string) metav1.ObjectMeta {
	m := fullMeta(nil)
	m.Annotations, m.ManagedFields = annotations, nil
	return m
}

func fullVolumes() []kubevirtv1.Volume {
	return []kubevirtv1.Volume{
		{Name: "root", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "root-dv", Hotpluggable: false}}},
		{Name: "hp", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "hp-claim"}, Hotpluggable: true}}},
		{Name: "eph", VolumeSource: kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "golden"}}}},
		{Name: "dump", VolumeSource: kubevirtv1.VolumeSource{MemoryDump: &kubevirtv1.MemoryDumpVolumeSource{}}},
		{Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}},
	}
}

func wantVolumes() []kubevirtv1.Volume {
	v := fullVolumes()
	v[4].CloudInitNoCloud = nil // the name stays: the volume exists
	return v
}

func fullVM() *kubevirtv1.VirtualMachine {
	running := true
	return &kubevirtv1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"},
		ObjectMeta: fullMeta(nil),
		Spec: kubevirtv1.VirtualMachineSpec{
			Running: &running, RunStrategy: &leanRun, UpdateVolumesStrategy: &leanMigr,
			Instancetype: &kubevirtv1.InstancetypeMatcher{Name: "u1", RevisionName: "x-u1-1"},
			Preference:   &kubevirtv1.PreferenceMatcher{Name: "fedora", RevisionName: "x-fedora-1"},
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"cluster": "c1"}, Annotations: map[string]string{"a": "b"}},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Volumes:  fullVolumes(),
					Domain:   kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "root"}}}},
					Networks: []kubevirtv1.Network{{Name: "default"}},
				},
			},
			DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root-dv", Labels: map[string]string{"a": "b"}},
				Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}}}},
		},
		Status: kubevirtv1.VirtualMachineStatus{
			Created: true, Ready: true, PrintableStatus: kubevirtv1.VirtualMachineStatusRunning,
			Conditions: []kubevirtv1.VirtualMachineCondition{
				{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionTrue},
				{Type: kubevirtv1.VirtualMachineFailure, Status: corev1.ConditionTrue, Reason: "HotPlugVolumeError", Message: "boom"},
			},
			StateChangeRequests:    []kubevirtv1.VirtualMachineStateChangeRequest{{Action: kubevirtv1.StartRequest}},
			VolumeRequests:         []kubevirtv1.VirtualMachineVolumeRequest{{RemoveVolumeOptions: &kubevirtv1.RemoveVolumeOptions{Name: "hp"}}},
			VolumeSnapshotStatuses: []kubevirtv1.VolumeSnapshotStatus{{Name: "root"}},
			InstancetypeRef:        &kubevirtv1.InstancetypeStatusRef{ControllerRevisionRef: &kubevirtv1.ControllerRevisionRef{Name: "x-u1-2"}},
			PreferenceRef:          &kubevirtv1.InstancetypeStatusRef{ControllerRevisionRef: &kubevirtv1.ControllerRevisionRef{Name: "x-fedora-2"}},
			ObservedGeneration:     3, DesiredGeneration: 3,
		},
	}
}

// leanEviction is fullVMI's eviction strategy.
var leanEviction = kubevirtv1.EvictionStrategyLiveMigrate

func fullVMI() *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: fullMeta(nil),
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Volumes:          fullVolumes(),
			Domain:           kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "root"}}}},
			EvictionStrategy: &leanEviction,
			Networks:         []kubevirtv1.Network{{Name: "default"}},
			NodeSelector:     map[string]string{"a": "b"},
			Tolerations:      []corev1.Toleration{{Key: "k"}},
		},
		Status: kubevirtv1.VirtualMachineInstanceStatus{
			NodeName: "node-1", Phase: kubevirtv1.Running, Reason: "r",
			ActivePods: map[types.UID]string{"launcher-uid": "node-1"},
			Conditions: []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue},
				{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse, Reason: "DisksNotLiveMigratable", Message: "PVC is not shared", LastTransitionTime: leanNow}},
			Interfaces:  []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: "10.0.0.1"}},
			GuestOSInfo: kubevirtv1.VirtualMachineInstanceGuestOSInfo{Name: "Fedora"},
			VolumeStatus: []kubevirtv1.VolumeStatus{{
				Name: "hp", Target: "sda", Phase: kubevirtv1.VolumeReady, Reason: "VolumeReady", Message: "attached", Size: 1 << 30,
				PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: "hp-claim", Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				HotplugVolume:             &kubevirtv1.HotplugVolumeStatus{AttachPodName: "hp-volume-x", AttachPodUID: "hp-uid"},
			}},
			MigrationState: &kubevirtv1.VirtualMachineInstanceMigrationState{
				StartTimestamp: &leanNow, SourceNode: "node-1", TargetNode: "node-2", TargetPod: "t", SourcePod: "s",
				TargetAttachmentPodUID: "target-hp-uid", MigrationUID: "m-1", Completed: true, Failed: true,
				TargetNodeAddress: "192.0.2.1", TargetDirectMigrationNodePorts: map[string]int{"1": 2}, FailureReason: "f",
			},
		},
	}
}

func fullPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: fullMeta(nil),
		Spec: corev1.PodSpec{
			NodeName: "node-1",
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
			},
			Containers:  []corev1.Container{{Name: "c", Image: "img"}},
			Tolerations: []corev1.Toleration{{Key: "k"}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady}},
			PodIP:      "10.0.0.2",
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "c", Image: "img", RestartCount: 3, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: leanNow}}},
				{Name: "d", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "long", FinishedAt: leanNow, ContainerID: "id"}}},
			},
			InitContainerStatuses:      []corev1.ContainerStatus{{Name: "i", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing", Message: "m"}}}},
			EphemeralContainerStatuses: []corev1.ContainerStatus{{Name: "e", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		},
	}
}

// TestLeanKeepsWhatIsRead: per kind, each field a check, a gatherer or the
// controller reads survives Lean unchanged, and the rest is gone.
func TestLeanKeepsWhatIsRead(t *testing.T) {
	sc := "standard"
	fs := corev1.PersistentVolumeFilesystem
	pvName := "pv-1"
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"VirtualMachine", fullVM(), func() any {
			vm := fullVM()
			want := &kubevirtv1.VirtualMachine{TypeMeta: vm.TypeMeta, ObjectMeta: wantMeta(nil)}
			want.Spec = kubevirtv1.VirtualMachineSpec{Running: vm.Spec.Running, RunStrategy: vm.Spec.RunStrategy, UpdateVolumesStrategy: vm.Spec.UpdateVolumesStrategy,
				Instancetype: vm.Spec.Instancetype, Preference: vm.Spec.Preference,
				Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"cluster": "c1"}},
					Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: wantVolumes()}},
				DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root-dv"}}}}
			want.Status = vm.Status
			want.Status.Conditions = vm.Status.Conditions[1:]
			want.Status.VolumeSnapshotStatuses = nil
			return want
		}()},
		{"VirtualMachineInstance", fullVMI(), func() any {
			vmi := fullVMI()
			want := &kubevirtv1.VirtualMachineInstance{TypeMeta: vmi.TypeMeta, ObjectMeta: wantMeta(nil)}
			want.Spec.Volumes, want.Spec.EvictionStrategy = wantVolumes(), &leanEviction
			want.Status = kubevirtv1.VirtualMachineInstanceStatus{NodeName: "node-1", Phase: kubevirtv1.Running, ActivePods: vmi.Status.ActivePods,
				Conditions: []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse, Reason: "DisksNotLiveMigratable", Message: "PVC is not shared"}},
				VolumeStatus: []kubevirtv1.VolumeStatus{{Name: "hp", Phase: kubevirtv1.VolumeReady,
					PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: "hp-claim"},
					HotplugVolume:             &kubevirtv1.HotplugVolumeStatus{AttachPodName: "hp-volume-x", AttachPodUID: "hp-uid"}}},
				MigrationState: &kubevirtv1.VirtualMachineInstanceMigrationState{StartTimestamp: &leanNow, SourceNode: "node-1", TargetNode: "node-2", TargetPod: "t", SourcePod: "s",
					TargetAttachmentPodUID: "target-hp-uid", MigrationUID: "m-1", Completed: true, Failed: true}}
			return want
		}()},
		{"Pod", fullPod(), &corev1.Pod{ObjectMeta: wantMeta(nil),
			Spec: corev1.PodSpec{NodeName: "node-1", Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
				{Name: "token"},
			}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				ContainerStatuses: []corev1.ContainerStatus{
					{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: leanNow}}},
					{Name: "d", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: leanNow}}},
				},
				InitContainerStatuses:      []corev1.ContainerStatus{{Name: "i", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
				EphemeralContainerStatuses: []corev1.ContainerStatus{{Name: "e", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
			}}},
		{"PersistentVolumeClaim", &corev1.PersistentVolumeClaim{ObjectMeta: fullMeta(nil),
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &sc, VolumeMode: &fs,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			&corev1.PersistentVolumeClaim{ObjectMeta: wantMeta(nil),
				Spec:   corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &sc, VolumeMode: &fs},
				Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}},
		{"PersistentVolume", &corev1.PersistentVolume{ObjectMeta: fullMeta(nil),
			Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "c"}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				NodeAffinity:           &corev1.VolumeNodeAffinity{},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h", FSType: "ext4", VolumeAttributes: map[string]string{"a": "b"}}}},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound, Message: "m"}},
			&corev1.PersistentVolume{ObjectMeta: wantMeta(nil),
				Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "c"}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h", FSType: "ext4"}}},
				Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}},
		{"Node", &corev1.Node{ObjectMeta: fullMeta(map[string]string{NodeIDAnnotation: `{"d":"id-1"}`, ControllerManagedAttachAnnotation: "true"}),
			Spec: corev1.NodeSpec{ProviderID: "kubevirt://x", PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{{Key: OutOfServiceTaint}}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Images:       []corev1.ContainerImage{{Names: []string{"img"}}},
				Capacity:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
				VolumesInUse: []corev1.UniqueVolumeName{"kubernetes.io/csi/d^h"}}},
			&corev1.Node{ObjectMeta: wantMeta(map[string]string{NodeIDAnnotation: `{"d":"id-1"}`, ControllerManagedAttachAnnotation: "true"}),
				Spec:   corev1.NodeSpec{ProviderID: "kubevirt://x", Taints: []corev1.Taint{{Key: OutOfServiceTaint}}},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, VolumesInUse: []corev1.UniqueVolumeName{"kubernetes.io/csi/d^h"}}}},
		{"VolumeAttachment", &storagev1.VolumeAttachment{ObjectMeta: fullMeta(map[string]string{VANodeIDAnnotation: "id-1"}),
			Spec:   storagev1.VolumeAttachmentSpec{Attacher: "d", NodeName: "node-1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}},
			Status: storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/sdb"}, DetachError: &storagev1.VolumeError{Message: "m"}}},
			&storagev1.VolumeAttachment{ObjectMeta: wantMeta(map[string]string{VANodeIDAnnotation: "id-1"}),
				Spec:   storagev1.VolumeAttachmentSpec{Attacher: "d", NodeName: "node-1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}},
				Status: storagev1.VolumeAttachmentStatus{Attached: true, DetachError: &storagev1.VolumeError{Message: "m"}}}},
		{"DataVolume", &cdiv1.DataVolume{ObjectMeta: fullMeta(nil),
			Spec:   cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}},
			Status: cdiv1.DataVolumeStatus{Phase: cdiv1.Failed, ClaimName: "x", Progress: "10%", Conditions: []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeReady}}}},
			&cdiv1.DataVolume{ObjectMeta: wantMeta(nil), Status: cdiv1.DataVolumeStatus{Phase: cdiv1.Failed, ClaimName: "x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Lean(tc.in)
			if got != tc.in {
				t.Fatal("Lean returned another object: it must change the one it is given")
			}
			assertSameJSON(t, "lean", got, tc.want)
			again := Lean(got)
			assertSameJSON(t, "leaned twice", again, tc.want)
			if got, err := LeanTransform(again); err != nil || got != again {
				t.Fatalf("LeanTransform = %v, %v", got, err)
			}
		})
	}
}

func assertSameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// TestLeanLeavesOtherKindsAlone: unknown kinds, values rather than
// pointers, and nil pointers come back as they are.
func TestLeanLeavesOtherKindsAlone(t *testing.T) {
	kv := &kubevirtv1.KubeVirt{ObjectMeta: fullMeta(nil)}
	want := kv.DeepCopy()
	if got := Lean(kv); got != kv || !reflect.DeepEqual(kv, want) {
		t.Errorf("Lean changed a KubeVirt: %+v", kv)
	}
	cr := &storagev1.CSIDriver{ObjectMeta: fullMeta(nil)}
	if Lean(cr); !reflect.DeepEqual(cr.ObjectMeta, fullMeta(nil)) {
		t.Error("Lean changed a CSIDriver")
	}
	value := *fullPod()
	if got := Lean(value).(corev1.Pod); !reflect.DeepEqual(got, *fullPod()) {
		t.Error("Lean changed a Pod passed by value")
	}
	for _, nilPtr := range []any{(*corev1.Pod)(nil), (*kubevirtv1.VirtualMachine)(nil), (*kubevirtv1.VirtualMachineInstance)(nil), (*corev1.Node)(nil),
		(*corev1.PersistentVolume)(nil), (*corev1.PersistentVolumeClaim)(nil), (*storagev1.VolumeAttachment)(nil), (*cdiv1.DataVolume)(nil), nil, "x"} {
		if got := Lean(nilPtr); got != nilPtr {
			t.Errorf("Lean(%#v) = %#v", nilPtr, got)
		}
	}
	// A VM without a template, dataVolumeTemplates or conditions stays so.
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}
	Lean(vm)
	if vm.Spec.Template != nil || vm.Spec.DataVolumeTemplates != nil || vm.Status.Conditions != nil || vm.Annotations != nil {
		t.Errorf("Lean added to a bare VM: %+v", vm)
	}
}

// TestLeanTypedFloor logs the size of the empty typed structs, the part of
// a cached object that no transform can drop (docs/performance.md).
func TestLeanTypedFloor(t *testing.T) {
	t.Logf("VirtualMachineInstance %d B, VirtualMachine %d B (+ template %d B), VolumeStatus %d B, Volume %d B, Pod %d B, ObjectMeta %d B",
		unsafe.Sizeof(kubevirtv1.VirtualMachineInstance{}), unsafe.Sizeof(kubevirtv1.VirtualMachine{}), unsafe.Sizeof(kubevirtv1.VirtualMachineInstanceTemplateSpec{}),
		unsafe.Sizeof(kubevirtv1.VolumeStatus{}), unsafe.Sizeof(kubevirtv1.Volume{}), unsafe.Sizeof(corev1.Pod{}), unsafe.Sizeof(metav1.ObjectMeta{}))
}
