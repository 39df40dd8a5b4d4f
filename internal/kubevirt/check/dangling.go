package check

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// FindDanglingVolumeReferences proves that a VM or VMI refers to storage
// that is not there: a PVC or DataVolume that is missing, being deleted or
// (for a DataVolume) failed; and, the other way round, that a VMI's hot-plug
// volume status names an attachment pod that is gone.
//
// Subjects, and how double reports are avoided:
//   - a VM (Object kind VirtualMachine): every volume of
//     spec.template.spec.volumes; spec.dataVolumeTemplates count as storage
//     that virt-controller will create;
//   - a VMI (Object kind VirtualMachineInstance): its spec volumes and
//     status.volumeStatus entries, except those its owning VM's spec lists with
//     the same claim (those are reported once, on the VM); and every hot-plug
//     volume status whose attachment pod is gone while the claim is there.
//
// A DataVolume that is still provisioning is not dangling. Storage whose
// deletion is postponed by a finalizer (a deletionTimestamp on an object
// that still exists) is not dangling either: it is reported with the
// finalizers that keep it, and never acted on. The only action is
// removevolume of a hot-plugged reference, and it is safe only when the
// check was asked for by name (Policy.Checks, e.g. `tether fix --check
// DanglingVolumeReference`), no PVC and no DataVolume of the referenced
// name exists at all, and the reference is unused: at VM level when the VM
// has no VMI or its VMI provably does not use the volume, at VMI level for
// a VMI-only hot-plug the VMI provably does not use. Boot and other
// non-hot-pluggable disks are reported with the manual procedure only.
//
// Decisions, in order:
//   - VMs in scope (vmInScope), the first spec volume of each name
//     (decideVM): judgeStorage; a finding only when the storage is missing,
//     failed or postponed;
//   - VMIs in scope, each spec or status volume (decideVMI): the claim from
//     the spec or the status, judgeStorage, attachPodGone; no finding when
//     the VM's finding covers it (reportedOnVM); a finding when the storage
//     is reported, or is present while the attachment pod is gone;
//   - action (decideAction): none for postponed or present storage, a
//     detach in progress or a disk that is not hot-pluggable; otherwise
//     removevolume at VM or VMI level, held by safetyHolds, storage of the
//     name existing, use (inUse), gates (gateHolds) and the request
//     (Policy.Checks).
func FindDanglingVolumeReferences(in Input) []drift.Finding {
	// Deferred words are loud's, when asked for, from the subject alone
	// (as CheckDangling decides): what the reference was found to be is
	// not held meanwhile.
	decide, words := in.ready().deferring()
	r, loud := &danglingRun{in: decide}, &danglingRun{in: words}
	in = decide
	var out []drift.Finding
	for i := range in.Snapshot.VMs {
		vm := &in.Snapshot.VMs[i]
		if !r.vmInScope(vm) {
			continue
		}
		vols, claims := vm.Spec.Template.Spec.Volumes, in.vmVolumeClaims(i)
		for j := range vols {
			if vols[j].Name == "" || !in.scope.volume(vols[j].Name) || snapshot.VMVolume(vm, vols[j].Name) != &vols[j] {
				continue // out of scope, or a later duplicate of the name
			}
			if f, ok := r.decideVM(vm, &vols[j], claims, j); ok {
				if in.deferText {
					vol := &vols[j]
					f.Defer(func() drift.Text { again, _ := loud.decideVM(vm, vol, nil, -1); return drift.TextOf(again) })
				}
				out = append(out, f)
			}
		}
	}
	for i := range in.Snapshot.VMIs {
		vmi := &in.Snapshot.VMIs[i]
		if !named(vmi) || !in.scope.namespace(vmi.Namespace) || !in.scope.labels(vmi.Labels) {
			continue
		}
		own, claims := in.owner(i), in.vmiVolumeClaims(i)
		var odd bool
		r.names, odd = appendVolumeNames(r.names[:0], vmi)
		in.noteHotplugOdd(i, odd)
		for _, name := range r.names {
			if name == "" || !in.scope.volume(name) {
				continue
			}
			if f, ok := r.decideVMI(vmi, own, name, claims); ok {
				if in.deferText {
					f.Defer(func() drift.Text { again, _ := loud.decideVMI(vmi, own, name, nil); return drift.TextOf(again) })
				}
				out = append(out, f)
			}
		}
	}
	return out
}

