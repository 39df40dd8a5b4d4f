package check

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// StuckHotplugPhase: a hot-plug volume status of a running VMI that stays
// in a phase KubeVirt should have moved it out of. Report only.
const StuckHotplugPhase = "StuckHotplugPhase"

// stuckHotplug is one way a hot-plug phase gets stuck, as KubeVirt's own fixes
// describe it.
type stuckHotplug struct {
	fix  Fix
	what string
	// since is when the state began, as far as the API shows it; zero when
	// it cannot be known.
	since time.Time
	// sinceFact says what since is read from, or why it is unknown.
	sinceFact string
	next      string // the component expected to act next
}

// FindStuckHotplugPhases proves that a hot-plug volume of a running VMI is
// in a phase KubeVirt should have moved it out of, names the component
// expected to act next and, from the fixes table, the upstream fix and the
// release that carries it compared with the running KubeVirt. It never
// acts: the volume may be wanted, and deleting the attachment pods of a
// live VMI can cost the guest its disk (kubevirt/kubevirt#16711, #18862).
//
// Decisions, per hot-plug volume status (hotplugVolume set) of a named,
// in-scope VMI that is Running, not terminating and not migrating:
//   - in the VMI spec and Detaching: the re-plug race (FixReplugDetaching);
//     virt-controller must reset the phase; since when the attachment pod
//     the status names was created (the re-plug made it), or, when that pod
//     is the old one being deleted (KubeVirt before #16159 keeps it as the
//     current one), since its deletion;
//   - in the VMI spec and its attachment pod is being deleted: the dying pod
//     kept as current (FixDyingAttachPod); virt-controller must make a new
//     one; since the pod's deletionTimestamp;
//   - not in the VMI spec and Ready or MountedToPod: the unplug never ends
//     (FixRemountAfterUnplug); virt-handler on the VMI's node must unmount;
//     since the deletionTimestamp of the attachment pod, if it is being
//     deleted, else unknown;
//   - in the VMI spec and AttachedToNode while its attachment pod runs: the
//     mount never comes; virt-handler on the VMI's node must mount (it is
//     down, or failing to mount: no upstream change is known); since the
//     pod's containers started (virt-controller writes AttachedToNode once
//     it has made the pod, storage.go:166-171 in v1.9.0; virt-handler
//     mounts the volume from the pod the status names by UID, which
//     virt-controller writes once the pod's container is ready, within
//     seconds); no finding while the pod does not run (an unbound claim
//     keeps it Pending), the status names no UID of it, or it is not listed;
//   - a known duration shorter than StuckPhaseGrace: no finding; a known
//     one at least as long: warning; an unknown one: info, saying so.
func FindStuckHotplugPhases(in Input) []drift.Finding {
	in = in.ready()
	var out []drift.Finding
	// While no attachment pod is being deleted, only a VMI with an odd
	// hot-plug status entry can have a finding: that is known for most
	// VMIs before reading them.
	anyDying := len(in.dyingAttachmentPods()) > 0
	for i := range in.Snapshot.VMIs {
		if !anyDying && !in.hotplugOdd(i) {
			continue
		}
		vmi := &in.Snapshot.VMIs[i]
		if !named(vmi) || !in.scope.namespace(vmi.Namespace) || !in.scope.labels(vmi.Labels) ||
			vmi.Status.Phase != kubevirtv1.Running || IsTerminating(vmi) || IsMigrating(vmi) {
			continue
		}
		for j := range vmi.Status.VolumeStatus {
			vs := &vmi.Status.VolumeStatus[j]
			if vs.HotplugVolume == nil || vs.Name == "" || !in.scope.volume(vs.Name) {
				continue
			}
			s, ok := stuckState(in, vmi, vs, inVMISpec(vmi, vs.Name, j))
			if !ok {
				continue
			}
			if f, ok := stuckFinding(in, vmi, vs, s); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

// stuckState classifies one hot-plug volume status (see
// FindStuckHotplugPhases).
func stuckState(in Input, vmi *snapshot.VMI, vs *snapshot.VolumeStatus, inSpec bool) (stuckHotplug, bool) {
	detaching := inSpec && vs.Phase == kubevirtv1.HotplugVolumeDetaching
	unplugged := !inSpec && (vs.Phase == kubevirtv1.VolumeReady || vs.Phase == kubevirtv1.HotplugVolumeMounted)
	unmounted := inSpec && vs.Phase == kubevirtv1.HotplugVolumeAttachedToNode
	if !detaching && !unplugged && (!inSpec || isDetaching(vs.Phase)) {
		return stuckHotplug{}, false
	}
	var pod *corev1.Pod
	// Only a pod being deleted matters unless the volume is detaching, and
	// those are few: most volumes need no lookup at all, and while no
	// attachment pod is being deleted the status's pod is not even read.
	if terminating := in.dyingAttachmentPods(); (detaching || unmounted || len(terminating) > 0) && vs.HotplugVolume.AttachPodName != "" {
		name := vs.HotplugVolume.AttachPodName
		if detaching || unmounted {
			pod = in.Index.AttachmentPod(vmi.Namespace, name)
		} else {
			pod = terminating[snapshot.Key{Namespace: vmi.Namespace, Name: name}]
		}
		if pod != nil && vs.HotplugVolume.AttachPodUID != "" && pod.UID != vs.HotplugVolume.AttachPodUID {
			pod = nil // a newer pod of that name: not the one the status means
		}
	}
	dying := pod != nil && pod.DeletionTimestamp != nil
	switch {
	case inSpec && vs.Phase == kubevirtv1.HotplugVolumeDetaching:
		s := stuckHotplug{fix: fixFor(FixReplugDetaching), next: "virt-controller",
			what: "is in the VMI spec (wanted) but its status stays Detaching, as after an unplug and a re-plug under the same name"}
		switch {
		case dying:
			// The status still names the pod the unplug deleted: KubeVirt
			// before #16159 keeps it as the current one. Detaching began
			// with that deletion (virt-controller v1.7.0 deletes the pod and
			// then writes the phase in one pass, vmi.go:335-337), not with
			// the pod's creation, which dates the plug before the unplug.
			s.what += fmt.Sprintf(", and still names attachment pod %s, which the unplug deleted: KubeVirt without %s keeps it as the current one and makes no new one while it stays",
				pod.Name, fixFor(FixDyingAttachPod).Change)
			s.since = pod.DeletionTimestamp.Time
			s.sinceFact = terminatingFact(pod) + "; the volume has been Detaching since about then"
		case pod != nil && !pod.CreationTimestamp.IsZero():
			s.since = pod.CreationTimestamp.Time
			s.sinceFact = fmt.Sprintf("Detaching since at least the creation of its attachment pod %s (%s)", pod.Name, in.age(pod.CreationTimestamp))
		default:
			s.sinceFact = "how long it has been Detaching cannot be known: KubeVirt keeps no time in the volume status, and the attachment pod it names is not in the snapshot"
		}
		return s, true
	case inSpec && dying && !isDetaching(vs.Phase):
		return stuckHotplug{fix: fixFor(FixDyingAttachPod), next: "virt-controller", since: pod.DeletionTimestamp.Time,
			what:      fmt.Sprintf("is in the VMI spec (wanted) and its status (phase %s) still names attachment pod %s, which is being deleted", orNone(string(vs.Phase)), pod.Name),
			sinceFact: terminatingFact(pod)}, true
	case unmounted && pod != nil && vs.HotplugVolume.AttachPodUID == pod.UID:
		// virt-handler mounts from the pod the status names by UID
		// (hotplug-disk/mount.go:361-365 in v1.9.0), which virt-controller
		// writes once the pod's container is ready (storage.go:160-165).
		started := containerStarted(pod)
		if started.IsZero() {
			return stuckHotplug{}, false // not running: virt-controller's to move on, or mid-lifecycle
		}
		return stuckHotplug{fix: Fix{Component: "virt-handler"}, next: "virt-handler on node " + orNone(vmi.Status.NodeName), since: started,
			what:      fmt.Sprintf("is in the VMI spec (wanted) and its attachment pod %s runs on node %s, but its status stays AttachedToNode: the volume was never mounted into the guest's pod", pod.Name, orNone(pod.Spec.NodeName)),
			sinceFact: fmt.Sprintf("attachment pod %s has been running since %s, and the volume status names it by UID (virt-controller writes that once its container is ready): virt-handler mounts the volume from it within seconds, and then writes MountedToPod", pod.Name, started.UTC().Format(time.RFC3339))}, true
	case !inSpec && (vs.Phase == kubevirtv1.VolumeReady || vs.Phase == kubevirtv1.HotplugVolumeMounted):
		s := stuckHotplug{fix: fixFor(FixRemountAfterUnplug), next: "virt-handler on node " + orNone(vmi.Status.NodeName),
			what: fmt.Sprintf("is gone from the VMI spec (unplugged) but its status stays %s: the volume is still mounted into the guest's pod", vs.Phase)}
		if dying {
			s.since = pod.DeletionTimestamp.Time
			s.sinceFact = terminatingFact(pod)
		} else {
			s.sinceFact = "how long it has been stuck cannot be known: KubeVirt keeps no time in the volume status or the VMI spec, and no terminating attachment pod dates the unplug"
		}
		return s, true
	}
	return stuckHotplug{}, false
}

// containerStarted is when the last of pod's containers started running,
// zero unless all of them run.
func containerStarted(pod *corev1.Pod) time.Time {
	var at time.Time
	for _, c := range pod.Status.ContainerStatuses {
		r := c.State.Running
		if r == nil || r.StartedAt.IsZero() {
			return time.Time{}
		}
		if r.StartedAt.After(at) {
			at = r.StartedAt.Time
		}
	}
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return time.Time{}
	}
	return at
}

// terminatingFact says since when the attachment pod is being deleted and,
// if any, which finalizers keep it: virt-controller deletes attachment pods
// with a grace period of 0 (volume-hotplug.go:404-406 in v1.9.0), so one
// that stays is held by a finalizer or by a node that has not torn it down.
func terminatingFact(pod *corev1.Pod) string {
	fact := fmt.Sprintf("attachment pod %s has been terminating since %s", pod.Name, pod.DeletionTimestamp.UTC().Format(time.RFC3339))
	if len(pod.Finalizers) > 0 {
		fact += ", kept by finalizers " + strings.Join(pod.Finalizers, ", ")
	}
	return fact
}

// inVMISpec reports whether the VMI spec has a volume called name. Status
// entries mostly follow the spec's order, so the spec volume at hint (the
// entry's own index) is compared first.
func inVMISpec(vmi *snapshot.VMI, name string, hint int) bool {
	if vols := vmi.Spec.Volumes; hint < len(vols) && vols[hint].Name == name {
		return true
	}
	return snapshot.VMIVolume(vmi, name) != nil
}

// hotplugOdd reports whether some hot-plug status entry of the snapshot's
// VMI i has no spec volume of its name, or a phase that may stick
// (mayStick). Only such an entry can be stuck unless its
// attachment pod is being deleted (stuckState). Known once per pass: the
// walk of DanglingVolumeReference notes it (noteHotplugOdd).
func (in Input) hotplugOdd(i int) bool {
	m := in.memo
	if m.hotplugOdd == nil {
		m.hotplugOdd = make([]uint8, len(in.Snapshot.VMIs))
	}
	if m.hotplugOdd[i] == 0 {
		vmi, odd := &in.Snapshot.VMIs[i], false
		for j := range vmi.Status.VolumeStatus {
			vs := &vmi.Status.VolumeStatus[j]
			odd = odd || vs.HotplugVolume != nil && (mayStick(vs.Phase) || !inVMISpec(vmi, vs.Name, j))
		}
		in.noteHotplugOdd(i, odd)
	}
	return m.hotplugOdd[i] == 2
}

// noteHotplugOdd records hotplugOdd of VMI i.
func (in Input) noteHotplugOdd(i int, odd bool) {
	m := in.memo
	if m.hotplugOdd == nil {
		m.hotplugOdd = make([]uint8, len(in.Snapshot.VMIs))
	}
	m.hotplugOdd[i] = 1
	if odd {
		m.hotplugOdd[i] = 2
	}
}

// dyingAttachmentPods returns the attachment pods being deleted, by
// namespace and name, found once per pass.
func (in Input) dyingAttachmentPods() map[snapshot.Key]*corev1.Pod {
	if in.memo.dying == nil {
		in.memo.dying = map[snapshot.Key]*corev1.Pod{}
		for i := range in.Snapshot.AttachmentPods {
			if p := &in.Snapshot.AttachmentPods[i]; p.DeletionTimestamp != nil {
				in.memo.dying[snapshot.Key{Namespace: p.Namespace, Name: p.Name}] = p
			}
		}
	}
	return in.memo.dying
}

func stuckFinding(in Input, vmi *snapshot.VMI, vs *snapshot.VolumeStatus, s stuckHotplug) (drift.Finding, bool) {
	sev := drift.SeverityInfo
	how := "for an unknown time"
	if !s.since.IsZero() {
		d := in.Now.Sub(s.since)
		if d < in.Policy.StuckPhaseGrace {
			return drift.Finding{}, false
		}
		sev, how = drift.SeverityWarning, "for "+d.Round(time.Second).String()
	}
	ev := []string{
		fmt.Sprintf("VMI %s/%s (Running on node %s): hot-plug volume %s %s", vmi.Namespace, vmi.Name, orNone(vmi.Status.NodeName), vs.Name, s.what),
		s.sinceFact,
	}
	if s.fix.Mode == "" {
		ev = append(ev, fmt.Sprintf("expected to act next: %s; no upstream KubeVirt change is known to cause this: the component is down, or failing (its logs say which)", s.next))
	} else {
		ev = append(ev, fmt.Sprintf("expected to act next: %s; failure mode %s: %s", s.next, s.fix.Mode, s.fix.What), s.fix.verdict(in.Snapshot.FeatureGates))
	}
	f := drift.Finding{
		Check:     StuckHotplugPhase,
		Namespace: vmi.Namespace,
		Object:    drift.ObjectRef{Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID},
		Volume:    vs.Name,
		Severity:  sev,
		Message:   fmt.Sprintf("hot-plug volume %s of VMI %s/%s is stuck in phase %s %s; %s is expected to act", vs.Name, vmi.Namespace, vmi.Name, orNone(string(vs.Phase)), how, s.next),
		Evidence:  ev,
		Action:    drift.Action{Type: drift.None, BlockedBy: WaitsForKubeVirt, Remedy: stuckRemedy(in, vmi, vs, s)},
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	return f, true
}

// stuckRemedy is what an operator can run: look at the component expected
// to act, upgrade where a release carries the fix, restart the VM as the
// last resort; never delete the attachment pods of a live VMI.
func stuckRemedy(in Input, vmi *snapshot.VMI, vs *snapshot.VolumeStatus, s stuckHotplug) string {
	ns, name := vmi.Namespace, vmi.Name
	watch := fmt.Sprintf("`kubectl get vmi %s -n %s -o jsonpath='{.status.volumeStatus}'`", name, ns)
	look := "the virt-controller logs (`kubectl logs -n <kubevirt namespace> -l kubevirt.io=virt-controller`)"
	if s.fix.Component == "virt-handler" {
		look = fmt.Sprintf("virt-handler on node %s (`kubectl get pods -A -l kubevirt.io=virt-handler -o wide --field-selector spec.nodeName=%s`, and its logs): if it is down, the volume waits for it",
			orNone(vmi.Status.NodeName), orNone(vmi.Status.NodeName))
	}
	upgrade := ""
	if running, err := snapshot.ParseKubeVirtVersion(in.Snapshot.FeatureGates.KubeVirtVersion); err == nil && in.Snapshot.FeatureGates.Known {
		if yes, to, ok := s.fix.carried(running); ok && !yes {
			upgrade = fmt.Sprintf("; upgrade KubeVirt to %s, which carries %s", to, s.fix.Change)
		}
	}
	restart := "re-create the standalone VMI"
	if own := VMOwner(vmi); own != nil {
		restart = fmt.Sprintf("`virtctl restart %s -n %s`", own.Name, ns)
	}
	return fmt.Sprintf("watch %s and check %s%s; if it stays, restart the VM in a maintenance window (%s), which re-attaches its volumes; "+
		"do not delete the attachment pods of the running VMI (kubevirt/kubevirt#16711, #18862): the guest can lose volume %s",
		watch, look, upgrade, restart, vs.Name)
}
