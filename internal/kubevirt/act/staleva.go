package act

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/metrics"
)

// fixStaleAttachment carries out a StaleVolumeAttachment action: live
// re-read of the attachment, its node, PV, claim and the node's pods; the
// same check on that fresh state, with the pass's durable evidence; a
// server dry run; then the write with UID and resourceVersion
// preconditions. The normal path (deleting the pods that keep the
// attachment desired on a fenced node, as the pod garbage collector does for
// out-of-service nodes) needs no opt-in; the forced ones are counted in
// tether_forced_detach_total.
func (e *Executor) fixStaleAttachment(f drift.Finding, ev Evidence) action {
	var now time.Time // of the re-check, for the holders too
	a := action{
		read: func(ctx context.Context) (*snapshot.Snapshot, error) {
			return observe.ForVolumeAttachment(ctx, e.Client, e.Observe, f.Object.Name, ev.NodesGoneSince)
		},
		check: func(s *snapshot.Snapshot, t time.Time) (drift.Finding, bool) {
			now = t
			return check.CheckVolumeAttachment(s, e.Policy, t, f.Object.Name)
		},
	}
	a.targets = func(s *snapshot.Snapshot) (*write, *drift.Result) {
		va := s.VolumeAttachments[0]
		switch f.Action.Type {
		case check.DeletePodsOnFencedNode:
			return e.deleteHolders(check.StaleHolders(s, e.Policy, now, f.Object.Name), va.Spec.NodeName)
		case check.DeleteVolumeAttachment:
			return e.deleteVA(&va, fencingReason(s, &va)), nil
		}
		return e.removeAttacherFinalizer(&va, fencingReason(s, &va))
	}
	return a
}

func fencingReason(s *snapshot.Snapshot, va *storagev1.VolumeAttachment) string {
	if n := s.Index().Node(va.Spec.NodeName); n != nil && snapshot.HasOutOfServiceTaint(n) {
		return metrics.FencedOutOfService
	}
	return metrics.FencedNodeGone
}

// Every forced-step series exists from the start at 0, so that a rate or
// an increase of tether_forced_detach_total sees the first forced step.
func init() {
	for _, a := range []drift.ActionType{check.DeleteVolumeAttachment, check.RemoveAttacherFinalizer} {
		for _, r := range []string{metrics.FencedOutOfService, metrics.FencedNodeGone} {
			metrics.ForcedDetach.WithLabelValues(string(a), r)
		}
	}
}

// deleteHolders force-deletes (grace period 0) each pod, dry run first for
// all of them, each write preconditioned on the UID and resourceVersion read.
func (e *Executor) deleteHolders(pods []*corev1.Pod, node string) (*write, *drift.Result) {
	if len(pods) == 0 {
		return nil, &drift.Result{Outcome: drift.Refused, Message: "live re-check: no pod keeps the attachment desired any more"}
	}
	var done []string
	do := func(ctx context.Context, dryRun bool) *drift.Result {
		for _, p := range pods {
			target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
			pre := client.Preconditions(metav1.Preconditions{UID: &p.UID, ResourceVersion: &p.ResourceVersion})
			err := e.Client.Delete(ctx, target, withDryRun[client.DeleteOption](dryRun, client.GracePeriodSeconds(0), pre)...)
			if !dryRun && apierrors.IsNotFound(err) {
				err = nil
			}
			if r := refused(dryRun, "delete of pod "+p.Namespace+"/"+p.Name, err); r != nil {
				if !dryRun {
					r.Message += fmt.Sprintf(" (deleted before it: %s)", strings.Join(done, ", "))
				}
				return r
			}
			if !dryRun {
				done = append(done, p.Namespace+"/"+p.Name)
			}
		}
		return nil
	}
	applied := func(ctx context.Context) drift.Result {
		logf.FromContext(ctx).Info("force-deleted pods on fenced node", "node", node, "pods", done)
		return drift.Result{Outcome: drift.Applied, Message: fmt.Sprintf("force-deleted pod(s) %s bound to fenced node %s; the attach/detach controller detaches the volume", strings.Join(done, ", "), node)}
	}
	return &write{do: do, done: applied}, nil
}

// deleteVA deletes the VolumeAttachment, preconditioned on the UID and
// resourceVersion read.
func (e *Executor) deleteVA(va *storagev1.VolumeAttachment, reason string) *write {
	pre := client.Preconditions(metav1.Preconditions{UID: &va.UID, ResourceVersion: &va.ResourceVersion})
	target := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: va.Name}}
	do := func(ctx context.Context, dryRun bool) *drift.Result {
		return refused(dryRun, "delete", e.Client.Delete(ctx, target, withDryRun[client.DeleteOption](dryRun, pre)...))
	}
	done := func(ctx context.Context) drift.Result {
		metrics.ForcedDetach.WithLabelValues(string(check.DeleteVolumeAttachment), reason).Inc()
		logf.FromContext(ctx).Info("forced: deleted stale VolumeAttachment", "volumeAttachment", va.Name, "node", va.Spec.NodeName, "reason", reason)
		return drift.Result{Outcome: drift.Applied, Message: fmt.Sprintf("forced: deleted VolumeAttachment %s (node %s, fencing: %s)", va.Name, va.Spec.NodeName, reason)}
	}
	return &write{do: do, done: done}
}

// removeAttacherFinalizer removes the external-attacher finalizers with a
// JSON patch whose test ops pin the finalizer list and resourceVersion read.
func (e *Executor) removeAttacherFinalizer(va *storagev1.VolumeAttachment, reason string) (*write, *drift.Result) {
	keep := slices.DeleteFunc(slices.Clone(va.Finalizers), func(f string) bool { return strings.HasPrefix(f, snapshot.AttacherFinalizerPrefix) })
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": va.ResourceVersion},
		{"op": "test", "path": "/metadata/finalizers", "value": va.Finalizers},
		{"op": "replace", "path": "/metadata/finalizers", "value": keep},
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return nil, &drift.Result{Outcome: drift.Failed, Message: "building the patch", Err: err}
	}
	patch := client.RawPatch(types.JSONPatchType, body)
	target := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: va.Name}}
	do := func(ctx context.Context, dryRun bool) *drift.Result {
		return refused(dryRun, "patch", e.Client.Patch(ctx, target, patch, withDryRun[client.PatchOption](dryRun)...))
	}
	done := func(ctx context.Context) drift.Result {
		metrics.ForcedDetach.WithLabelValues(string(check.RemoveAttacherFinalizer), reason).Inc()
		logf.FromContext(ctx).Info("forced: removed attacher finalizer", "volumeAttachment", va.Name, "node", va.Spec.NodeName, "reason", reason)
		return drift.Result{Outcome: drift.Applied, Message: fmt.Sprintf("forced: removed the attacher finalizer of VolumeAttachment %s (node %s, fencing: %s)", va.Name, va.Spec.NodeName, reason)}
	}
	return &write{do: do, done: done}, nil
}
