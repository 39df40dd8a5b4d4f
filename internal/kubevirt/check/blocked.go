package check

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/protect/inuse"
)

// FindBlockedDeletions explains objects stuck terminating on a protection
// finalizer, for longer than the grace period:
//   - a PVC held by kubernetes.io/pvc-protection: the scheduled pods that
//     still reference it, finished ones included (a finished pod holds its
//     claims until it is deleted);
//   - a PVC or DataVolume held by tether.dev/in-use: the VMs using it;
//   - a PV held by kubernetes.io/pv-protection (its claim) or by an
//     external-attacher finalizer (its VolumeAttachments).
//
// It says what would release each finalizer. When no user is left, the
// finalizer's controller is not doing its job, and the finding says so. The
// check only reports: removing a finalizer by hand is the operator's call.
// A label selector (on VMI labels) cannot be applied, so with one set
// nothing is reported.
//
// Decisions, in order:
//   - a label selector is set: nothing;
//   - candidates (blockedCandidate): PVCs, DataVolumes holding
//     tether.dev/in-use, and PVs whose claim's namespace is in scope, that
//     are named, in scope, terminating for longer than BlockedDeletionGrace
//     and hold a finalizer this check knows;
//   - per finalizer, its users: pods (podUsers), VMs (inUse), the bound
//     claim or Bound phase, VolumeAttachments (blockedPV);
//   - finding (blockage.finding): report only; the message says whether a
//     user is left.
func FindBlockedDeletions(in Input) []drift.Finding {
	in = in.ready()
	if in.scope.selector != nil {
		return nil
	}
	var out []drift.Finding
	s := in.Snapshot
	for i := range s.PVCs {
		pvc := &s.PVCs[i]
		if blockedCandidate(in, pvc, pvc.Namespace, pvc.Name) {
			out = append(out, blockedPVC(in, pvc))
		}
	}
	for i := range s.DataVolumes {
		dv := &s.DataVolumes[i]
		if blockedCandidate(in, dv, dv.Namespace, dv.Name) && slices.Contains(dv.Finalizers, inuse.Finalizer) {
			b := &blockage{in: in, obj: dv, kind: string(inuse.KindDataVolume), ns: dv.Namespace}
			b.inUse(inuse.Ref{Kind: inuse.KindDataVolume, Namespace: dv.Namespace, Name: dv.Name})
			out = append(out, b.finding(dv.Name))
		}
	}
	for i := range s.PVs {
		pv := &s.PVs[i]
		ns, claim := snapshot.ClaimOf(pv)
		if in.scope.namespaces != nil && !in.scope.namespace(ns) {
			continue
		}
		if blockedCandidate(in, pv, ns, claim) {
			out = append(out, blockedPV(in, pv))
		}
	}
	return out
}

// blockedCandidate: named, in scope, terminating for longer than the grace
// period, and holding a finalizer this check knows.
func blockedCandidate(in Input, obj metav1.Object, ns, volume string) bool {
	ts := obj.GetDeletionTimestamp()
	if obj.GetName() == "" || ts == nil || !in.scope.namespace(ns) || (in.scope.prefix != "" && !in.scope.volume(volume)) ||
		in.Now.Sub(ts.Time) < in.Policy.Storage.BlockedDeletionGrace {
		return false
	}
	return slices.ContainsFunc(obj.GetFinalizers(), knownFinalizer)
}

func knownFinalizer(f string) bool {
	return f == snapshot.PVCProtectionFinalizer || f == snapshot.PVProtectionFinalizer || f == inuse.Finalizer ||
		strings.HasPrefix(f, snapshot.AttacherFinalizerPrefix)
}

// blockage builds one finding: per finalizer, who holds it and how to
// release it.
type blockage struct {
	in       Input
	obj      metav1.Object
	kind, ns string
	facts    []string
	remedies []string
	users    int
	idle     []string // finalizers with no user left
}

func (b *blockage) fact(format string, args ...any) {
	b.facts = append(b.facts, fmt.Sprintf(format, args...))
}

func blockedPVC(in Input, pvc *corev1.PersistentVolumeClaim) drift.Finding {
	b := &blockage{in: in, obj: pvc, kind: "PersistentVolumeClaim", ns: pvc.Namespace}
	if slices.Contains(pvc.Finalizers, snapshot.PVCProtectionFinalizer) {
		b.podUsers(pvc)
	}
	if slices.Contains(pvc.Finalizers, inuse.Finalizer) {
		b.inUse(inuse.Ref{Kind: inuse.KindPVC, Namespace: pvc.Namespace, Name: pvc.Name})
	}
	return b.finding(pvc.Name)
}

// podUsers applies the PVC protection controller's rule: a scheduled pod
// that references the claim holds it, whatever its phase.
func (b *blockage) podUsers(pvc *corev1.PersistentVolumeClaim) {
	n := 0
	for _, pod := range b.in.Index.PodsUsingClaim(pvc.Namespace, pvc.Name) {
		if pod.Spec.NodeName == "" {
			continue
		}
		n++
		phase := orNone(string(pod.Status.Phase))
		switch {
		case snapshot.PodTerminal(pod):
			b.fact("pod %s (phase %s, finished) on node %s still references the claim: a finished pod holds it until the pod is deleted", pod.Name, phase, pod.Spec.NodeName)
			b.remedies = append(b.remedies, fmt.Sprintf("`kubectl delete pod %s -n %s` (it has finished)", pod.Name, pod.Namespace))
		case pod.DeletionTimestamp != nil:
			b.fact("pod %s (phase %s) on node %s references the claim and is itself terminating", pod.Name, phase, pod.Spec.NodeName)
			b.remedies = append(b.remedies, fmt.Sprintf("wait for pod %s to finish terminating (if node %s is down, see StaleVolumeAttachment)", pod.Name, pod.Spec.NodeName))
		default:
			b.fact("pod %s (phase %s) on node %s uses the claim", pod.Name, phase, pod.Spec.NodeName)
			b.remedies = append(b.remedies, fmt.Sprintf("stop pod %s (delete it or scale its workload down)", pod.Name))
		}
	}
	b.users += n
	if n == 0 {
		b.fact("finalizer %s: no scheduled pod references the claim", snapshot.PVCProtectionFinalizer)
		b.idle = append(b.idle, snapshot.PVCProtectionFinalizer)
	}
}

