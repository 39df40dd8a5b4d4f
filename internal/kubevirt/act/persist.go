package act

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// persistHotplug is UnpersistedHotplug's action: put the hot-plug into the
// owning VM's spec exactly as the live VMI has it, its volume and its disk
// (what `virtctl addvolume --persist` records), so that KubeVirt's
// declarative hot-plug sync finds them equal and keeps them. Live re-read
// of the VMI and VM and re-check; one JSON patch of the VM whose first
// operation tests the resourceVersion read (and, for a volume the VM lists
// otherwise, its old value), dry run first; between the dry run and the
// write the VM and VMI are read again and must not have moved.
func (e *Executor) persistHotplug(f drift.Finding) action {
	a := action{
		read: func(ctx context.Context) (*snapshot.Snapshot, error) {
			return observe.ForVolume(ctx, e.Client, e.Observe, f.Namespace, f.Object.Name)
		},
		check: func(s *snapshot.Snapshot, now time.Time) (drift.Finding, bool) {
			return check.CheckUnpersistedHotplug(s, e.Policy, now, f.Namespace, f.Object.Name, f.Volume)
		},
	}
	a.targets = func(s *snapshot.Snapshot) (*write, *drift.Result) {
		if len(s.VMIs) == 0 {
			return nil, &drift.Result{Outcome: drift.Refused, Message: "live re-check: the VMI is gone"}
		}
		own := check.ResolveOwner(s.Index(), &s.VMIs[0]).VM
		if own == nil {
			return nil, &drift.Result{Outcome: drift.Refused, Message: "live re-check: the owning VM is gone"}
		}
		// The snapshot keeps of a VMI what the checks read; the disk to
		// persist is read whole, from the very versions re-checked.
		var vmi kubevirtv1.VirtualMachineInstance
		var vm kubevirtv1.VirtualMachine
		if err := errors.Join(e.Client.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: f.Object.Name}, &vmi),
			e.Client.Get(context.Background(), client.ObjectKey{Namespace: own.Namespace, Name: own.Name}, &vm)); err != nil {
			return nil, refused(false, "reading the VMI and VM whole", err)
		}
		if vmi.ResourceVersion != s.VMIs[0].ResourceVersion || vm.ResourceVersion != own.ResourceVersion {
			return nil, &drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf("live re-check: VMI %s/%s or VM %s changed while it was re-checked; try again", vmi.Namespace, vmi.Name, vm.Name)}
		}
		ops, err := persistPatch(&vm, &vmi, f.Volume)
		if err != nil {
			return nil, &drift.Result{Outcome: drift.Refused, Message: "live re-check: " + err.Error()}
		}
		target := &kubevirtv1.VirtualMachine{}
		target.Namespace, target.Name = vm.Namespace, vm.Name
		do := func(ctx context.Context, dryRun bool) *drift.Result {
			return refused(dryRun, fmt.Sprintf("patch of VM %s/%s", vm.Namespace, vm.Name),
				e.Client.Patch(ctx, target.DeepCopy(), client.RawPatch(types.JSONPatchType, ops), withDryRun[client.PatchOption](dryRun)...))
		}
		done := func(context.Context) drift.Result {
			return drift.Result{Outcome: drift.Applied, Message: fmt.Sprintf("put hot-plug %q into VM %s/%s's spec as VMI %s/%s has it (volume and disk): KubeVirt's declarative hot-plug sync keeps it",
				f.Volume, vm.Namespace, vm.Name, vmi.Namespace, vmi.Name)}
		}
		return &write{do: do, fingerprint: resourceVersions, done: done}, nil
	}
	return a
}

// persistPatch is the JSON patch that makes vm's template list the VMI's
// volume called name, and its disk unless the template has a disk of that
// name: it tests the resourceVersion read first, and replaces (after a
// test of its old value) a volume of that name the template lists.
func persistPatch(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, name string) ([]byte, error) {
	var vol *kubevirtv1.Volume
	for i := range vmi.Spec.Volumes {
		if vmi.Spec.Volumes[i].Name == name {
			vol = &vmi.Spec.Volumes[i]
		}
	}
	var disk *kubevirtv1.Disk
	for i := range vmi.Spec.Domain.Devices.Disks {
		if vmi.Spec.Domain.Devices.Disks[i].Name == name {
			disk = &vmi.Spec.Domain.Devices.Disks[i]
		}
	}
	if vol == nil || disk == nil {
		return nil, fmt.Errorf("VMI %s/%s has no volume and disk %q to persist", vmi.Namespace, vmi.Name, name)
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	ops := []op{{Op: "test", Path: "/metadata/resourceVersion", Value: vm.ResourceVersion}}
	tmpl := vm.Spec.Template
	if tmpl == nil {
		return nil, fmt.Errorf("VM %s/%s has no template", vm.Namespace, vm.Name)
	}
	if len(tmpl.Spec.Volumes) == 0 {
		ops = append(ops, op{Op: "add", Path: "/spec/template/spec/volumes", Value: []kubevirtv1.Volume{*vol}})
	} else {
		at := -1
		for i := range tmpl.Spec.Volumes {
			if tmpl.Spec.Volumes[i].Name == name {
				at = i
			}
		}
		if at < 0 {
			ops = append(ops, op{Op: "add", Path: "/spec/template/spec/volumes/-", Value: vol})
		} else {
			path := fmt.Sprintf("/spec/template/spec/volumes/%d", at)
			ops = append(ops, op{Op: "test", Path: path, Value: tmpl.Spec.Volumes[at]}, op{Op: "replace", Path: path, Value: vol})
		}
	}
	hasDisk := false
	for i := range tmpl.Spec.Domain.Devices.Disks {
		hasDisk = hasDisk || tmpl.Spec.Domain.Devices.Disks[i].Name == name
	}
	switch {
	case hasDisk:
	case len(tmpl.Spec.Domain.Devices.Disks) == 0:
		ops = append(ops, op{Op: "add", Path: "/spec/template/spec/domain/devices/disks", Value: []kubevirtv1.Disk{*disk}})
	default:
		ops = append(ops, op{Op: "add", Path: "/spec/template/spec/domain/devices/disks/-", Value: disk})
	}
	return json.Marshal(ops)
}
