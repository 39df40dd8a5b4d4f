package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

func (r *danglingRun) build(ref *reference) drift.Finding {
	var obj drift.ObjectRef
	if ref.onVM {
		obj = drift.ObjectRef{Kind: kindVM, Name: ref.vm.Name, UID: ref.vm.UID}
	} else {
		obj = drift.ObjectRef{Kind: kindVMI, Name: ref.vmi.Name, UID: ref.vmi.UID}
	}
	action, h := r.decideAction(ref)
	sev, frozen := drift.SeverityWarning, r.freezesHotplug(ref)
	switch {
	case frozen:
		sev = drift.SeverityCritical
	case !ref.st.state.reported():
		sev = drift.SeverityInfo
	}
	f := drift.Finding{
		Check:     DanglingVolumeReference,
		Namespace: ref.ns,
		Object:    obj,
		Volume:    ref.volume,
		Severity:  sev,
		Action:    drift.Action{Type: action, Safe: h.first == "", BlockedBy: h.first},
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	if !r.in.quiet {
		f.Message, f.Evidence, f.Action.Remedy = r.words(ref, obj, action, h, frozen)
	}
	return f
}

// words are a finding's message, evidence and remedy.
func (r *danglingRun) words(ref *reference, obj drift.ObjectRef, action drift.ActionType, h holds, frozen bool) (msg string, ev []string, remedy string) {
	st := r.in.storageFacts(ref.ns, ref.src, ref.st)
	ev = make([]string, 0, 3+len(st)+len(h.facts))
	ev = append(ev, r.referenceFact(ref))
	ev = append(ev, st...)
	if ref.podGone {
		ev = append(ev, r.podGoneFact(ref))
	}
	ev = append(ev, h.facts...)
	msg = describeDangling(ref, obj)
	if frozen {
		fact := freezeFact(ref)
		msg += "; " + fact
		ev = append(ev, fact)
	}
	return msg, ev, danglingRemedy(ref, action, h.first)
}

// freezesHotplug says whether the reference stops all hot-plug work of its
// VMI: virt-controller looks up the PVC of every hot-plug volume of the VMI
// spec, and a missing one is a sync error returned before any attachment
// pod of that VMI is created or cleaned up
// (pkg/virt-controller/watch/vmi/volume-hotplug.go:192-195,
// pkg/storage/types/pvc.go:223-251, KubeVirt v1.9.0). freezeFact says it.
func (r *danglingRun) freezesHotplug(ref *reference) bool {
	vmi := ref.vmi
	if vmi == nil || vmi.DeletionTimestamp != nil || !launched(vmi) || !ref.st.state.dangling() {
		return false
	}
	vol := snapshot.VMIVolume(vmi, ref.volume)
	hot := vol != nil && (snapshot.Hotpluggable(vol) || (ref.status != nil && ref.status.HotplugVolume != nil))
	return hot && r.in.Index.PVC(ref.ns, ref.src.name) == nil
}

func freezeFact(ref *reference) string {
	return "virt-controller finds no PVC " + ref.ns + "/" + ref.src.name + " for hot-plug volume " + strconv.Quote(ref.volume) + " of VMI " + ref.ns + "/" + ref.vmi.Name +
		", and stops every hot-plug attach and detach of that VMI until the reference goes or the PVC is back"
}

// launched: virt-controller handles hot-plug volumes of a VMI whose
// launcher pod runs (watch/vmi/lifecycle.go:207-241): phase Scheduled or
// Running.
func launched(vmi *snapshot.VMI) bool {
	return vmi.Status.Phase == kubevirtv1.Scheduled || vmi.Status.Phase == kubevirtv1.Running
}

func describeDangling(ref *reference, obj drift.ObjectRef) string {
	subject := "volume " + strconv.Quote(ref.volume) + " of " + shortKind(obj.Kind) + " " + ref.ns + "/" + obj.Name
	what := ref.src.kind + " " + strconv.Quote(ref.src.name)
	switch ref.st.state {
	case storageMissing:
		return subject + " refers to " + what + ", which does not exist"
	case storagePostponed:
		return subject + " refers to " + what + ", which is being deleted; its deletion is postponed by " + ref.st.keptBy + ", so the reference is not dangling"
	case storageFailed:
		return subject + " refers to " + what + ", whose DataVolume failed"
	}
	return "hot-plug " + subject + ": the attachment pod its status names is gone"
}

func shortKind(kind string) string {
	if kind == kindVM {
		return "VM"
	}
	return "VMI"
}

// referenceFact names the referring record and its age.
func (r *danglingRun) referenceFact(ref *reference) string {
	hot := "not hotpluggable"
	if snapshot.Hotpluggable(ref.vol) {
		hot = "hotpluggable"
	}
	uses := strconv.Quote(ref.volume) + " uses " + ref.src.kind + " " + strconv.Quote(ref.src.name)
	if ref.onVM {
		vm := ref.vm
		return "VM " + vm.Namespace + "/" + vm.Name + " (uid " + orNone(string(vm.UID)) + ", " + r.in.age(vm.CreationTimestamp) + ") spec volume " + uses + " (" + hot + ")"
	}
	vmi := ref.vmi
	where := "spec volume"
	if ref.vol == nil {
		where, hot = "status-only volume", "no longer in the VMI spec"
	}
	st := "no volume status"
	if vs := ref.status; vs != nil {
		pod := "<none>"
		if vs.HotplugVolume != nil {
			pod = orNone(vs.HotplugVolume.AttachPodName)
		}
		st = "status phase " + orNone(string(vs.Phase)) + ", attachment pod " + pod
	}
	return "VMI " + vmi.Namespace + "/" + vmi.Name + " (uid " + orNone(string(vmi.UID)) + ", " + r.in.age(vmi.CreationTimestamp) + ") " + where + " " + uses + " (" + hot + "; " + st + ")"
}

// decideAction returns the action and every reason it must wait, in order:
// what makes it no action at all (storage present, not hot-pluggable, a
// detach under way), the safety holds, use, the API's gates, the request.
func (r *danglingRun) decideAction(ref *reference) (drift.ActionType, holds) {
	h := holds{quiet: r.in.quiet}
	switch {
	case ref.st.state == storagePostponed:
		h.note(DeletionPostponed, func() string {
			return fmt.Sprintf("%s still exists: its deletion is postponed by finalizers, so the reference is not dangling, and tether never removes a reference to storage that exists", ref.st.kept)
		})
		return drift.None, h
	case !ref.st.state.dangling():
		h.note(ClaimExists, func() string {
			return fmt.Sprintf("%s %s/%s exists: only the attachment pod record is dangling", ref.src.kind, ref.ns, ref.src.name)
		})
		return drift.None, h
	case !ref.onVM && ref.vol == nil:
		h.note(DetachInProgress, func() string {
			return fmt.Sprintf("VMI %s/%s spec no longer lists volume %q: detach in progress", ref.ns, ref.vmi.Name, ref.volume)
		})
		return drift.None, h
	case !snapshot.Hotpluggable(ref.vol):
		h.note(VolumeNotHotpluggable, func() string {
			return fmt.Sprintf("%s spec volume %q is not hotpluggable (a boot or regular disk): removevolume refuses it", r.subjectName(ref), ref.volume)
		})
		return drift.None, h
	}
	action := VMIRemoveVolume
	if ref.onVM {
		action = VMRemoveVolume
	}
	r.safetyHolds(&h, ref)
	if !ref.st.gone {
		h.note(StorageExists, func() string { return r.existing(ref) })
	}
	r.useHolds(&h, ref)
	r.gateHolds(&h, ref, action)
	if !slices.Contains(r.in.Policy.Checks, DanglingVolumeReference) {
		h.add(drift.NotRequested, "removing dangling references was not requested (it needs the check named, e.g. tether fix --check DanglingVolumeReference)")
	}
	return action, h
}

func (r *danglingRun) subjectName(ref *reference) string {
	if ref.onVM {
		return fmt.Sprintf("VM %s/%s", ref.ns, ref.vm.Name)
	}
	return fmt.Sprintf("VMI %s/%s", ref.ns, ref.vmi.Name)
}

// safetyHolds: terminating VM or VMI, migrating VMI, a VMI-level call on a
// VMI that is not Running, a removal already pending, a detach under way.
func (r *danglingRun) safetyHolds(h *holds, ref *reference) {
	vm, vmi := ref.vm, ref.vmi
	if vm != nil && IsTerminating(vm) {
		h.note(VMTerminating, func() string {
			return fmt.Sprintf("VM %s/%s is terminating (deletionTimestamp %s)", vm.Namespace, vm.Name, vm.DeletionTimestamp.UTC().Format(time.RFC3339))
		})
	}
	if vmi != nil {
		if IsTerminating(vmi) {
			h.note(VMITerminating, func() string {
				return fmt.Sprintf("VMI %s/%s is terminating (deletionTimestamp %s)", vmi.Namespace, vmi.Name, vmi.DeletionTimestamp.UTC().Format(time.RFC3339))
			})
		}
		if IsMigrating(vmi) {
			ms := vmi.Status.MigrationState
			h.note(VMIMigrating, func() string {
				return fmt.Sprintf("VMI %s/%s is migrating (node %s to %s)", vmi.Namespace, vmi.Name, orNone(ms.SourceNode), orNone(ms.TargetNode))
			})
		}
		if !ref.onVM && vmi.Status.Phase != kubevirtv1.Running {
			h.note(VMINotRunning, func() string {
				return fmt.Sprintf("VMI %s/%s phase is %s, not Running", vmi.Namespace, vmi.Name, orNone(string(vmi.Status.Phase)))
			})
		}
	}
	if vm != nil && HasPendingRemove(vm, ref.volume) {
		h.note(RemovalPending, func() string {
			return fmt.Sprintf("VM %s/%s has a pending removevolume request for %q", vm.Namespace, vm.Name, ref.volume)
		})
	}
	if vm != nil && HasPendingAdd(vm, ref.volume) {
		h.note(AdditionPending, func() string {
			return fmt.Sprintf("VM %s/%s has a pending addvolume request for %q", vm.Namespace, vm.Name, ref.volume)
		})
	}
	if vs := ref.status; vs != nil && isDetaching(vs.Phase) {
		h.note(DetachInProgress, func() string {
			return fmt.Sprintf("volume %q phase is %s: detach in progress", ref.volume, vs.Phase)
		})
	}
}

// existing names the objects of the referenced name that still exist.
func (r *danglingRun) existing(ref *reference) string {
	var have []string
	if pvc := r.in.Index.PVC(ref.ns, ref.src.name); pvc != nil {
		have = append(have, fmt.Sprintf("PVC %s/%s (uid %s)", ref.ns, pvc.Name, orNone(string(pvc.UID))))
	}
	if dv := r.in.Index.DataVolume(ref.ns, ref.src.name); dv != nil {
		have = append(have, fmt.Sprintf("DataVolume %s/%s (uid %s, phase %s)", ref.ns, dv.Name, orNone(string(dv.UID)), orNone(string(dv.Status.Phase))))
	}
	return fmt.Sprintf("%s still exists: CDI may retry or re-create the claim, and a reference is removed only when no PVC and no DataVolume of that name exists", strings.Join(have, " and "))
}

// useHolds records why the VMI may still use the volume; none means the
// reference is provably unused: the VMI status does not show the volume
// attached, and no attachment pod mounts the claim. A VM without a VMI uses
// nothing. (That no PVC or DataVolume of the name exists at all is required
// separately, whether or not there is a VMI.) At VM level the reason is
// VMRunning, and the VM's VMI comes first.
func (r *danglingRun) useHolds(h *holds, ref *reference) {
	if ref.vmi == nil {
		return
	}
	vs, pod := ref.status, ""
	if vs != nil && vs.HotplugVolume != nil {
		pod = vs.HotplugVolume.AttachPodName
	}
	attached := vs != nil && (pod != "" || attachedPhase(vs.Phase))
	pods := r.mountingPods(ref.ns, ref.src.name)
	if !attached && len(pods) == 0 {
		return
	}
	reason := VolumeInUse
	if ref.onVM {
		reason = VMRunning
		h.note(reason, func() string {
			return "VM " + ref.ns + "/" + ref.vm.Name + " has VMI " + ref.vmi.Name + " (phase " + orNone(string(ref.vmi.Status.Phase)) + ")"
		})
	}
	if attached {
		h.note(reason, func() string {
			return "VMI " + ref.ns + "/" + ref.vmi.Name + " status shows volume " + strconv.Quote(ref.volume) + " attached (phase " + orNone(string(vs.Phase)) + ", attachment pod " + orNone(pod) + ")"
		})
	}
	for _, p := range pods {
		h.note(reason, func() string {
			return fmt.Sprintf("attachment pod %s/%s (uid %s) mounts claim %s", ref.ns, p.Name, orNone(string(p.UID)), ref.src.name)
		})
	}
}

// gateHolds records what the removevolume API would refuse for gates: the
// VMI-level call of a VM-owned VMI needs HotplugVolumes (as for
// OrphanHotplugVolume); the VM-level call needs HotplugVolumes or the
// DeclarativeHotplugVolumes gate, which is on unless disabled.
func (r *danglingRun) gateHolds(h *holds, ref *reference, action drift.ActionType) {
	gates := r.in.hotplugGates()
	switch action {
	case VMIRemoveVolume:
		sub := &subject{vmi: ref.vmi, status: &snapshot.VolumeStatus{Name: ref.volume}, vmiFacts: vmiFacts{own: ref.own}}
		apiHolds(h, r.in, sub, action)
	case VMRemoveVolume:
		// pkg/virt-api/rest/volumes.go:63-65,75-78: neither gate, 400.
		if gates.Known && !gates.HotplugVolumes && !gates.Declarative {
			h.add(HotplugGateDisabled, r.in.gateFact("KubeVirt feature gates HotplugVolumes and DeclarativeHotplugVolumes are both off, so the volume API refuses every call: ", gates))
		}
	}
}

// removeByHand is how an operator drops the reference: removevolume for a
// hot-plugged volume, an edit of the spec otherwise.
func removeByHand(ref *reference, kind, name string) string {
	if snapshot.Hotpluggable(ref.vol) {
		cmd := fmt.Sprintf("`virtctl removevolume %s -n %s --volume-name=%s", name, ref.ns, ref.volume)
		if ref.onVM {
			cmd += " --persist"
		}
		return cmd + "`"
	}
	return fmt.Sprintf("stop the VM and delete volume %s and its disk from the spec (`kubectl edit %s %s -n %s`)", ref.volume, kind, name, ref.ns)
}

// danglingRemedy is the manual procedure, given the first block.
func danglingRemedy(ref *reference, action drift.ActionType, block drift.BlockReason) string {
	ns, vol := ref.ns, ref.volume
	var name, kind string
	if ref.onVM {
		name, kind = ref.vm.Name, "vm"
	} else {
		name, kind = ref.vmi.Name, "vmi"
	}
	// The parts of the procedure; each case says only those it needs.
	base := func() string {
		cmd := "virtctl removevolume " + name + " -n " + ns + " --volume-name=" + vol
		verify := "`kubectl get vmi " + name + " -n " + ns + " -o jsonpath='{.status.volumeStatus[*].name}'`"
		if action == VMRemoveVolume {
			cmd += " --persist"
			verify = "`kubectl get vm " + name + " -n " + ns + " -o jsonpath='{.spec.template.spec.volumes[*].name}'`"
		}
		return cmd + " --dry-run && " + cmd + "; then check that " + verify + " no longer lists " + vol
	}
	restore := func() string {
		return "if the data is still needed, restore " + ref.src.kind + " " + ns + "/" + ref.src.name + " from backup instead (`kubectl get " +
			strings.ToLower(ref.src.kind) + " " + ref.src.name + " -n " + ns + "`)"
	}
	stopVM := func() string { return "`virtctl stop " + name + " -n " + ns + "`" }
	switch block {
	case "":
		return base()
	case drift.NotRequested:
		return restore() + "; otherwise `tether fix --check " + DanglingVolumeReference + " --object " + ns + "/" + name + " --apply`, or by hand: " + base()
	case DeletionPostponed:
		return fmt.Sprintf("%s is being deleted, and its deletion is postponed by %s; a Kubernetes deletion cannot be undone. "+
			"To keep the data, make its PersistentVolume outlive the claim first (`kubectl get pvc %s -n %s -o jsonpath='{.spec.volumeName}'`, then `kubectl patch pv <that PV> -p '{\"spec\":{\"persistentVolumeReclaimPolicy\":\"Retain\"}}'`) or back it up. "+
			"To let the deletion finish, remove the reference yourself: %s; tether never removes a reference to storage that still exists",
			ref.st.kept, ref.st.keptBy, ref.src.name, ns, removeByHand(ref, kind, name))
	case StorageExists:
		return fmt.Sprintf("check why %s %s/%s is still there (`kubectl get dv,pvc %s -n %s`); if it is abandoned, delete it, re-run the audit, then: %s",
			strings.ToLower(ref.src.kind), ns, ref.src.name, ref.src.name, ns, base())
	case ClaimExists:
		return fmt.Sprintf("virt-controller normally re-creates the attachment pod: watch `kubectl get pods -n %s -l kubevirt.io=hotplug-disk` and `kubectl get vmi %s -n %s -o jsonpath='{.status.volumeStatus}'`; if it does not, read the virt-controller logs, or restart the VM (`virtctl restart %s -n %s`)",
			ns, name, ns, name, ns)
	case VolumeNotHotpluggable:
		if ref.onVM || ref.vm != nil {
			vm := name
			if ref.vm != nil {
				vm = ref.vm.Name
			}
			return fmt.Sprintf("a boot or regular disk cannot be removed with removevolume: restore %s %s/%s from backup, or stop the VM (`virtctl stop %s -n %s`) and remove volume %s and its disk from the VM spec (`kubectl edit vm %s -n %s`)",
				ref.src.kind, ns, ref.src.name, vm, ns, vol, vm, ns)
		}
		return fmt.Sprintf("a boot or regular disk of a standalone VMI cannot be removed: restore %s %s/%s from backup, or re-create the VMI without it (`kubectl get vmi %s -n %s -o yaml`)",
			ref.src.kind, ns, ref.src.name, name, ns)
	case VMRunning:
		return restore() + "; otherwise stop the VM (" + stopVM() + "), re-run the audit, then: " + base()
	case VolumeInUse:
		return "the VMI may still use the volume (see evidence): " + restore() + "; otherwise confirm inside the guest that it is unused and then: " + base() +
			", or restart the VM (`virtctl restart " + name + " -n " + ns + "`)"
	case VMITerminating, VMTerminating:
		return fmt.Sprintf("wait until the deletion finishes (`kubectl get %s %s -n %s`), then re-run the audit", kind, name, ns)
	case VMIMigrating:
		return fmt.Sprintf("wait for the migration to end (`kubectl get vmim -n %s`), re-run the audit, then: %s", ns, base())
	case VMINotRunning:
		return fmt.Sprintf("the VMI-level removevolume needs a Running VMI (`kubectl get vmi %s -n %s`); %s", name, ns, restore())
	case RemovalPending:
		return fmt.Sprintf("a removal is already requested; watch `kubectl get vm %s -n %s -o jsonpath='{.status.volumeRequests}'`", ref.vm.Name, ns)
	case AdditionPending:
		return fmt.Sprintf("KubeVirt has not applied an addvolume request for it yet; watch `kubectl get vm %s -n %s -o jsonpath='{.status.volumeRequests}'` and re-run the audit once the request is gone", ref.vm.Name, ns)
	case DetachInProgress:
		return fmt.Sprintf("a detach is under way; watch `kubectl get vmi %s -n %s -o jsonpath='{.status.volumeStatus}'` and re-run the audit when it settles", name, ns)
	case HotplugGateDisabled, HotplugGateUnknown:
		return fmt.Sprintf("enable the HotplugVolumes feature gate (`kubectl get kubevirt -A -o jsonpath='{..developerConfiguration.featureGates}'`), then: %s", base())
	}
	return base()
}