// inUse explains tether's own finalizer with the words the protection
// controller puts in its Events.
func (b *blockage) inUse(ref inuse.Ref) {
	users := inuse.Users(ref, b.obj, b.in.Snapshot.VMs)
	if len(users) == 0 {
		b.fact("finalizer %s: no VirtualMachine references it", inuse.Finalizer)
		b.idle = append(b.idle, inuse.Finalizer)
		return
	}
	b.users += len(users)
	b.fact("%s", inuse.PostponedMessage(ref, users))
	b.remedies = append(b.remedies, fmt.Sprintf("delete VirtualMachine(s) %s or remove the reference from their spec", strings.Join(users, ", ")))
}

// blockedPV explains a terminating PV: pv-protection is held by a claim that
// still exists and is bound to it (or by the Bound phase), an
// external-attacher finalizer by the VolumeAttachments of the PV.
func blockedPV(in Input, pv *corev1.PersistentVolume) drift.Finding {
	b := &blockage{in: in, obj: pv, kind: "PersistentVolume"}
	ns, claim := snapshot.ClaimOf(pv)
	if slices.Contains(pv.Finalizers, snapshot.PVProtectionFinalizer) {
		switch pvc := in.Index.PVC(ns, claim); {
		case claim != "" && pvc != nil && pvc.Spec.VolumeName == pv.Name:
			b.users++
			b.fact("PV is bound to claim %s/%s (phase %s), which still exists", ns, claim, pv.Status.Phase)
			b.remedies = append(b.remedies, fmt.Sprintf("delete claim %s/%s first (`kubectl delete pvc %s -n %s`)", ns, claim, claim, ns))
		case pv.Status.Phase == corev1.VolumeBound:
			b.users++
			b.fact("PV is in phase Bound (claim %s/%s)", orNone(ns), orNone(claim))
			b.remedies = append(b.remedies, "wait for the PV controller to release the PV from its deleted claim")
		default:
			b.fact("finalizer %s: the PV is not bound (phase %s)", snapshot.PVProtectionFinalizer, orNone(string(pv.Status.Phase)))
			b.idle = append(b.idle, snapshot.PVProtectionFinalizer)
		}
	}
	for _, f := range pv.Finalizers {
		if !strings.HasPrefix(f, snapshot.AttacherFinalizerPrefix) {
			continue
		}
		vas := in.Index.VolumeAttachmentsOf(pv.Name)
		if len(vas) == 0 {
			b.fact("finalizer %s: no VolumeAttachment refers to the PV", f)
			b.idle = append(b.idle, f)
			continue
		}
		for _, va := range vas {
			b.users++
			b.fact("VolumeAttachment %s to node %s (attached=%t) still refers to the PV; finalizer %s stays until it is gone", va.Name, va.Spec.NodeName, va.Status.Attached, f)
		}
		b.remedies = append(b.remedies, "let the VolumeAttachments detach (see StaleVolumeAttachment if their node is gone or down)")
	}
	return b.finding(pv.Name)
}

func (b *blockage) finding(volume string) drift.Finding {
	obj, in := b.obj, b.in
	ts := obj.GetDeletionTimestamp()
	head := fmt.Sprintf("%s %s (uid %s) has been terminating for %s; finalizers: %s", b.kind, drift.Qualified(b.ns, obj.GetName()), orNone(string(obj.GetUID())),
		in.Now.Sub(ts.Time).Round(1e9), quoteList(obj.GetFinalizers()))
	block, sev := HeldByUsers, drift.SeverityInfo
	show := fmt.Sprintf("`kubectl get %s %s%s -o yaml`", strings.ToLower(b.kind), obj.GetName(), nsFlag(b.ns))
	remedy := fmt.Sprintf("see %s; release it: %s", show, strings.Join(b.remedies, "; "))
	if b.users == 0 {
		block, sev = FinalizerNotReleased, drift.SeverityWarning
		remedy = fmt.Sprintf("no user is left (%s), yet finalizer(s) %s stay: check that their controller runs (kube-controller-manager's PVC/PV protection controllers, external-attacher, `tether controller` for %s) and read its logs; removing a finalizer by hand skips the check it stands for",
			show, strings.Join(b.idle, ", "), inuse.Finalizer)
	}
	msg := fmt.Sprintf("%s %s is stuck terminating: held by %d user(s)", b.kind, drift.Qualified(b.ns, obj.GetName()), b.users)
	if b.users == 0 {
		msg = fmt.Sprintf("%s %s is stuck terminating: no user left, but finalizer(s) %s stay", b.kind, drift.Qualified(b.ns, obj.GetName()), strings.Join(b.idle, ", "))
	}
	f := drift.Finding{
		Check:     BlockedDeletion,
		Namespace: b.ns,
		Object:    drift.ObjectRef{Kind: b.kind, Name: obj.GetName(), UID: obj.GetUID()},
		Volume:    volume,
		Severity:  sev,
		Message:   msg,
		Evidence:  append([]string{head}, b.facts...),
		Action:    drift.Action{Type: drift.None, BlockedBy: block, Remedy: remedy},
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	return f
}

func nsFlag(ns string) string {
	if ns == "" {
		return ""
	}
	return " -n " + ns
}
