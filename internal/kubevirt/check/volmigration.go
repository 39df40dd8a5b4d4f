package check

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// InterruptedVolumeMigration: a VM whose volume migration was cut short
// and that KubeVirt will not start until its volumes are put back. Report
// only.
const InterruptedVolumeMigration = "InterruptedVolumeMigration"

// FindInterruptedVolumeMigrations proves that a VM needs manual recovery
// after a volume migration (spec.updateVolumesStrategy: Migration) was cut
// short: its ManualRecoveryRequired condition is True. KubeVirt (v1.9.0)
// sets it when the VMI was removed or finished while the VM's VolumesChange
// condition was True (pkg/virt-controller/watch/vm/vm.go:1637-1645), refuses
// to start the VM while it holds (vm.go:1268-1270; virt-api answers 409,
// pkg/virt-api/rest/lifecycle.go:63-65), and clears it once every migrated
// volume of the VM spec names its source claim again, or the strategy is no
// longer Migration (vm.go:1614-1634) — but only while it still records the
// migrated volumes (vm.go:1606). The source claims hold the consistent
// data ("volumes pointing to non-consistent targets … reassign them to
// their original volumes", pkg/virt-api/rest/subresource.go:61). Never
// acted on: the finding names, per volume, which claim holds the data and
// the patch that puts it back.
//
// Decisions, per named, in-scope VM not being deleted: ManualRecoveryRequired
// True: finding (critical), subject the VM, action None; the migrated
// volumes come from status.volumeUpdateState.volumeMigrationState.
func FindInterruptedVolumeMigrations(in Input) []drift.Finding {
	in = in.ready()
	var out []drift.Finding
	for i := range in.Snapshot.VMs {
		vm := &in.Snapshot.VMs[i]
		if !named(vm) || !in.scope.namespace(vm.Namespace) || IsTerminating(vm) {
			continue
		}
		if vm.Spec.Template != nil && !in.scope.labels(vm.Spec.Template.ObjectMeta.Labels) {
			continue
		}
		cond := vmCondition(vm, kubevirtv1.VirtualMachineManualRecoveryRequired)
		if cond == nil || cond.Status != corev1.ConditionTrue {
			continue
		}
		out = append(out, interruptedMigration(in, vm, cond))
	}
	return out
}

func vmCondition(vm *snapshot.VM, t kubevirtv1.VirtualMachineConditionType) *kubevirtv1.VirtualMachineCondition {
	for i := range vm.Status.Conditions {
		if vm.Status.Conditions[i].Type == t {
			return &vm.Status.Conditions[i]
		}
	}
	return nil
}

// migratedVolumes are the VM's recorded volume migrations.
func migratedVolumes(vm *snapshot.VM) []kubevirtv1.StorageMigratedVolumeInfo {
	if s := vm.Status.VolumeUpdateState; s != nil && s.VolumeMigrationState != nil {
		return s.VolumeMigrationState.MigratedVolumes
	}
	return nil
}

