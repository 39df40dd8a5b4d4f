package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// maxListedUses caps how many still-listing VMI volumes a finding names.
const maxListedUses = 3

// FindOrphanAttachmentPods proves that a hot-plug attachment pod is
// referenced by no VMI: no volume status names it and no migration targets it.
//
// Decisions, in order (decidePod):
//   - skip: unnamed, out of the namespace scope, terminating, or a claim
//     volume without the prefix;
//   - referenced (a hot-plug volume status or a migration target names the
//     pod): no finding;
//   - owner (resolvePodOwner): its VMI by controller reference or through
//     its virt-launcher pod; with a label selector, a pod whose VMI is
//     unknown is skipped;
//   - finding: DeleteAttachmentPod, held (podHolds) by a VMI still listing
//     one of its claims, the owner VMI terminating or migrating, the minimum
//     age, and Policy.DeleteAttachmentPods.
func FindOrphanAttachmentPods(in Input) []drift.Finding {
	in = in.ready()
	var out []drift.Finding
	pods := in.Snapshot.AttachmentPods
	for i := range pods {
		if f, ok := decidePod(in, &pods[i]); ok {
			out = append(out, f)
		}
	}
	return out
}

// CheckAttachmentPod re-runs the OrphanAttachmentPod decision for one pod,
// typically on a snapshot built from freshly read objects. It returns false
// when the pod is referenced, terminating, out of scope or absent.
func CheckAttachmentPod(s *snapshot.Snapshot, p Policy, now time.Time, ns, name string) (drift.Finding, bool) {
	in := NewInput(s, p, now)
	pod := in.Index.AttachmentPod(ns, name)
	if pod == nil {
		return drift.Finding{}, false
	}
	return decidePod(in, pod)
}

// podOwner is what is known about the VMI an attachment pod belongs to.
type podOwner struct {
	vmi  *snapshot.VMI
	fact string
}

// decidePod is the OrphanAttachmentPod decision for one attachment pod:
// false when it is out of scope, terminating or referenced by a VMI.
func decidePod(in Input, pod *corev1.Pod) (drift.Finding, bool) {
	if !named(pod) || !in.scope.namespace(pod.Namespace) || IsTerminating(pod) || !podVolumesInScope(in.scope, pod) {
		return drift.Finding{}, false
	}
	if referenced(in.Index, pod) {
		return drift.Finding{}, false
	}
	owner := resolvePodOwner(in, pod)
	if in.scope.selector != nil && (owner.vmi == nil || !in.scope.labels(owner.vmi.Labels)) {
		// The selector is on VMI labels: a pod whose VMI is unknown cannot
		// be shown to be in scope.
		return drift.Finding{}, false
	}
	unref := unreferencedFacts(in.Index, pod)
	claims := PodClaims(pod)
	ev := []string{fmt.Sprintf("attachment pod %s/%s (uid %s) mounts claims %s", pod.Namespace, pod.Name, orNone(string(pod.UID)), quoteList(claims))}
	ev = append(ev, owner.fact)
	ev = append(ev, unref...)
	block, holdFacts := podHolds(in, pod, owner, claims)
	ev = append(ev, holdFacts...)
	f := drift.Finding{
		Check:     OrphanAttachmentPod,
		Namespace: pod.Namespace,
		Object:    drift.ObjectRef{Kind: "Pod", Name: pod.Name, UID: pod.UID},
		Volume:    strings.Join(claims, ","),
		Severity:  drift.SeverityWarning,
		Message:   fmt.Sprintf("attachment pod %s/%s is referenced by no VMI", pod.Namespace, pod.Name),
		Evidence:  ev,
		Action:    drift.Action{Type: DeleteAttachmentPod, Safe: block == "", BlockedBy: block, Remedy: podRemedy(pod, block)},
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	return f, true
}

// PodClaims returns the sorted, distinct PVC claims an attachment pod mounts.
func PodClaims(pod *corev1.Pod) []string {
	var claims []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && !slices.Contains(claims, v.PersistentVolumeClaim.ClaimName) {
			claims = append(claims, v.PersistentVolumeClaim.ClaimName)
		}
	}
	slices.Sort(claims)
	return claims
}

// podVolumesInScope applies the volume prefix: every PVC volume of the pod
// (named after the VMI volume it attaches) must carry it.
func podVolumesInScope(sc inScope, pod *corev1.Pod) bool {
	if sc.prefix == "" {
		return true
	}
	n := 0
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		if !sc.volume(v.Name) {
			return false
		}
		n++
	}
	return n > 0
}

