package check

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// declarativeVerdict: a VMI-only hot-plug on a VM-owned VMI while
// virt-controller syncs hot-plugs from the VM spec. virt-controller removes
// it on its next VM sync (pkg/storage/hotplug/hotplug.go:95-120, KubeVirt
// v1.9.0), and no API call can: the VMI route is 400 "owned by a VM"
// (pkg/virt-api/rest/volumes.go:220-222), the VM route 409 "does not
// exist" (volumes.go:190-193). tether reports it, with what it can see of
// why the sync has not happened, and never acts.
func declarativeVerdict(in Input, sub *subject, gates snapshot.HotplugGates, ev []string) verdict {
	ev = append(ev, in.gateFact("virt-controller syncs hot-plugs from the VM spec and removes VMI-only ones itself: ", gates))
	stuck := syncDiagnosis(in, sub)
	v := verdict{severity: drift.SeverityInfo, action: drift.None, block: DeclarativeSync, evidence: append(ev, stuck...)}
	if len(stuck) == 0 {
		v.message = sub.describe("VMI-only hot-plug that virt-controller removes on its next VM sync; if it persists, the VM sync or virt-handler is stuck")
		return v
	}
	v.severity = drift.SeverityWarning
	v.message = sub.describe("VMI-only hot-plug that virt-controller has not removed: " + stuck[0])
	return v
}

// syncDiagnosis lists what tether can read that stops virt-controller's
// declarative hot-plug sync of the VMI, or virt-handler's unmount; nothing
// when it sees no cause.
func syncDiagnosis(in Input, sub *subject) []string {
	vm, vmi, name := sub.own.VM, sub.vmi, sub.volume()
	var out []string
	if s := vm.Spec.UpdateVolumesStrategy; s != nil && *s == kubevirtv1.UpdateVolumesStrategyMigration {
		// hotplug.go:38-41.
		out = append(out, fmt.Sprintf("VM %s/%s has spec.updateVolumesStrategy Migration: virt-controller skips the declarative hot-plug sync", vm.Namespace, vm.Name))
	}
	if vmi.Status.Phase != kubevirtv1.Running {
		// hotplug.go:52-54.
		out = append(out, fmt.Sprintf("VMI phase is %s: the hot-plug sync waits for Running", orNone(string(vmi.Status.Phase))))
	}
	for _, t := range vm.Spec.DataVolumeTemplates {
		// pkg/virt-controller/watch/vm/vm.go:3284-3295.
		if dv := in.Index.DataVolume(vm.Namespace, t.Name); dv != nil && dv.Status.Phase != cdiv1.Succeeded {
			out = append(out, fmt.Sprintf("DataVolume %s/%s of the VM's dataVolumeTemplates is in phase %s: the VM sync stops before its hot-plug step", dv.Namespace, dv.Name, orNone(string(dv.Status.Phase))))
		}
	}
	for _, c := range vm.Status.Conditions {
		// A VM sync error is a Failure condition (vm.go:120, HotPlugVolumeError).
		if c.Type == kubevirtv1.VirtualMachineFailure && c.Status == corev1.ConditionTrue {
			out = append(out, fmt.Sprintf("VM %s/%s condition Failure: %s: %s", vm.Namespace, vm.Name, orNone(c.Reason), orNone(c.Message)))
		}
	}
	if ps := vm.Status.PrintableStatus; ps != "" && ps != kubevirtv1.VirtualMachineStatusRunning {
		out = append(out, fmt.Sprintf("VM %s/%s printableStatus is %s", vm.Namespace, vm.Name, ps))
	}
	if snapshot.VMIVolume(vmi, name) == nil {
		// The sync did its part; the status entry stays until virt-handler
		// unmounts and the attachment pod is gone (watch/vmi/storage.go:316-352).
		out = append(out, fmt.Sprintf("the VMI spec no longer lists %q but its volumeStatus does (phase %s): virt-handler on node %s has not unmounted it",
			name, orNone(string(sub.status.Phase)), orNone(vmi.Status.NodeName)))
	}
	return out
}

// ownerGoneVerdict: the VMI's controlling VM is gone (deleted, or
// re-created with another UID). The garbage collector deletes such a VMI
// in the background; a VM deleted with propagationPolicy Orphan instead
// has its owner reference stripped, and the VMI becomes standalone. Either
// way there is nothing for tether to remove now.
func ownerGoneVerdict(sub *subject, tv tenantView, ev []string) verdict {
	return verdict{severity: drift.SeverityInfo, action: drift.None, block: OwnerGone, evidence: append(ev, sub.tenantFacts(tv)...), tenants: tv.names,
		message: sub.describe("its VirtualMachine is gone: the garbage collector deletes the VMI and its hot-plugs; nothing to remove")}
}