// CheckDangling re-runs the DanglingVolumeReference decision for one
// subject (kind VirtualMachine or VirtualMachineInstance) and volume,
// typically on a snapshot built from freshly read objects. It returns false
// when the reference is not dangling, out of scope, or the subject is gone.
func CheckDangling(s *snapshot.Snapshot, p Policy, now time.Time, ns, kind, name, volume string) (drift.Finding, bool) {
	in := NewInput(s, p, now)
	r := &danglingRun{in: in}
	if volume == "" || !in.scope.volume(volume) {
		return drift.Finding{}, false
	}
	switch kind {
	case kindVM:
		vm := in.Index.VM(ns, name)
		if vm == nil || !r.vmInScope(vm) {
			return drift.Finding{}, false
		}
		if vol := snapshot.VMVolume(vm, volume); vol != nil {
			return r.decideVM(vm, vol, nil, -1)
		}
	case kindVMI:
		vmi := in.Index.VMI(ns, name)
		if vmi == nil || !named(vmi) || !in.scope.namespace(ns) || !in.scope.labels(vmi.Labels) {
			return drift.Finding{}, false
		}
		return r.decideVMI(vmi, ResolveOwner(in.Index, vmi), volume, nil)
	}
	return drift.Finding{}, false
}

// Object kinds of this check's findings.
const (
	kindVM  = "VirtualMachine"
	kindVMI = "VirtualMachineInstance"
)

// danglingRun is one pass of the check with its lazily built lookups.
type danglingRun struct {
	in          Input
	podsByClaim map[string]map[string][]*corev1.Pod
	templates   map[string]map[string]bool
	// names is the volume names of the VMI at hand.
	names []string
	// pod is the attachment pod last looked up, by namespace and name: a
	// VMI's hot-plugs usually share one.
	podKey snapshot.Key
	pod    *corev1.Pod
}

// attachmentPod returns the index's attachment pod ns/name.
func (r *danglingRun) attachmentPod(ns, name string) *corev1.Pod {
	if k := (snapshot.Key{Namespace: ns, Name: name}); r.pod == nil || k != r.podKey {
		r.podKey, r.pod = k, r.in.Index.AttachmentPod(ns, name)
	}
	return r.pod
}

// vmInScope: the VM is named, in a scope namespace, and its template labels
// (the labels its VMI gets) match the selector.
func (r *danglingRun) vmInScope(vm *snapshot.VM) bool {
	if !named(vm) || !r.in.scope.namespace(vm.Namespace) || vm.Spec.Template == nil {
		return false
	}
	return r.in.scope.labels(vm.Spec.Template.ObjectMeta.Labels)
}

// reference is one volume reference of one subject and what was found
// about it.
type reference struct {
	ns, volume string
	onVM       bool
	vm         *snapshot.VM           // the subject, or the VMI's owner
	vmi        *snapshot.VMI          // the subject, or the VM's VMI
	own        Ownership              // for a VMI subject
	vol        *kubevirtv1.Volume     // the subject's spec volume
	status     *snapshot.VolumeStatus // the VMI's status entry, if any
	src        source
	st         storage
	// podGone: the attachment pod the status names is gone; pod is the
	// pod of that name with another UID, if one exists.
	podGone bool
	pod     *corev1.Pod
}

