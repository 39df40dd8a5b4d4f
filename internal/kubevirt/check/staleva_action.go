package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// judgeFencing reports whether the node the volume was attached to is
// proven down, and records why or why not. Only two facts prove it: the
// out-of-service taint (an operator's assertion, which the attach/detach
// controller honours too), and, when the operator enabled that rule, a node
// object gone for longer than the configured period. NotReady alone never
// does: a partitioned node may still write to the volume.
func judgeFencing(in Input, v *vaView) bool {
	name, after := v.va.Spec.NodeName, in.Policy.Storage.FenceGoneNodesAfter
	switch {
	case v.node != nil && v.nodeReplaced:
		v.fact("a Node named %s exists: the machine under that name may be alive (re-registered); only its out-of-service taint could prove anything", name)
		return false
	case v.node != nil:
		if snapshot.HasOutOfServiceTaint(v.node) {
			v.fact("node %s carries the %s taint: an operator asserted that it is down (fenced)", name, snapshot.OutOfServiceTaint)
			return true
		}
		v.fact("node %s has no %s taint: nothing proves that it is down", name, snapshot.OutOfServiceTaint)
		return false
	case after <= 0:
		v.fact("the previous node %s may still be running; the rule that fences nodes gone for long is off", name)
		return false
	}
	// The node object is gone (an existing Node, even a re-created one, was
	// handled above): only a durable record says since when.
	gone := in.Snapshot.NodesGoneSince[name]
	switch {
	case gone.IsZero():
		v.fact("since when node %s has been gone is unknown: not fenced by the %s rule", name, after)
		return false
	case in.Now.Sub(gone) < after:
		v.fact("the previous node %s has been gone for %s, less than the %s the fencing rule asks", name, in.Now.Sub(gone).Round(1e9), after)
		return false
	}
	v.fact("the previous node %s has been gone for %s, longer than %s: fenced by the operator's rule", name, in.Now.Sub(gone).Round(1e9), after)
	return true
}

// vaAction picks the least forceful action that lets the detach proceed,
// and says why it is not safe if it is not.
func vaAction(in Input, v *vaView, fenced bool) (drift.ActionType, drift.BlockReason) {
	action := DeleteVolumeAttachment
	switch {
	case len(v.holders) > 0:
		action = DeletePodsOnFencedNode
	case v.va.DeletionTimestamp != nil && hasAttacherFinalizer(v):
		action = RemoveAttacherFinalizer
	}
	switch {
	case !fenced:
		return action, NodeNotFenced
	case len(v.live) > 0:
		// A re-created node's own pods need the volume: only a forced,
		// opt-in re-attachment can help.
		return action, VolumeInUse
	case action == DeletePodsOnFencedNode:
		return action, ""
	case !in.Policy.Storage.ForceDetach:
		v.fact("%s bypasses the attacher's confirmation of the detach; it needs the explicit opt-in (--force-detach)", action)
		return action, drift.NotRequested
	}
	return action, ""
}

func hasAttacherFinalizer(v *vaView) bool {
	return slices.ContainsFunc(v.va.Finalizers, func(f string) bool { return strings.HasPrefix(f, snapshot.AttacherFinalizerPrefix) })
}

// StaleHolders re-runs the StaleVolumeAttachment decision for the
// VolumeAttachment name and returns the pods a DeletePodsOnFencedNode
// action deletes: those bound to the fenced node that keep the attachment
// desired. It returns nil when there is no finding.
func StaleHolders(s *snapshot.Snapshot, p Policy, now time.Time, name string) []*corev1.Pod {
	in := NewInput(s, p, now)
	for i := range s.VolumeAttachments {
		va := &s.VolumeAttachments[i]
		if va.Name != name {
			continue
		}
		if _, ok := decideVA(in, va); !ok {
			return nil
		}
		if v, ok := judgeVA(in, va, true); ok {
			return v.holders
		}
		return nil
	}
	return nil
}

func vaRemedy(v *vaView, action drift.ActionType, block drift.BlockReason) string {
	name, node := v.va.Name, v.va.Spec.NodeName
	taint := fmt.Sprintf("`kubectl taint node %s %s=nodeshutdown:NoExecute`", node, snapshot.OutOfServiceTaint)
	pods := make([]string, 0, len(v.holders))
	for _, p := range v.holders {
		pods = append(pods, fmt.Sprintf("`kubectl delete pod %s -n %s --grace-period=0 --force`", p.Name, p.Namespace))
	}
	delPods := strings.Join(pods, " and ")
	delVA := fmt.Sprintf("`kubectl delete volumeattachment %s`", name)
	unfinalize := fmt.Sprintf("`kubectl patch volumeattachment %s --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]'`", name)
	watch := fmt.Sprintf("then watch `kubectl get volumeattachment %s` go away and the new attachment become attached", name)
	switch {
	case block == NodeNotFenced && v.node != nil && !v.nodeReplaced:
		return fmt.Sprintf("first make sure node %s is really down (powered off, or cut off from the storage): a partitioned node may still write to the volume, and detaching under it corrupts data. Then %s; the attach/detach controller detaches at once, and tether can finish the job (%s). Remove the taint when the node is back", node, taint, action)
	case block == NodeNotFenced:
		return fmt.Sprintf("make sure the machine that was node %s is powered off or cut off from the storage, then either enable the fencing rule for nodes gone for long, or do by hand: %s", node, manualVA(action, delPods, delVA, unfinalize, watch))
	case block == VolumeInUse:
		return fmt.Sprintf("pods on the re-created node %s use the volume while the attachment belongs to the previous node: drain them (`kubectl drain %s`), then %s, %s", node, node, delVA, watch)
	case block == drift.NotRequested:
		return fmt.Sprintf("a forced step, last resort: it bypasses the driver's confirmation that the volume left node %s; make sure it did (check the storage backend), then re-run with --force-detach, or by hand: %s", node, manualVA(action, delPods, delVA, unfinalize, watch))
	}
	return manualVA(action, delPods, delVA, unfinalize, watch)
}

func manualVA(action drift.ActionType, delPods, delVA, unfinalize, watch string) string {
	switch action {
	case DeletePodsOnFencedNode:
		return fmt.Sprintf("%s; the attach/detach controller then detaches the volume itself; %s", delPods, watch)
	case RemoveAttacherFinalizer:
		return fmt.Sprintf("%s (forced: the driver never confirmed the detach); %s", unfinalize, watch)
	}
	return fmt.Sprintf("%s --dry-run=server && %s (forced); %s", delVA, delVA, watch)
}