func interruptedMigration(in Input, vm *snapshot.VM, cond *kubevirtv1.VirtualMachineCondition) drift.Finding {
	ns := vm.Namespace
	strategy := "unset"
	if vm.Spec.UpdateVolumesStrategy != nil {
		strategy = string(*vm.Spec.UpdateVolumesStrategy)
	}
	since := "since an unknown time"
	if !cond.LastTransitionTime.IsZero() {
		since = fmt.Sprintf("since %s (%s ago)", cond.LastTransitionTime.UTC().Format(time.RFC3339), in.Now.Sub(cond.LastTransitionTime.Time).Round(time.Second))
	}
	ev := []string{
		fmt.Sprintf("VM %s/%s has condition ManualRecoveryRequired=True %s, reason %q; updateVolumesStrategy %s; KubeVirt will not start it until its volumes name their source claims again",
			ns, vm.Name, since, cond.Reason, strategy),
	}
	if vmi := in.Index.VMI(ns, vm.Name); vmi != nil {
		ev = append(ev, fmt.Sprintf("its VMI is %s", orNone(string(vmi.Status.Phase))))
	} else {
		ev = append(ev, "it has no VMI")
	}
	var ops []map[string]any
	lost := false
	migrated := migratedVolumes(vm)
	for _, mv := range migrated {
		src, dst := claimOf(mv.SourcePVCInfo), claimOf(mv.DestinationPVCInfo)
		now, path := specClaim(vm, mv.VolumeName)
		ev = append(ev, fmt.Sprintf("volume %s: source claim %s (%s) holds the consistent data; destination claim %s (%s) may be partly copied; the VM spec names %s",
			mv.VolumeName, orNone(src), claimState(in, ns, src), orNone(dst), claimState(in, ns, dst), orNone(now)))
		if src == "" || in.Index.PVC(ns, src) == nil {
			lost = true
		}
		if path != "" && src != "" && now != src {
			ops = append(ops, map[string]any{"op": "replace", "path": path, "value": src})
		}
	}
	if len(migrated) == 0 {
		ev = append(ev, "status.volumeUpdateState.volumeMigrationState lists no migrated volumes: which claims were the sources is not recorded")
	}
	f := drift.Finding{
		Check:     InterruptedVolumeMigration,
		Namespace: ns,
		Object:    drift.ObjectRef{Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID},
		Severity:  drift.SeverityCritical,
		Message:   fmt.Sprintf("VM %s/%s cannot start: its volume migration was interrupted and KubeVirt requires manual recovery", ns, vm.Name),
		Evidence:  ev,
		Action:    drift.Action{Type: drift.None, BlockedBy: ManualRecoveryRequired, Remedy: migrationRemedy(vm, ops, lost, len(migrated) == 0)},
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	return f
}

func claimOf(info *kubevirtv1.PersistentVolumeClaimInfo) string {
	if info == nil {
		return ""
	}
	return info.ClaimName
}

func claimState(in Input, ns, claim string) string {
	switch pvc := in.Index.PVC(ns, claim); {
	case claim == "":
		return "not recorded"
	case pvc == nil:
		return "missing"
	case pvc.DeletionTimestamp != nil:
		return "being deleted"
	default:
		return "exists"
	}
}

// specClaim returns the claim the VM template's volume name uses and the
// JSON-patch path of that claim name ("" when the volume is not there).
func specClaim(vm *snapshot.VM, name string) (claim, path string) {
	if vm.Spec.Template == nil {
		return "", ""
	}
	for i := range vm.Spec.Template.Spec.Volumes {
		v := &vm.Spec.Template.Spec.Volumes[i]
		if v.Name != name {
			continue
		}
		switch {
		case v.PersistentVolumeClaim != nil:
			return v.PersistentVolumeClaim.ClaimName, fmt.Sprintf("/spec/template/spec/volumes/%d/persistentVolumeClaim/claimName", i)
		case v.DataVolume != nil:
			return v.DataVolume.Name, fmt.Sprintf("/spec/template/spec/volumes/%d/dataVolume/name", i)
		}
		return snapshot.ClaimName(v), ""
	}
	return "", ""
}

func migrationRemedy(vm *snapshot.VM, ops []map[string]any, lost, unrecorded bool) string {
	ns, name := vm.Namespace, vm.Name
	start := fmt.Sprintf("`virtctl start %s -n %s`", name, ns)
	keep := "keep the destination claims until the VM runs from its sources"
	switch {
	case lost:
		return fmt.Sprintf("a source claim is missing: the consistent copy is gone and the destination may be partial; restore the volume from a backup or snapshot into a claim, point the VM spec at it (`kubectl edit vm %s -n %s`), then %s; %s", name, ns, start, keep)
	case unrecorded:
		return fmt.Sprintf("find the claims the VM used before the migration (its events, your GitOps history) and point its volumes back at them (`kubectl edit vm %s -n %s`); with no migrated volumes recorded KubeVirt cannot clear ManualRecoveryRequired itself, so after checking the data remove that condition from the VM status (`kubectl edit vm %s -n %s --subresource=status`); then %s; %s", name, ns, name, ns, start, keep)
	case len(ops) == 0:
		return fmt.Sprintf("the VM spec already names the source claims: watch `kubectl get vm %s -n %s -o jsonpath='{.status.conditions}'` for KubeVirt to clear ManualRecoveryRequired, then %s; %s", name, ns, start, keep)
	}
	patch, _ := json.Marshal(ops)
	return fmt.Sprintf("point the migrated volumes back at their source claims: `kubectl patch vm %s -n %s --type=json -p '%s' --dry-run=server` then without --dry-run; KubeVirt then clears ManualRecoveryRequired; %s; %s; to migrate again, re-apply the change with the VM running",
		name, ns, patch, start, keep)
}