// decideVM decides about the VM's template volume vol; claims, when not
// nil, are the pass's claims of the template's volumes, vol at index j.
func (r *danglingRun) decideVM(vm *snapshot.VM, vol *kubevirtv1.Volume, claims []volPVC, j int) (drift.Finding, bool) {
	src, ok := volumeSource(vol)
	if !ok {
		return drift.Finding{}, false
	}
	ref := &reference{ns: vm.Namespace, volume: vol.Name, onVM: true, vm: vm, vol: vol, src: src}
	ref.st = r.judge(ref.ns, src, knownClaim(claims, j, vol, src))
	if !ref.st.state.reported() {
		return drift.Finding{}, false // the VMI reports a gone attachment pod
	}
	if vmi := r.in.Index.VMI(ref.ns, vm.Name); vmi != nil {
		ref.vmi, ref.status = vmi, volumeStatus(vmi, vol.Name)
		ref.podGone, ref.pod = r.attachPodGone(vmi, ref.status)
	}
	return r.build(ref), true
}

// decideVMI decides about the VMI's volume called name; claims, when not
// nil, are the pass's claims of the VMI's spec volumes.
func (r *danglingRun) decideVMI(vmi *snapshot.VMI, own Ownership, name string, claims []volPVC) (drift.Finding, bool) {
	ref := &reference{ns: vmi.Namespace, volume: name, vmi: vmi, vm: own.VM, own: own, status: volumeStatus(vmi, name)}
	j := specVolumeIndex(vmi, name)
	if j >= 0 {
		ref.vol = &vmi.Spec.Volumes[j]
	}
	src, ok := volumeSource(ref.vol)
	if !ok && ref.vol == nil && ref.status != nil && ref.status.PersistentVolumeClaimInfo != nil && ref.status.PersistentVolumeClaimInfo.ClaimName != "" {
		src, ok = source{kind: "PVC", name: ref.status.PersistentVolumeClaimInfo.ClaimName}, true
	}
	if !ok {
		return drift.Finding{}, false
	}
	ref.src = src
	var known *volPVC
	if ref.vol != nil {
		known = knownClaim(claims, j, ref.vol, src)
	}
	ref.st = r.judge(ref.ns, src, known)
	ref.podGone, ref.pod = r.attachPodGone(vmi, ref.status)
	switch {
	case ref.st.state.reported() && r.reportedOnVM(ref):
		return drift.Finding{}, false
	case ref.st.state.reported(), ref.st.state == storagePresent && ref.podGone:
		return r.build(ref), true
	}
	return drift.Finding{}, false
}

// reportedOnVM: the owning VM is in scope and its spec lists the volume with
// the same storage, so the VM's finding covers it.
func (r *danglingRun) reportedOnVM(ref *reference) bool {
	if ref.own.VM == nil || !r.vmInScope(ref.own.VM) {
		return false
	}
	src, ok := volumeSource(snapshot.VMVolume(ref.own.VM, ref.volume))
	return ok && src.name == ref.src.name
}

// attachPodGone is the reverse direction: the hot-plug status of a Running,
// settled VMI names an attachment pod for an attached volume, and no pod of
// that name, or only one with another UID, exists. Volumes that are not yet
// or no longer attached, and VMIs that migrate or terminate, legitimately
// lack their pod for a while and are left alone. When it is gone, pod is
// the pod of its name with another UID, if there is one.
func (r *danglingRun) attachPodGone(vmi *snapshot.VMI, vs *snapshot.VolumeStatus) (gone bool, pod *corev1.Pod) {
	if vs == nil || vs.HotplugVolume == nil || vs.HotplugVolume.AttachPodName == "" || !attachedPhase(vs.Phase) ||
		vmi.Status.Phase != kubevirtv1.Running || IsMigrating(vmi) || IsTerminating(vmi) {
		return false, nil
	}
	hp := vs.HotplugVolume
	pod = r.attachmentPod(vmi.Namespace, hp.AttachPodName)
	switch {
	case pod == nil:
		return true, nil
	case IsTerminating(pod):
		return false, nil // being replaced
	case pod.UID != "" && hp.AttachPodUID != "" && pod.UID != hp.AttachPodUID:
		return true, pod
	}
	return false, nil
}

