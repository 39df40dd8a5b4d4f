package emulator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator/gates"
	"github.com/tether-dev/tether/internal/testing/emulator/volreq"
)

// syncVirt reconciles the VM and the VMI of one name, both read live. It
// reports whether it wrote, so that the next pass starts from the new state.
func (e *Emulator) syncVirt(ctx context.Context, ns, name string) (bool, time.Duration, error) {
	vm, err := getOrNil(ctx, e.client, ns, name, &virtv1.VirtualMachine{})
	if err != nil {
		return false, 0, err
	}
	vmi, err := getOrNil(ctx, e.client, ns, name, &virtv1.VirtualMachineInstance{})
	if err != nil {
		return false, 0, err
	}
	if vm != nil && paused(vm) {
		return false, 0, nil // covers its VMI too
	}
	var vmAfter time.Duration // the VM asks to be looked at again
	if vm != nil && vm.DeletionTimestamp != nil {
		if wrote, err := e.syncDeletingVM(ctx, vm, vmi); wrote || err != nil {
			return wrote, 0, err
		}
	}
	if vm != nil && vm.DeletionTimestamp == nil {
		g, err := e.gates(ctx)
		if err != nil {
			return false, 0, err
		}
		wrote, after, err := e.syncVM(ctx, vm, vmi, g)
		if wrote || err != nil {
			return wrote, 0, err
		}
		vmAfter = after
	}
	if vmi != nil && !paused(vmi) {
		wrote, after, err := e.syncVMI(ctx, vmi)
		if after == 0 || (vmAfter > 0 && vmAfter < after) {
			after = vmAfter
		}
		return wrote, after, err
	}
	return false, vmAfter, nil
}

func getOrNil[T client.Object](ctx context.Context, c client.Reader, ns, name string, obj T) (T, error) {
	var zero T
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return zero, nil
	}
	if err != nil {
		return zero, err
	}
	return obj, nil
}

// syncVM: pending volume requests into the template, start/stop, VMI volume
// sync, then status.
func (e *Emulator) syncVM(ctx context.Context, vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, g gates.Gates) (bool, time.Duration, error) {
	if vm.Spec.Template == nil {
		return false, 0, nil
	}
	if !hasFinalizer(vm, virtv1.VirtualMachineControllerFinalizer) {
		vm.Finalizers = append(vm.Finalizers, virtv1.VirtualMachineControllerFinalizer)
		return true, 0, e.client.Update(ctx, vm)
	}
	if wrote, err := e.adoptOrphan(ctx, vm, vmi); wrote || err != nil {
		return wrote, 0, err
	}
	if len(vm.Status.VolumeRequests) > 0 {
		spec := vm.Spec.Template.Spec.DeepCopy()
		for i := range vm.Status.VolumeRequests {
			volreq.Apply(spec, &vm.Status.VolumeRequests[i])
		}
		if !equality.Semantic.DeepEqual(spec, &vm.Spec.Template.Spec) {
			vm.Spec.Template.Spec = *spec
			return true, 0, e.client.Update(ctx, vm)
		}
	}
	owned := vmi != nil && metav1.IsControlledBy(vmi, vm)
	if owned {
		if wrote, err := e.releaseFinalVMI(ctx, vmi); wrote || err != nil {
			return wrote, 0, err
		}
	}
	ready, err := e.dataVolumesReady(ctx, vm)
	if err != nil {
		return false, 0, err
	}
	var syncErr error
	// vm.go:3284-3295: the sync stops while a DataVolume of the VM's
	// dataVolumeTemplates is not ready, unless the VM is halted.
	if ready || runState(vm) == wantStopped {
		if wrote, err := e.syncRunState(ctx, vm, vmi, owned); wrote || err != nil {
			return wrote, 0, err
		}
		wrote, err := e.syncVMIVolumes(ctx, vm, vmi, owned, g)
		switch {
		case wrote && err == nil:
			return true, 0, nil
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			return false, 0, err
		case err != nil:
			syncErr = fmt.Errorf("Error encountered while handling declarative hotplug volumes: %w", err)
		}
	}
	status := vmStatus(vm, vmi)
	setSyncFailure(status, syncErr)
	vmiWritable := owned && vmi.DeletionTimestamp == nil && vmi.Status.Phase == virtv1.Running
	if !vmiWritable || !paused(vmi) {
		// Requests stay pending while a paused VMI cannot take them.
		status.VolumeRequests = volreq.TrimDone(&vm.Spec.Template.Spec, status.VolumeRequests)
	}
	var retry time.Duration
	if syncErr != nil {
		e.log.Error(syncErr, "VM sync failed", "namespace", vm.Namespace, "name", vm.Name)
		retry = syncRetry
	}
	if equality.Semantic.DeepEqual(status, &vm.Status) {
		return false, retry, nil
	}
	vm.Status = *status
	return true, retry, e.client.Status().Update(ctx, vm)
}

