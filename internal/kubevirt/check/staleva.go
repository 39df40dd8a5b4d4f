package check

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// KindVolumeAttachment is the object kind of StaleVolumeAttachment findings.
const KindVolumeAttachment = "VolumeAttachment"

// FindStaleVolumeAttachments proves that a CSI VolumeAttachment is stale:
// its Node object is gone, or was re-created (a newer Node under the same
// name, or another CSI node ID) and so is not the node the volume was
// attached to; or its PV is gone; or, for longer than the grace period, no
// scheduled pod on its node that the attach/detach controller still counts
// needs it (finished pods, and pods stuck terminating on a node that is not
// Ready, do not).
//
// The action is safe only with fencing evidence: the node carries the
// out-of-service taint, or (when the operator enabled the rule) the node
// object has been gone for longer than the configured period. Even then the
// normal path comes first: force-delete the pods still bound to the fenced
// node, so the attach/detach controller detaches on its own. Deleting the
// VolumeAttachment, or its attacher finalizer, is the opt-in last resort.
//
// VolumeAttachments are cluster-scoped: with a namespace scope, only those
// whose PV is bound to a claim in scope are looked at; a label selector
// (on VMI labels) cannot be applied to them, so none are.
//
// Decisions, in order (decideVA):
//   - skip: unnamed, no node, or a label selector is set;
//   - judgeVA: the PV (gone?), the scope (vaInScope), the node gone or
//     re-created (judgeNode), live users and stale holders on it (judgeUsers);
//   - stale: node gone or re-created, PV gone, or not needed for
//     StaleAttachmentGrace; otherwise no finding (evidence text is gathered
//     only for stale attachments);
//   - fencing (judgeFencing): the out-of-service taint, or the node gone for
//     longer than FenceGoneNodesAfter;
//   - action (vaAction): delete the holders' pods, else remove the attacher
//     finalizer of a deleting attachment, else delete it; held when not
//     fenced, when a pod needs it, or when forcing lacks ForceDetach.
func FindStaleVolumeAttachments(in Input) []drift.Finding {
	in = in.ready()
	var out []drift.Finding
	vas := in.Snapshot.VolumeAttachments
	for i := range vas {
		if f, ok := decideVA(in, &vas[i]); ok {
			out = append(out, f)
		}
	}
	return out
}

// CheckVolumeAttachment re-runs the StaleVolumeAttachment decision for the
// VolumeAttachment name, typically on a snapshot of freshly read objects.
func CheckVolumeAttachment(s *snapshot.Snapshot, p Policy, now time.Time, name string) (drift.Finding, bool) {
	in := NewInput(s, p, now)
	for i := range s.VolumeAttachments {
		if s.VolumeAttachments[i].Name == name {
			return decideVA(in, &s.VolumeAttachments[i])
		}
	}
	return drift.Finding{}, false
}

// vaView is what is known about one VolumeAttachment.
type vaView struct {
	va     *storagev1.VolumeAttachment
	pvName string
	pv     *corev1.PersistentVolume
	node   *corev1.Node
	// nodeGone: no Node of that name; nodeReplaced: a Node of that name
	// that is provably not the one the volume was attached to.
	nodeGone, nodeReplaced, pvGone bool
	// holders are pods bound to the node that keep the attachment desired
	// although they will never use it again; live are pods that need it.
	holders, live []*corev1.Pod
	// since is when the attachment was last needed, as far as is known.
	since time.Time
	facts []string
	// quiet: decide only, without the evidence text.
	quiet bool
}

func (v *vaView) fact(format string, args ...any) {
	if !v.quiet {
		v.facts = append(v.facts, fmt.Sprintf(format, args...))
	}
}

// decideVA is the StaleVolumeAttachment decision for one VolumeAttachment:
// false when it is out of scope or not stale.
func decideVA(in Input, va *storagev1.VolumeAttachment) (drift.Finding, bool) {
	if va.Name == "" || va.Spec.NodeName == "" || in.scope.selector != nil {
		return drift.Finding{}, false
	}
	// Most attachments are fine: decide quietly first, and gather the
	// evidence only for those that are stale.
	if v, ok := judgeVA(in, va, true); !ok || !v.stale(in) {
		return drift.Finding{}, false
	}
	v, _ := judgeVA(in, va, false)
	if len(v.live) == 0 {
		v.fact("no scheduled, running pod on node %s needs it (last needed %s)", va.Spec.NodeName, in.since(v.since))
	}
	if ts := va.DeletionTimestamp; ts != nil {
		v.fact("deletion was requested %s; finalizers %s remain: the attacher has not confirmed the detach",
			in.since(ts.Time), quoteList(va.Finalizers))
	}
	fenced := judgeFencing(in, v)
	action, block := vaAction(in, v, fenced)
	f := drift.Finding{
		Check:    StaleVolumeAttachment,
		Object:   drift.ObjectRef{Kind: KindVolumeAttachment, Name: va.Name, UID: va.UID},
		Volume:   v.pvName,
		Severity: drift.SeverityWarning,
		Message:  fmt.Sprintf("VolumeAttachment %s of %s to node %s is stale: %s", va.Name, pvWord(v.pvName), va.Spec.NodeName, strings.Join(staleReasons(v), ", ")),
		Evidence: v.facts,
		Action:   drift.Action{Type: action, Safe: block == "", BlockedBy: block, Remedy: vaRemedy(v, action, block)},
	}
	f.Namespace, _ = snapshot.ClaimOf(v.pv)
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	return f, true
}