// resolvePodOwner finds the VMI a pod belongs to: through a VMI controller
// reference, or through its virt-launcher pod controller (KubeVirt's own
// layout), which the VMI lists in status.activePods.
func resolvePodOwner(in Input, pod *corev1.Pod) podOwner {
	ix := in.Index
	ref := metav1.GetControllerOfNoCopy(pod)
	ns := pod.Namespace
	switch {
	case ref == nil:
		return podOwner{fact: fmt.Sprintf("pod %s/%s has no controller owner", ns, pod.Name)}
	case ref.Kind == "VirtualMachineInstance":
		vmi := ix.VMI(ns, ref.Name)
		switch {
		case vmi == nil:
			return podOwner{fact: fmt.Sprintf("owner VMI %s/%s (uid %s) does not exist", ns, ref.Name, orNone(string(ref.UID)))}
		case ref.UID != "" && vmi.UID != "" && vmi.UID != ref.UID:
			return podOwner{fact: fmt.Sprintf("VMI %s/%s exists with uid %s, not the owner uid %s: the owner is gone", ns, ref.Name, vmi.UID, ref.UID)}
		}
		return podOwner{vmi: vmi, fact: fmt.Sprintf("owner VMI %s/%s exists", ns, vmi.Name)}
	case ref.Kind == "Pod":
		if vmi := in.vmiByLauncher(ns, ref.UID); ref.UID != "" && vmi != nil {
			return podOwner{vmi: vmi, fact: fmt.Sprintf("owner virt-launcher pod %s is an active pod of VMI %s/%s", ref.Name, ns, vmi.Name)}
		}
		return podOwner{fact: fmt.Sprintf("owner virt-launcher pod %s (uid %s) is an active pod of no VMI in %s", ref.Name, orNone(string(ref.UID)), ns)}
	}
	return podOwner{fact: fmt.Sprintf("pod %s/%s is controlled by %s %s", ns, pod.Name, ref.Kind, ref.Name)}
}

// referenced reports whether any VMI in the pod's namespace names the pod
// in a hot-plug volume status (with its UID, or without one) or as the
// target attachment pod of a migration.
func referenced(ix *snapshot.Index, pod *corev1.Pod) bool {
	if pod.UID != "" && ix.MigrationTargetOf(pod.Namespace, pod.UID) != nil {
		return true
	}
	for _, r := range ix.AttachPodRefs(pod.Namespace, pod.Name) {
		if r.PodUID == "" || pod.UID == "" || r.PodUID == pod.UID {
			return true
		}
	}
	return false
}

// unreferencedFacts states why an unreferenced pod is unreferenced.
func unreferencedFacts(ix *snapshot.Index, pod *corev1.Pod) []string {
	ns := pod.Namespace
	var facts []string
	for _, r := range ix.AttachPodRefs(ns, pod.Name) {
		facts = append(facts, fmt.Sprintf("VMI %s/%s volume %q names attachment pod %s with uid %s, not this pod's uid", ns, r.VMI.Name, r.Volume, pod.Name, r.PodUID))
	}
	return append(facts, fmt.Sprintf("no VMI in %s names pod %s in status.volumeStatus[].hotplugVolume or as a migration target", ns, pod.Name))
}

// podHolds applies, in order: a VMI still listing one of the pod's claims,
// the owner VMI terminating or migrating, the minimum age, and the explicit
// request to delete.
func podHolds(in Input, pod *corev1.Pod, owner podOwner, claims []string) (drift.BlockReason, []string) {
	var h holds
	listedBy(&h, in, pod.Namespace, claims)
	if vmi := owner.vmi; vmi != nil {
		if IsTerminating(vmi) {
			h.add(VMITerminating, fmt.Sprintf("owner VMI %s/%s is terminating", vmi.Namespace, vmi.Name))
		}
		if IsMigrating(vmi) {
			h.add(VMIMigrating, fmt.Sprintf("owner VMI %s/%s is migrating", vmi.Namespace, vmi.Name))
		}
	}
	minAge := in.Policy.MinAttachmentPodAge
	if created := pod.CreationTimestamp; created.IsZero() {
		h.add(AttachmentPodTooYoung, "pod has no creationTimestamp: its age is unknown")
	} else if age := in.Now.Sub(created.Time); age < minAge {
		h.add(AttachmentPodTooYoung, fmt.Sprintf("pod age %s is below the minimum %s", age.Round(time.Second), minAge))
	}
	if !in.Policy.DeleteAttachmentPods {
		h.add(drift.NotRequested, "deleting attachment pods was not requested")
	}
	return h.first, h.facts
}

func listedBy(h *holds, in Input, ns string, claims []string) {
	n := 0
	for _, c := range claims {
		for _, u := range in.claimUses(ns, c) {
			if n < maxListedUses {
				h.add(VolumeStillListed, fmt.Sprintf("VMI %s/%s still lists volume %q (claim %s)", ns, u.vmi.Name, u.volume, c))
			} else {
				h.add(VolumeStillListed, "")
			}
			n++
		}
	}
	if n > maxListedUses {
		h.facts = append(h.facts, fmt.Sprintf("%d more VMI volumes list these claims", n-maxListedUses))
	}
}

func quoteList(items []string) string {
	if len(items) == 0 {
		return "<none>"
	}
	return strings.Join(items, ", ")
}

func podRemedy(pod *corev1.Pod, block drift.BlockReason) string {
	ns, name := pod.Namespace, pod.Name
	del := fmt.Sprintf("`kubectl delete pod %s -n %s --dry-run=server && kubectl delete pod %s -n %s`", name, ns, name, ns)
	verify := fmt.Sprintf("check that `kubectl get vmi -n %s -o yaml | grep -n %s` finds nothing", ns, name)
	switch block {
	case VolumeStillListed:
		return fmt.Sprintf("a VMI still lists one of its claims: remove or wait out that volume first (see evidence), re-run the audit, then %s, then %s", verify, del)
	case VMITerminating, VMIMigrating:
		return "wait until the owner VMI has finished terminating or migrating, then re-run the audit"
	case AttachmentPodTooYoung:
		return fmt.Sprintf("wait until the pod is older than the minimum age, re-run the audit, then %s, then %s", verify, del)
	}
	return fmt.Sprintf("%s, then %s", verify, del)
}