// syncRetry is how soon a VM whose sync failed is tried again.
const syncRetry = time.Second

// syncRunState creates or deletes the VM's VMI as its run strategy asks.
func (e *Emulator) syncRunState(ctx context.Context, vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, owned bool) (bool, error) {
	switch runState(vm) {
	case wantRunning:
		if vmi == nil {
			e.log.Info("starting VMI", "namespace", vm.Namespace, "name", vm.Name)
			return true, e.client.Create(ctx, vmiFromVM(vm))
		}
	case wantStopped:
		if owned && vmi.DeletionTimestamp == nil {
			e.log.Info("stopping VMI", "namespace", vm.Namespace, "name", vm.Name)
			return true, client.IgnoreNotFound(e.client.Delete(ctx, vmi, client.PropagationPolicy(metav1.DeletePropagationBackground)))
		}
	}
	return false, nil
}

// syncVMIVolumes brings the running VMI's volumes in step with the VM:
// declarative hot-plug (not with updateVolumesStrategy Migration,
// hotplug.go:38-41) and pending volume requests.
func (e *Emulator) syncVMIVolumes(ctx context.Context, vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, owned bool, g gates.Gates) (bool, error) {
	if !owned || vmi.DeletionTimestamp != nil || vmi.Status.Phase != virtv1.Running || paused(vmi) {
		return false, nil
	}
	spec := vmi.Spec.DeepCopy()
	migrationStrategy := vm.Spec.UpdateVolumesStrategy != nil && *vm.Spec.UpdateVolumesStrategy == virtv1.UpdateVolumesStrategyMigration
	if g.DeclarativeSync() && !migrationStrategy {
		syncDeclarativeVolumes(&vm.Spec.Template.Spec, vmi, spec)
	}
	for _, r := range vm.Status.VolumeRequests {
		if hasVolume(spec, requestName(&r)) == (r.AddVolumeOptions == nil) {
			volreq.Apply(spec, &r)
		}
	}
	if equality.Semantic.DeepEqual(spec, &vmi.Spec) {
		return false, nil
	}
	vmi.Spec = *spec
	return true, e.writeVMI(ctx, vmi)
}

type runWish int

const (
	leaveAlone runWish = iota
	wantRunning
	wantStopped
)

func runState(vm *virtv1.VirtualMachine) runWish {
	if vm.Spec.RunStrategy != nil {
		switch *vm.Spec.RunStrategy {
		case virtv1.RunStrategyAlways, virtv1.RunStrategyRerunOnFailure:
			return wantRunning
		case virtv1.RunStrategyHalted:
			return wantStopped
		}
		return leaveAlone
	}
	if vm.Spec.Running != nil {
		if *vm.Spec.Running {
			return wantRunning
		}
		return wantStopped
	}
	return wantStopped
}

// vmiFromVM builds the VMI as KubeVirt's SetupVMIFromVM does.
func vmiFromVM(vm *virtv1.VirtualMachine) *virtv1.VirtualMachineInstance {
	tmpl := vm.Spec.Template
	vmi := &virtv1.VirtualMachineInstance{
		ObjectMeta: *tmpl.ObjectMeta.DeepCopy(),
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	vmi.Name, vmi.GenerateName, vmi.Namespace = vm.Name, "", vm.Namespace
	vmi.ResourceVersion, vmi.UID = "", ""
	vmi.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(vm, virtv1.VirtualMachineGroupVersionKind)}
	vmi.Finalizers = append(vmi.Finalizers, virtv1.VirtualMachineControllerFinalizer)
	return vmi
}

func requestName(r *virtv1.VirtualMachineVolumeRequest) string {
	if r.AddVolumeOptions != nil {
		return r.AddVolumeOptions.Name
	}
	if r.RemoveVolumeOptions != nil {
		return r.RemoveVolumeOptions.Name
	}
	return ""
}

