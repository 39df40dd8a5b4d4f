package check

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// reportNS is the namespace of the report-only checks' generated worlds,
// apart from the other generators' namespaces so the worlds can be merged.
const reportNS = "report"

var (
	poolReportVM    = []string{"vm-a", "vm-b", "vm-c"}
	poolReportClaim = []string{"disk-1", "disk-2", "disk-3"}
	poolReportPhase = []kubevirtv1.VolumePhase{kubevirtv1.VolumeReady, kubevirtv1.HotplugVolumeMounted, kubevirtv1.HotplugVolumeDetaching,
		kubevirtv1.HotplugVolumeUnMounted, kubevirtv1.HotplugVolumeAttachedToNode, kubevirtv1.VolumePending, ""}
	poolReportVersion = []string{"v1.7.0", "v1.7.1", "v1.8.1", "v1.8.2", "v1.9.0", "v1.9.0-rc.0", "", "garbage"}
)

// reportWorld builds, from fuzz bytes, the world of the report-only
// checks: VMs sharing claims of random access modes (some disks shareable,
// some pending addvolume requests), their VMIs in random phases with
// hot-plug statuses in every phase, in or out of the spec, attachment pods
// created or terminating at random times, VMs with or without an
// interrupted volume migration, and a random KubeVirt version. Reading past
// the bytes yields zeros.
func (g *gen) reportWorld() (snapshot.Snapshot, Policy, time.Time) {
	var s snapshot.Snapshot
	at := func() metav1.Time { return metav1.NewTime(fixture.Epoch().Add(time.Duration(g.n(90)) * time.Minute)) }
	for _, claim := range poolReportClaim {
		if g.n(5) == 0 {
			continue
		}
		pvc := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: reportNS, Name: claim, UID: types.UID("uid-" + claim)}}
		for i := g.n(3); i >= 0; i-- {
			m := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteOnce, corev1.ReadWriteMany, corev1.ReadOnlyMany, corev1.ReadWriteOncePod}[g.n(5)]
			if g.n(3) == 0 {
				pvc.Status.AccessModes = append(pvc.Status.AccessModes, m)
			} else {
				pvc.Spec.AccessModes = append(pvc.Spec.AccessModes, m)
			}
		}
		s.PVCs = append(s.PVCs, pvc)
	}
	for _, name := range poolReportVM {
		if g.n(4) == 0 {
			continue
		}
		vm := kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: reportNS, Name: name, UID: types.UID("uid-" + name)}}
		if g.n(6) == 0 {
			t := at()
			vm.DeletionTimestamp, vm.Finalizers = &t, []string{fixture.TestFinalizer}
		}
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{}
		spec := &vm.Spec.Template.Spec
		for i := g.n(3); i > 0; i-- {
			v := kubevirtv1.Volume{Name: g.of("disk0", "data", "extra")}
			if slices.ContainsFunc(spec.Volumes, func(o kubevirtv1.Volume) bool { return o.Name == v.Name }) {
				continue // virt-api's webhook refuses two volumes of one name
			}
			claim := g.of(poolReportClaim...)
			if g.bool() {
				v.PersistentVolumeClaim = &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: g.bool()}
				v.PersistentVolumeClaim.ClaimName = claim
			} else {
				v.DataVolume = &kubevirtv1.DataVolumeSource{Name: claim, Hotpluggable: g.bool()}
			}
			spec.Volumes = append(spec.Volumes, v)
			d := kubevirtv1.Disk{Name: v.Name}
			if g.n(6) == 0 {
				yes := true
				d.Shareable = &yes
			}
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, d)
		}
		if g.n(4) == 0 {
			src := &kubevirtv1.HotplugVolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}}
			src.PersistentVolumeClaim.ClaimName = g.of(poolReportClaim...)
			vm.Status.VolumeRequests = append(vm.Status.VolumeRequests, kubevirtv1.VirtualMachineVolumeRequest{
				AddVolumeOptions: &kubevirtv1.AddVolumeOptions{Name: "hot", VolumeSource: src}})
		}
		if g.n(3) == 0 {
			g.interrupt(&vm, at)
		}
		s.VMs = append(s.VMs, snapshot.VMOf(&vm))
		if g.bool() {
			vmi := g.reportVMI(&vm, at, &s)
			s.VMIs = append(s.VMIs, snapshot.VMIOf(&vmi))
		}
	}
	s.FeatureGates = snapshot.FeatureGates{Known: g.n(4) != 0, KubeVirtVersion: poolReportVersion[g.n(len(poolReportVersion))], Phase: "Deployed"}
	p := Policy{StuckPhaseGrace: time.Duration(g.n(3)*10) * time.Minute}
	if g.n(4) == 0 {
		p.Scope.VolumePrefix = "disk-1"
	}
	return s, p, fixture.Epoch().Add(time.Duration(60+g.n(120)) * time.Minute)
}

