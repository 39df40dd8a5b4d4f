package act

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/check"
	"github.com/tether-dev/tether/internal/observe"
)

// deletePod deletes an orphaned attachment pod: live re-check, server dry
// run, then a delete preconditioned on the UID and resourceVersion read.
func (e *Executor) deletePod(ctx context.Context, f check.Finding) Result {
	s, err := observe.ForAttachmentPod(ctx, e.Client, e.Observe, f.Namespace, f.Object.Name)
	if err != nil {
		return Result{Outcome: Failed, Message: "live re-read failed", Err: err}
	}
	fresh, ok := check.CheckAttachmentPod(s, e.Policy, e.now(), f.Namespace, f.Object.Name)
	if reason := stillSame(f, fresh, ok); reason != "" {
		return Result{Outcome: Refused, Message: "live re-check: " + reason}
	}
	pod := s.AttachmentPods[0]
	pre := metav1.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if err := e.Client.Delete(ctx, target, client.DryRunAll, client.Preconditions(pre)); err != nil {
		return serverRefusal("dry-run delete", err)
	}
	if err := e.Client.Delete(ctx, target, client.Preconditions(pre)); err != nil {
		if apierrors.IsConflict(err) {
			return Result{Outcome: Refused, Message: "the pod changed since the re-check (precondition failed); nothing deleted", Err: err}
		}
		return serverRefusal("delete", err)
	}
	return Result{Outcome: Applied, Message: fmt.Sprintf("deleted attachment pod %s/%s (uid %s)", pod.Namespace, pod.Name, pod.UID)}
}
