package act

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tether-dev/tether/internal/check"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/observe"
	"github.com/tether-dev/tether/internal/snapshot"
)

// fixStaleAttachment carries out a StaleVolumeAttachment action: live
// re-read of the attachment, its node, PV, claim and the node's pods; the
// same check on that fresh state; a server dry run; then the write with
// UID and resourceVersion preconditions. The normal path (deleting the pods
// that keep the attachment desired on a fenced node, as the pod garbage
// collector does for out-of-service nodes) needs no opt-in; the forced ones
// are counted in tether_forced_detach_total.
func (e *Executor) fixStaleAttachment(ctx context.Context, f check.Finding) Result {
	s, err := observe.ForVolumeAttachment(ctx, e.Client, e.Observe, f.Object.Name, e.NodesGoneSince)
	if err != nil {
		return Result{Outcome: Failed, Message: "live re-read failed", Err: err}
	}
	now := e.now()
	fresh, ok := check.CheckVolumeAttachment(s, e.Policy, now, f.Object.Name)
	if reason := stillSame(f, fresh, ok); reason != "" {
		return Result{Outcome: Refused, Message: "live re-check: " + reason}
	}
	va := s.VolumeAttachments[0]
	switch f.Action.Type {
	case check.DeletePodsOnFencedNode:
		return e.deleteHolders(ctx, check.StaleHolders(s, e.Policy, now, f.Object.Name), va.Spec.NodeName)
	case check.DeleteVolumeAttachment:
		return e.deleteVA(ctx, &va, fencingReason(s, &va))
	case check.RemoveAttacherFinalizer:
		return e.removeAttacherFinalizer(ctx, &va, fencingReason(s, &va))
	}
	return Result{Outcome: Refused, Message: fmt.Sprintf("no action to take (%s)", f.Action.Type)}
}

func fencingReason(s *snapshot.Snapshot, va *storagev1.VolumeAttachment) string {
	if n := s.Index().Node(va.Spec.NodeName); n != nil && snapshot.HasOutOfServiceTaint(n) {
		return "out-of-service"
	}
	return "node-gone"
}

// deleteHolders force-deletes (grace period 0) each pod, dry run first for
// all of them, each write preconditioned on the UID and resourceVersion read.
func (e *Executor) deleteHolders(ctx context.Context, pods []*corev1.Pod, node string) Result {
	if len(pods) == 0 {
		return Result{Outcome: Refused, Message: "live re-check: no pod keeps the attachment desired any more"}
	}
	zero := int64(0)
	opts := func(p *corev1.Pod) []client.DeleteOption {
		return []client.DeleteOption{client.GracePeriodSeconds(zero), client.Preconditions(metav1.Preconditions{UID: &p.UID, ResourceVersion: &p.ResourceVersion})}
	}
	target := func(p *corev1.Pod) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
	}
	for _, p := range pods {
		if err := e.Client.Delete(ctx, target(p), append(opts(p), client.DryRunAll)...); err != nil {
			return serverRefusal("dry-run delete of pod "+p.Namespace+"/"+p.Name, err)
		}
	}
	var done []string
	for _, p := range pods {
		if err := e.Client.Delete(ctx, target(p), opts(p)...); err != nil && !apierrors.IsNotFound(err) {
			r := serverRefusal("delete of pod "+p.Namespace+"/"+p.Name, err)
			r.Message += fmt.Sprintf(" (deleted before it: %s)", strings.Join(done, ", "))
			return r
		}
		done = append(done, p.Namespace+"/"+p.Name)
	}
	logf.FromContext(ctx).Info("force-deleted pods on fenced node", "node", node, "pods", done)
	return Result{Outcome: Applied, Message: fmt.Sprintf("force-deleted pod(s) %s bound to fenced node %s; the attach/detach controller detaches the volume", strings.Join(done, ", "), node)}
}

func (e *Executor) deleteVA(ctx context.Context, va *storagev1.VolumeAttachment, reason string) Result {
	pre := client.Preconditions(metav1.Preconditions{UID: &va.UID, ResourceVersion: &va.ResourceVersion})
	target := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: va.Name}}
	if err := e.Client.Delete(ctx, target, pre, client.DryRunAll); err != nil {
		return serverRefusal("dry-run delete", err)
	}
	if err := e.Client.Delete(ctx, target, pre); err != nil {
		return serverRefusal("delete", err)
	}
	metrics.ForcedDetach.WithLabelValues(string(check.DeleteVolumeAttachment), reason).Inc()
	logf.FromContext(ctx).Info("forced: deleted stale VolumeAttachment", "volumeAttachment", va.Name, "node", va.Spec.NodeName, "reason", reason)
	return Result{Outcome: Applied, Message: fmt.Sprintf("forced: deleted VolumeAttachment %s (node %s, fencing: %s)", va.Name, va.Spec.NodeName, reason)}
}

// removeAttacherFinalizer removes the external-attacher finalizers with a
// JSON patch whose test ops pin the finalizer list and resourceVersion read.
func (e *Executor) removeAttacherFinalizer(ctx context.Context, va *storagev1.VolumeAttachment, reason string) Result {
	keep := slices.DeleteFunc(slices.Clone(va.Finalizers), func(f string) bool { return strings.HasPrefix(f, snapshot.AttacherFinalizerPrefix) })
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": va.ResourceVersion},
		{"op": "test", "path": "/metadata/finalizers", "value": va.Finalizers},
		{"op": "replace", "path": "/metadata/finalizers", "value": keep},
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return Result{Outcome: Failed, Message: "building the patch", Err: err}
	}
	patch := client.RawPatch(types.JSONPatchType, body)
	target := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: va.Name}}
	if err := e.Client.Patch(ctx, target, patch, client.DryRunAll); err != nil {
		return serverRefusal("dry-run patch", err)
	}
	if err := e.Client.Patch(ctx, target, patch); err != nil {
		return serverRefusal("patch", err)
	}
	metrics.ForcedDetach.WithLabelValues(string(check.RemoveAttacherFinalizer), reason).Inc()
	logf.FromContext(ctx).Info("forced: removed attacher finalizer", "volumeAttachment", va.Name, "node", va.Spec.NodeName, "reason", reason)
	return Result{Outcome: Applied, Message: fmt.Sprintf("forced: removed the attacher finalizer of VolumeAttachment %s (node %s, fencing: %s)", va.Name, va.Spec.NodeName, reason)}
}