// interrupt gives vm a volume migration KubeVirt may have cut short: the
// strategy, the recorded migrated volumes and the ManualRecoveryRequired
// condition, each present or not.
func (g *gen) interrupt(vm *kubevirtv1.VirtualMachine, at func() metav1.Time) {
	mig := kubevirtv1.UpdateVolumesStrategyMigration
	vm.Spec.UpdateVolumesStrategy = &mig
	if g.bool() {
		st := &kubevirtv1.VolumeMigrationState{}
		for _, v := range vm.Spec.Template.Spec.Volumes {
			if g.bool() {
				st.MigratedVolumes = append(st.MigratedVolumes, kubevirtv1.StorageMigratedVolumeInfo{VolumeName: v.Name,
					SourcePVCInfo:      &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: g.of(poolReportClaim...)},
					DestinationPVCInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: g.of(poolReportClaim...)}})
			}
		}
		vm.Status.VolumeUpdateState = &kubevirtv1.VolumeUpdateState{VolumeMigrationState: st}
	}
	status := []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}[g.n(4)]
	vm.Status.Conditions = append(vm.Status.Conditions, kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineManualRecoveryRequired,
		Status: status, LastTransitionTime: at(), Reason: "VMI was removed or was final during the volume migration"})
}

// reportVMI is vm's VMI: a random phase, node and migration; spec volumes
// from the VM; hot-plug statuses in random phases, in the spec or not,
// naming attachment pods that exist, are terminating, or are missing.
func (g *gen) reportVMI(vm *kubevirtv1.VirtualMachine, at func() metav1.Time, s *snapshot.Snapshot) kubevirtv1.VirtualMachineInstance {
	yes := true
	vmi := kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: reportNS, Name: vm.Name, UID: types.UID("uid-vmi-" + vm.Name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID, Controller: &yes}}}}
	vmi.Status.Phase = []kubevirtv1.VirtualMachineInstancePhase{kubevirtv1.Running, kubevirtv1.Running, kubevirtv1.Running, kubevirtv1.Scheduled, kubevirtv1.Succeeded, kubevirtv1.Failed}[g.n(6)]
	vmi.Status.NodeName = g.of("node-1", "node-2", "")
	if g.n(5) == 0 {
		vmi.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{Completed: g.bool()}
	}
	if g.n(8) == 0 {
		t := at()
		vmi.DeletionTimestamp, vmi.Finalizers = &t, []string{fixture.TestFinalizer}
	}
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, vm.Spec.Template.Spec.Volumes...)
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, vm.Spec.Template.Spec.Domain.Devices.Disks...)
	for i, claim := range poolReportClaim[:1+g.n(3)] {
		name := "hp-" + claim
		if g.bool() {
			v := kubevirtv1.Volume{Name: name}
			v.PersistentVolumeClaim = &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: true}
			v.PersistentVolumeClaim.ClaimName = claim
			vmi.Spec.Volumes = append(vmi.Spec.Volumes, v)
		}
		pod := "hp-volume-" + vm.Name + "-" + string(rune('a'+i))
		uid := types.UID("uid-" + pod)
		vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: name, Phase: poolReportPhase[g.n(len(poolReportPhase))],
			HotplugVolume: &kubevirtv1.HotplugVolumeStatus{AttachPodName: pod, AttachPodUID: uid}})
		switch g.n(4) {
		case 0: // missing
		case 1: // terminating
			p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: reportNS, Name: pod, UID: uid, CreationTimestamp: at(),
				Labels: map[string]string{snapshot.AttachmentPodLabel: snapshot.AttachmentPodLabelValue}}}
			t := at()
			p.DeletionTimestamp, p.Finalizers = &t, []string{fixture.TestFinalizer}
			s.AttachmentPods = append(s.AttachmentPods, p)
		default:
			p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: reportNS, Name: pod, UID: uid, CreationTimestamp: at(),
				Labels: map[string]string{snapshot.AttachmentPodLabel: snapshot.AttachmentPodLabelValue}}}
			if g.n(5) == 0 {
				p.UID = "uid-someone-else" // re-created under the same name
			}
			s.AttachmentPods = append(s.AttachmentPods, p)
		}
	}
	return vmi
}