// podGoneFact is the evidence of attachPodGone.
func (r *danglingRun) podGoneFact(ref *reference) string {
	vmi, vs, ns := ref.vmi, ref.status, ref.ns
	hp := vs.HotplugVolume
	if pod := ref.pod; pod != nil {
		return fmt.Sprintf("attachment pod %s/%s exists with uid %s (%s), not uid %s that VMI %s/%s names for volume %q: it is a different pod",
			ns, pod.Name, pod.UID, r.in.age(pod.CreationTimestamp), hp.AttachPodUID, ns, vmi.Name, vs.Name)
	}
	return "attachment pod " + ns + "/" + hp.AttachPodName + " (uid " + orNone(string(hp.AttachPodUID)) + ") that VMI " + ns + "/" + vmi.Name +
		" names for volume " + strconv.Quote(vs.Name) + " does not exist"
}

// appendVolumeNames appends to names the VMI's spec volume names, then the
// names of status entries that are not in the spec, each once. It also
// says whether some hot-plug status entry is one StuckHotplugPhase must
// look at (hotplugOdd): the names are compared here anyway.
func appendVolumeNames(names []string, vmi *snapshot.VMI) ([]string, bool) {
	start := len(names)
	index := func(n string) int {
		for i, have := range names[start:] {
			if have == n {
				return i
			}
		}
		return -1
	}
	for i := range vmi.Spec.Volumes {
		if n := vmi.Spec.Volumes[i].Name; index(n) < 0 {
			names = append(names, n)
		}
	}
	spec, odd := len(names)-start, false
	for i := range vmi.Status.VolumeStatus {
		vs := &vmi.Status.VolumeStatus[i]
		at := index(vs.Name)
		if at < 0 {
			names = append(names, vs.Name)
		}
		// Found at or after spec: the name of an earlier status entry only.
		odd = odd || vs.HotplugVolume != nil && (at < 0 || at >= spec || mayStick(vs.Phase))
	}
	return names, odd
}

// specVolumeIndex returns the index of the VMI's first spec volume called
// name (snapshot.VMIVolume), or -1.
func specVolumeIndex(vmi *snapshot.VMI, name string) int {
	for i := range vmi.Spec.Volumes {
		if vmi.Spec.Volumes[i].Name == name {
			return i
		}
	}
	return -1
}

// judge is judgeStorage, from what the pass already found of the claim
// when known is set.
func (r *danglingRun) judge(ns string, src source, known *volPVC) storage {
	templated := r.templated(ns, src.name)
	if known == nil {
		return judgeStorage(r.in, ns, src, templated)
	}
	pvc, deleting := known.pvc(r.in)
	return judgeFound(r.in, ns, src, templated, pvc, deleting)
}

func volumeStatus(vmi *snapshot.VMI, name string) *snapshot.VolumeStatus {
	for i := range vmi.Status.VolumeStatus {
		if vmi.Status.VolumeStatus[i].Name == name {
			return &vmi.Status.VolumeStatus[i]
		}
	}
	return nil
}

// templated reports whether a VM in ns has a dataVolumeTemplate called
// name: virt-controller creates that DataVolume, whichever VM or VMI refers
// to it.
func (r *danglingRun) templated(ns, name string) bool {
	if r.templates == nil {
		r.templates = map[string]map[string]bool{}
		for i := range r.in.Snapshot.VMs {
			vm := &r.in.Snapshot.VMs[i]
			for j := range vm.Spec.DataVolumeTemplates {
				if r.templates[vm.Namespace] == nil {
					r.templates[vm.Namespace] = map[string]bool{}
				}
				r.templates[vm.Namespace][vm.Spec.DataVolumeTemplates[j].Name] = true
			}
		}
	}
	return r.templates[ns][name]
}