func hasVolume(spec *virtv1.VirtualMachineInstanceSpec, name string) bool {
	for _, v := range spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

// vmStatus derives created, ready, printableStatus and the Ready condition.
func vmStatus(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) *virtv1.VirtualMachineStatus {
	st := vm.Status.DeepCopy()
	running := vmi != nil && vmi.DeletionTimestamp == nil && vmi.Status.Phase == virtv1.Running
	st.Created = vmi != nil
	st.Ready = running
	switch {
	case vm.DeletionTimestamp != nil:
		st.PrintableStatus = virtv1.VirtualMachineStatusTerminating
	case vmi != nil && (vmi.DeletionTimestamp != nil || runState(vm) == wantStopped):
		st.PrintableStatus = virtv1.VirtualMachineStatusStopping
	case vmi != nil && volreq.Migrating(vmi):
		st.PrintableStatus = virtv1.VirtualMachineStatusMigrating
	case running:
		st.PrintableStatus = virtv1.VirtualMachineStatusRunning
	case vmi != nil:
		st.PrintableStatus = virtv1.VirtualMachineStatusStarting
	default:
		st.PrintableStatus = virtv1.VirtualMachineStatusStopped
	}
	want := corev1.ConditionFalse
	reason := "VMINotRunning"
	if running {
		want, reason = corev1.ConditionTrue, ""
	}
	var conds []virtv1.VirtualMachineCondition
	found := false
	for _, c := range st.Conditions {
		if c.Type == virtv1.VirtualMachineReady {
			found = true
			if c.Status != want {
				c.Status, c.Reason, c.LastTransitionTime = want, reason, metav1.Now()
			}
		}
		conds = append(conds, c)
	}
	if !found {
		conds = append(conds, virtv1.VirtualMachineCondition{
			Type: virtv1.VirtualMachineReady, Status: want, Reason: reason, LastTransitionTime: metav1.Now(),
		})
	}
	st.Conditions = conds
	return st
}

// syncDeclarativeVolumes sets spec (a copy of the VMI's) to what KubeVirt's
// declarative hot-plug would make of it (pkg/storage/hotplug): hot-pluggable
// VMI volumes that the VM lacks or has changed are dropped; hot-pluggable VM
// volumes that the VMI has neither in spec nor in status are added, each with
// its disk.
func syncDeclarativeVolumes(tmpl *virtv1.VirtualMachineInstanceSpec, vmi *virtv1.VirtualMachineInstance, spec *virtv1.VirtualMachineInstanceSpec) {
	vmVols := map[string]*virtv1.Volume{}
	for i := range tmpl.Volumes {
		vmVols[tmpl.Volumes[i].Name] = &tmpl.Volumes[i]
	}
	vmDisks := map[string]*virtv1.Disk{}
	for i := range tmpl.Domain.Devices.Disks {
		vmDisks[tmpl.Domain.Devices.Disks[i].Name] = &tmpl.Domain.Devices.Disks[i]
	}
	var vols []virtv1.Volume
	for _, v := range vmi.Spec.Volumes {
		if volreq.Hotpluggable(&v) {
			vmVol, ok := vmVols[v.Name]
			if !ok || (volreq.Hotpluggable(vmVol) && !equality.Semantic.DeepEqual(*vmVol, v)) {
				continue
			}
		}
		vols = append(vols, v)
	}
	withStatus := map[string]bool{}
	for _, s := range vmi.Status.VolumeStatus {
		withStatus[s.Name] = true
	}
	inVMI := map[string]bool{}
	for _, v := range vmi.Spec.Volumes {
		inVMI[v.Name] = true
	}
	for _, v := range tmpl.Volumes {
		if volreq.Hotpluggable(&v) && !inVMI[v.Name] && !withStatus[v.Name] {
			vols = append(vols, *v.DeepCopy())
		}
	}
	newVols := map[string]*virtv1.Volume{}
	for i := range vols {
		newVols[vols[i].Name] = &vols[i]
	}
	var disks []virtv1.Disk
	vmiDisks := map[string]bool{}
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		vmiDisks[d.Name] = true
		if _, ok := newVols[d.Name]; !ok {
			vmDisk, diskOK := vmDisks[d.Name]
			_, volOK := vmVols[d.Name]
			if !diskOK || (volOK && (vmDisk.CDRom == nil || d.CDRom == nil)) {
				continue
			}
		}
		disks = append(disks, d)
	}
	for _, d := range tmpl.Domain.Devices.Disks {
		if v, ok := newVols[d.Name]; ok && volreq.Hotpluggable(v) && !vmiDisks[d.Name] {
			disks = append(disks, *d.DeepCopy())
		}
	}
	spec.Volumes, spec.Domain.Devices.Disks = vols, disks
}
