package act

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// deletePod deletes an orphaned attachment pod: live re-check, server dry
// run, then a delete preconditioned on the UID and resourceVersion read.
func (e *Executor) deletePod(f drift.Finding) action {
	a := action{
		read: func(ctx context.Context) (*snapshot.Snapshot, error) {
			return observe.ForAttachmentPod(ctx, e.Client, e.Observe, f.Namespace, f.Object.Name)
		},
		check: func(s *snapshot.Snapshot, now time.Time) (drift.Finding, bool) {
			return check.CheckAttachmentPod(s, e.Policy, now, f.Namespace, f.Object.Name)
		},
	}
	a.targets = func(s *snapshot.Snapshot) (*write, *drift.Result) {
		return e.podDelete(s.AttachmentPods[0], "attachment pod"), nil
	}
	return a
}

// deleteMigrationSourcePod deletes MigrationSourcePodLeftover's pod: live
// re-read of the pod and its VMI, the same check on them, server dry run,
// then a delete preconditioned on the UID and resourceVersion read.
func (e *Executor) deleteMigrationSourcePod(f drift.Finding) action {
	a := action{
		read: func(ctx context.Context) (*snapshot.Snapshot, error) {
			return observe.ForMigrationSourcePod(ctx, e.Client, f.Namespace, f.Object.Name)
		},
		check: func(s *snapshot.Snapshot, now time.Time) (drift.Finding, bool) {
			return check.CheckMigrationSourcePod(s, e.Policy, now, f.Namespace, f.Object.Name)
		},
	}
	a.targets = func(s *snapshot.Snapshot) (*write, *drift.Result) {
		return e.podDelete(s.Pods[0], "finished migration source pod"), nil
	}
	return a
}

// podDelete is the write that deletes pod (what names it in the outcome):
// the server's dry run first, then a delete preconditioned on the UID and
// resourceVersion the live re-read saw.
func (e *Executor) podDelete(pod corev1.Pod, what string) *write {
	pre := client.Preconditions(metav1.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion})
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	do := func(ctx context.Context, dryRun bool) *drift.Result {
		err := e.Client.Delete(ctx, target, withDryRun[client.DeleteOption](dryRun, pre)...)
		if !dryRun && apierrors.IsConflict(err) {
			return &drift.Result{Outcome: drift.Refused, Message: "the pod changed since the re-check (precondition failed); nothing deleted", Err: err}
		}
		return refused(dryRun, "delete", err)
	}
	done := func(context.Context) drift.Result {
		return drift.Result{Outcome: drift.Applied, Message: fmt.Sprintf("deleted %s %s/%s (uid %s)", what, pod.Namespace, pod.Name, pod.UID)}
	}
	return &write{do: do, done: done}
}