// judgeVA gathers what is known about va; quiet skips the evidence text.
// False: the attachment is out of scope.
func judgeVA(in Input, va *storagev1.VolumeAttachment, quiet bool) (*vaView, bool) {
	v := &vaView{va: va, since: va.CreationTimestamp.Time, quiet: quiet}
	if src := va.Spec.Source.PersistentVolumeName; src != nil {
		v.pvName = *src
		v.pv = in.Index.PV(v.pvName)
		v.pvGone = v.pv == nil
	}
	if !vaInScope(in, v) {
		return nil, false
	}
	v.fact("VolumeAttachment %s (uid %s, %s) attaches %s to node %s with attacher %s; status.attached=%t",
		va.Name, orNone(string(va.UID)), in.age(va.CreationTimestamp), pvWord(v.pvName), va.Spec.NodeName, va.Spec.Attacher, va.Status.Attached)
	if v.pvGone {
		v.fact("PersistentVolume %s does not exist", v.pvName)
	}
	judgeNode(in, v)
	judgeUsers(in, v)
	return v, true
}

// stale: the node is gone or re-created, the PV is gone, or no pod has
// needed the attachment for the grace period.
func (v *vaView) stale(in Input) bool {
	unneeded := len(v.live) == 0 && in.Now.Sub(v.since) >= in.Policy.Storage.StaleAttachmentGrace
	return v.nodeGone || v.nodeReplaced || v.pvGone || unneeded
}

func pvWord(pv string) string {
	if pv == "" {
		return "an inline volume"
	}
	return "PV " + pv
}

// vaInScope: without a namespace scope every VolumeAttachment is in scope;
// with one, only those whose PV is bound to a claim in scope. The volume
// prefix applies to the claim name.
func vaInScope(in Input, v *vaView) bool {
	ns, claim := snapshot.ClaimOf(v.pv)
	if in.scope.namespaces != nil && (ns == "" || !in.scope.namespace(ns)) {
		return false
	}
	return in.scope.prefix == "" || (claim != "" && in.scope.volume(claim))
}

func staleReasons(v *vaView) []string {
	var r []string
	switch {
	case v.nodeGone:
		r = append(r, "its node is gone")
	case v.nodeReplaced:
		r = append(r, "its node was re-created")
	}
	if v.pvGone {
		r = append(r, "its PV is gone")
	}
	if len(v.live) == 0 && !v.nodeGone {
		r = append(r, "no running pod on the node needs it")
	}
	return r
}

// judgeNode finds out whether the node the volume was attached to still
// exists: a Node created after the VolumeAttachment, or one whose CSI node
// ID differs from the one the attacher recorded, is another node.
func judgeNode(in Input, v *vaView) {
	name := v.va.Spec.NodeName
	node := in.Index.Node(name)
	if node == nil {
		v.nodeGone = true
		if since, ok := in.Snapshot.NodesGoneSince[name]; ok {
			v.fact("node %s does not exist (missing since %s)", name, in.since(since))
		} else {
			v.fact("node %s does not exist (since when is unknown)", name)
		}
		return
	}
	v.node = node
	vaCreated, nodeCreated := v.va.CreationTimestamp, node.CreationTimestamp
	recorded, current := v.va.Annotations[snapshot.VANodeIDAnnotation], snapshot.CSINodeID(node, v.va.Spec.Attacher)
	switch {
	case recorded != "" && current != "" && recorded != current:
		v.nodeReplaced = true
		v.fact("node %s now has CSI node ID %q, not %q recorded when the volume was attached: it is another node", name, current, recorded)
	case !vaCreated.IsZero() && !nodeCreated.IsZero() && nodeCreated.After(vaCreated.Time):
		v.nodeReplaced = true
		v.fact("node %s (uid %s) was created %s, after the VolumeAttachment: it was re-created and is not the node the volume was attached to",
			name, orNone(string(node.UID)), in.since(nodeCreated.Time))
	}
	ready := snapshot.NodeReady(node)
	v.fact("node %s Ready=%s", name, ready)
	if node.Annotations[snapshot.ControllerManagedAttachAnnotation] != "true" {
		v.fact("node %s lacks annotation %s=true: the attach/detach controller does not manage its volumes", name, snapshot.ControllerManagedAttachAnnotation)
	}
}

