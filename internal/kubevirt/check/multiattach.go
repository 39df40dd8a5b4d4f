package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// FindMultiAttachConflicts proves that a scheduled pod waits for a volume
// that only one node may attach (no ReadWriteMany or ReadOnlyMany access
// mode) and that is attached to another node, with no attachment to its own
// node. The finding says who holds it: the node, and the pods there that use
// the volume — named only inside the waiting pod's namespace, counted for
// other namespaces, as the attach/detach controller's Multi-Attach events
// do — and the likely remedy. Nothing is done automatically: the holder
// side is what StaleVolumeAttachment judges.
//
// Decisions, in order:
//   - pod: named, scheduled, in scope, not finished, not terminating, and
//     older than MultiAttachGrace;
//   - each distinct claim of the pod in the prefix scope (decideMultiAttach):
//     bound to a PV that exists, with exclusive access modes, of a CSI driver
//     that requires attaching;
//   - an attachment to the pod's own node that is attached: no finding;
//     none to another node: no finding;
//   - holders: per other node, the pods there that use the PV (named in the
//     pod's namespace, counted elsewhere);
//   - finding: no action, BlockedBy VolumeHeldElsewhere.
func FindMultiAttachConflicts(in Input) []drift.Finding {
	in = in.ready()
	var out []drift.Finding
	pods := in.Snapshot.Pods
	for i := range pods {
		pod := &pods[i]
		if !named(pod) || pod.Spec.NodeName == "" || !in.scope.namespace(pod.Namespace) || !in.scope.labels(pod.Labels) ||
			podDone(pod) || pod.DeletionTimestamp != nil || in.Now.Sub(pod.CreationTimestamp.Time) < in.Policy.Storage.MultiAttachGrace {
			continue
		}
		seen := map[string]bool{}
		for _, claim := range snapshot.PodClaimNames(pod) {
			if seen[claim] || !in.scope.volume(claim) {
				continue
			}
			seen[claim] = true
			if f, ok := decideMultiAttach(in, pod, claim); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

// holderNode is one other node that holds the volume.
type holderNode struct {
	name  string
	va    *storagev1.VolumeAttachment
	node  *corev1.Node
	named []string // pods in the waiting pod's namespace
	other int      // pods in other namespaces
}

// decideMultiAttach is the MultiAttachConflict decision for one claim of a
// scheduled pod: false unless the claim's PV is exclusive, needs attaching,
// is not attached to the pod's node and is attached to another.
func decideMultiAttach(in Input, pod *corev1.Pod, claim string) (drift.Finding, bool) {
	pvc := in.Index.PVC(pod.Namespace, claim)
	if pvc == nil || pvc.Spec.VolumeName == "" {
		return drift.Finding{}, false
	}
	pvName := pvc.Spec.VolumeName
	pv := in.Index.PV(pvName)
	if pv == nil || !exclusive(pv) {
		return drift.Finding{}, false
	}
	if pv.Spec.CSI != nil {
		if d := in.Index.CSIDriver(pv.Spec.CSI.Driver); d != nil && d.Spec.AttachRequired != nil && !*d.Spec.AttachRequired {
			return drift.Finding{}, false
		}
	}
	var holders []*holderNode
	for _, va := range in.Index.VolumeAttachmentsOf(pvName) {
		if va.Spec.NodeName == pod.Spec.NodeName {
			if va.Status.Attached {
				return drift.Finding{}, false // attached where it is wanted
			}
			continue
		}
		holders = append(holders, &holderNode{name: va.Spec.NodeName, va: va, node: in.Index.Node(va.Spec.NodeName)})
	}
	if len(holders) == 0 {
		return drift.Finding{}, false
	}
	sort.Slice(holders, func(i, j int) bool { return holders[i].name < holders[j].name })
	ev := []string{fmt.Sprintf("pod %s/%s on node %s (%s) waits for claim %s (PV %s, access modes %s); no attachment of it to node %s is attached",
		pod.Namespace, pod.Name, pod.Spec.NodeName, in.age(pod.CreationTimestamp), claim, pvName, modes(pv), pod.Spec.NodeName)}
	for _, h := range holders {
		for _, user := range in.Index.PodsOnNode(h.name) {
			if podDone(user) || !podUsesPV(in.Index, user, pvName, pv) {
				continue
			}
			if user.Namespace == pod.Namespace {
				h.named = append(h.named, user.Name)
			} else {
				h.other++
			}
		}
		ev = append(ev, holderFact(h))
	}
	f := drift.Finding{
		Check:     MultiAttachConflict,
		Namespace: pod.Namespace,
		Object:    drift.ObjectRef{Kind: "Pod", Name: pod.Name, UID: pod.UID},
		Volume:    claim,
		Severity:  drift.SeverityWarning,
		Message:   fmt.Sprintf("pod %s/%s waits for volume %s, which is exclusively attached to node %s", pod.Namespace, pod.Name, claim, holderNames(holders)),
		Evidence:  ev,
		Action:    drift.Action{Type: drift.None, BlockedBy: VolumeHeldElsewhere, Remedy: multiAttachRemedy(pod, claim, holders)},
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	return f, true
}

// exclusive reports whether only one node may attach the PV, as the
// attach/detach controller decides it: no ReadWriteMany or ReadOnlyMany.
func exclusive(pv *corev1.PersistentVolume) bool {
	if len(pv.Spec.AccessModes) == 0 {
		return false
	}
	return !slices.Contains(pv.Spec.AccessModes, corev1.ReadWriteMany) && !slices.Contains(pv.Spec.AccessModes, corev1.ReadOnlyMany)
}

func modes(pv *corev1.PersistentVolume) string {
	out := make([]string, len(pv.Spec.AccessModes))
	for i, m := range pv.Spec.AccessModes {
		out[i] = string(m)
	}
	return strings.Join(out, ",")
}

func holderNames(hs []*holderNode) string {
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.name
	}
	return strings.Join(names, ", ")
}

// holderFact states who holds the volume on one node, within the privacy
// rule: names in the waiting pod's namespace, a count elsewhere.
func holderFact(h *holderNode) string {
	state := "does not exist"
	if h.node != nil {
		state = "Ready=" + string(snapshot.NodeReady(h.node))
		if snapshot.HasOutOfServiceTaint(h.node) {
			state += ", out-of-service"
		}
	}
	users := "no pod on it uses the volume"
	switch {
	case len(h.named) > 0 && h.other > 0:
		users = fmt.Sprintf("used there by pod(s) %s and by %d pod(s) in other namespaces", strings.Join(h.named, ", "), h.other)
	case len(h.named) > 0:
		users = fmt.Sprintf("used there by pod(s) %s", strings.Join(h.named, ", "))
	case h.other > 0:
		users = fmt.Sprintf("used there by %d pod(s) in other namespaces", h.other)
	}
	deleting := ""
	if h.va.DeletionTimestamp != nil {
		deleting = ", being detached"
	}
	return fmt.Sprintf("held by node %s (%s) through VolumeAttachment %s (attached=%t%s); %s", h.name, state, h.va.Name, h.va.Status.Attached, deleting, users)
}

func multiAttachRemedy(pod *corev1.Pod, claim string, hs []*holderNode) string {
	h := hs[0]
	switch {
	case h.node == nil || snapshot.NodeReady(h.node) != corev1.ConditionTrue:
		return fmt.Sprintf("node %s looks down: see the StaleVolumeAttachment finding for VolumeAttachment %s; if the node is really down, fence it (`kubectl taint node %s %s=nodeshutdown:NoExecute`) so the volume can move; never detach from a node that may still be running",
			h.name, h.va.Name, h.name, snapshot.OutOfServiceTaint)
	case len(h.named) > 0 || h.other > 0:
		return fmt.Sprintf("another pod on node %s uses claim %s (`kubectl get pods -n %s -o wide --field-selector spec.nodeName=%s`): stop it (scale its workload down) or schedule pod %s onto node %s; a ReadWriteOnce volume serves one node at a time",
			h.name, claim, pod.Namespace, h.name, pod.Name, h.name)
	}
	return fmt.Sprintf("no pod on node %s uses the volume any more: the attach/detach controller should detach it; see the StaleVolumeAttachment finding for VolumeAttachment %s (`kubectl describe volumeattachment %s`) and the kube-controller-manager logs",
		h.name, h.va.Name, h.va.Name)
}