// judgeUsers sorts the pods bound to the node that use the volume into
// live users and stale holders, and finds when the volume was last needed.
func judgeUsers(in Input, v *vaView) {
	if v.pvName == "" && v.va.Spec.Source.InlineVolumeSpec != nil {
		// Inline volumes cannot be traced to pods by claim: any pod on the
		// node may use one.
		for _, pod := range in.Index.PodsOnNode(v.va.Spec.NodeName) {
			if !podDone(pod) {
				v.live = append(v.live, pod)
			}
		}
		return
	}
	notReady := v.node == nil || snapshot.NodeReady(v.node) != corev1.ConditionTrue
	for _, pod := range podsUsingPVOnNode(in.Index, v.va.Spec.NodeName, v.pvName, v.pv) {
		ref := pod.Namespace + "/" + pod.Name
		switch {
		case podDone(pod):
			v.since = later(v.since, podEnd(pod))
			v.fact("pod %s on the node has finished or terminated (phase %s): it no longer needs the volume", ref, orNone(string(pod.Status.Phase)))
		case v.nodeGone:
			v.holders = append(v.holders, pod)
			v.fact("pod %s is still bound to the missing node and keeps the attachment desired", ref)
		case v.nodeReplaced && !pod.CreationTimestamp.IsZero() && pod.CreationTimestamp.Before(&v.node.CreationTimestamp):
			v.holders = append(v.holders, pod)
			v.fact("pod %s was bound to the previous node %s and keeps the attachment desired", ref, pod.Spec.NodeName)
		case pod.DeletionTimestamp != nil && notReady && !in.Now.Before(pod.DeletionTimestamp.Time):
			v.holders = append(v.holders, pod)
			v.since = later(v.since, pod.DeletionTimestamp.Time)
			v.fact("pod %s is stuck terminating (deletion due %s) on a node that is not Ready: its kubelet has not confirmed, and it keeps the attachment desired", ref, in.since(pod.DeletionTimestamp.Time))
		default:
			v.live = append(v.live, pod)
			v.fact("pod %s (phase %s) on node %s uses the volume", ref, orNone(string(pod.Status.Phase)), pod.Spec.NodeName)
		}
	}
}

// podDone reports whether the attach/detach controller no longer counts a
// pod: it finished, or it is being deleted and none of its containers runs.
func podDone(pod *corev1.Pod) bool {
	if snapshot.PodTerminal(pod) {
		return true
	}
	if pod.DeletionTimestamp == nil {
		return false
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, c := range list {
			if c.State.Running != nil {
				return false
			}
		}
	}
	return true
}

// podEnd is the latest known moment a finished pod ran, or zero.
func podEnd(pod *corev1.Pod) time.Time {
	var end time.Time
	if pod.DeletionTimestamp != nil {
		end = pod.DeletionTimestamp.Time
	}
	for _, c := range pod.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil {
			end = later(end, t.FinishedAt.Time)
		}
	}
	return end
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// podsUsingPVOnNode returns the pods bound to node for which podUsesPV
// holds, found through the claims (the PV's claimRef, and every claim bound
// to the PV) rather than by testing every pod on the node; sorted by
// namespace and name.
func podsUsingPVOnNode(ix *snapshot.Index, node, pvName string, pv *corev1.PersistentVolume) []*corev1.Pod {
	claims := []snapshot.Key{}
	if ns, name := snapshot.ClaimOf(pv); name != "" {
		claims = append(claims, snapshot.Key{Namespace: ns, Name: name})
	}
	if pvName != "" {
		claims = append(claims, ix.ClaimsBoundTo(pvName)...)
	}
	var out []*corev1.Pod
	seen := map[*corev1.Pod]bool{}
	for _, c := range claims {
		for _, pod := range ix.PodsUsingClaim(c.Namespace, c.Name) {
			if pod.Spec.NodeName == node && !seen[pod] {
				seen[pod] = true
				out = append(out, pod)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// podUsesPV reports whether one of the pod's claims is bound to PV pvName.
func podUsesPV(ix *snapshot.Index, pod *corev1.Pod, pvName string, pv *corev1.PersistentVolume) bool {
	refNS, refName := snapshot.ClaimOf(pv)
	for _, claim := range snapshot.PodClaimNames(pod) {
		if refNS == pod.Namespace && refName == claim {
			return true
		}
		if pvc := ix.PVC(pod.Namespace, claim); pvc != nil && pvName != "" && pvc.Spec.VolumeName == pvName {
			return true
		}
	}
	return false
}

func (in Input) since(t time.Time) string {
	if t.IsZero() {
		return "at an unknown time"
	}
	return in.Now.Sub(t).Round(time.Second).String() + " ago"
}
