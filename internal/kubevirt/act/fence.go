package act

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// OutOfServiceTaint is the taint tether adds to a tenant Node whose infra
// VM is down: the value non-graceful node shutdown documents.
var OutOfServiceTaint = corev1.Taint{Key: snapshot.OutOfServiceTaint, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// fence is TenantNodeDown's action on a tenant Node (the finding's
// Cluster): add the out-of-service taint and tether's record of it; or lift
// it step by step (cordon, remove the taint, and, in a later pass,
// uncordon). Live re-read (the tenant with what of the node is still being
// released, then the infra VM and VMI by GET) and re-check; the Node read
// in the tenant right after, its UID compared, and the step derived from
// that Node; an update of it preconditioned on the resourceVersion read,
// dry run first; between the dry run and the write the infra VM and VMI,
// the tenant node and what of it is being released are read again and
// must not have moved. A cordon is followed at once by the taint's removal,
// through the same protocol from a fresh read.
func (e *Executor) fence(f drift.Finding, _ Evidence) action {
	return e.fenceStep(f, true)
}

// fenceStep is fence; chain lets a cordon run the step after it.
func (e *Executor) fenceStep(f drift.Finding, chain bool) action {
	a := action{
		read: func(ctx context.Context) (*snapshot.Snapshot, error) {
			return observe.ForTenantNode(ctx, e.Client, e.Observe, f.Cluster, f.Object.Name)
		},
		check: func(s *snapshot.Snapshot, now time.Time) (drift.Finding, bool) {
			return check.CheckTenantNode(s, e.Policy, now, f.Cluster, f.Object.Name)
		},
	}
	a.targets = func(s *snapshot.Snapshot) (*write, *drift.Result) {
		tc, err := e.tenantClient(f.Cluster)
		if err != nil {
			return nil, &drift.Result{Outcome: drift.Failed, Cause: drift.ServerError, Message: err.Error(), Err: err}
		}
		var node corev1.Node
		if err := tc.Get(context.Background(), client.ObjectKey{Name: f.Object.Name}, &node); err != nil {
			return nil, refused(false, fmt.Sprintf("reading tenant %q node %s", f.Cluster, f.Object.Name), err)
		}
		if f.Object.UID != "" && node.UID != f.Object.UID {
			return nil, &drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf("live re-check: tenant %q node %s was re-created (uid %s, planned %s)", f.Cluster, node.Name, node.UID, f.Object.UID)}
		}
		changed, step, refusal := fenced(f, node.DeepCopy(), infraVMOf(s, f.Object.Name), e.now())
		if refusal != nil {
			return nil, refusal
		}
		do := func(ctx context.Context, dryRun bool) *drift.Result {
			target := changed.DeepCopy() // carries the resourceVersion read
			return refused(dryRun, fmt.Sprintf("%s (update of tenant %q node %s)", step, f.Cluster, node.Name), tc.Update(ctx, target, withDryRun[client.UpdateOption](dryRun)...))
		}
		done := func(ctx context.Context) drift.Result {
			r := drift.Result{Outcome: drift.Applied, Message: stepDone(f, step, node.Name, e.Policy, changed.Annotations[snapshot.CordonedAnnotation] != "")}
			if step != stepCordon || !chain {
				return r
			}
			// The cordon is step one of two: the taint's removal follows
			// from a fresh live read; held or refused, the node stays
			// cordoned and tainted, and the next pass resumes.
			next := e.guarded(ctx, f, e.fenceStep(f, false))
			if next.Outcome != drift.Applied {
				// The cordon was written (the action changed something),
				// and the un-fence is not done: pending, so that the next
				// pass resumes it.
				r.Outcome = drift.Pending
				r.Message += "; the taint's removal did not follow (" + next.Message + "): the node stays cordoned and tainted, and the next pass resumes"
				return r
			}
			next.Message = r.Message + "; then " + next.Message
			return next
		}
		return &write{do: do, fingerprint: fenceFingerprint, done: done}, nil
	}
	return a
}

// The writes of TenantNodeDown on a tenant Node.
const (
	stepTaint    = "taint"
	stepCordon   = "cordon"
	stepUntaint  = "removal of the out-of-service taint"
	stepUncordon = "uncordon"
)

// stepDone says what a step did; ours says whether the node's cordon is
// tether's.
func stepDone(f drift.Finding, step, node string, p check.Policy, ours bool) string {
	switch {
	case step == stepCordon:
		return fmt.Sprintf("cordoned tenant %q node %s before lifting its fence", f.Cluster, node)
	case step == stepUntaint && !ours:
		return fmt.Sprintf("removed the out-of-service taint tether had put on tenant %q node %s; the cordon someone else set stays", f.Cluster, node)
	case step == stepUntaint:
		return fmt.Sprintf("removed the out-of-service taint tether had put on tenant %q node %s; it stays cordoned for %s, then tether uncordons it", f.Cluster, node, unfenceSettle(p))
	case step == stepUncordon:
		return fmt.Sprintf("uncordoned tenant %q node %s, which tether had cordoned to lift its fence", f.Cluster, node)
	}
	return fmt.Sprintf("tainted tenant %q node %s %s=%s:%s", f.Cluster, node, OutOfServiceTaint.Key, OutOfServiceTaint.Value, OutOfServiceTaint.Effect)
}

func unfenceSettle(p check.Policy) time.Duration {
	if p.UnfenceSettle > 0 {
		return p.UnfenceSettle
	}
	return check.DefaultUnfenceSettle
}

// fenced is node with the finding's next change made, and which step it
// is, from the node as read: the taint and its record added; or, to lift
// tether's fence, a cordon (recorded as tether's) while the node is
// schedulable, else the taint and its record removed (with the time, when
// the cordon is tether's); or tether's cordon and its records removed. Each
// step refuses a node whose state does not call for it.
func fenced(f drift.Finding, node *corev1.Node, vm snapshot.InfraVM, now time.Time) (*corev1.Node, string, *drift.Result) {
	has := snapshot.HasOutOfServiceTaint(node)
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	refuse := func(format string, args ...any) (*corev1.Node, string, *drift.Result) {
		return nil, "", &drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf("tenant %q node %s ", f.Cluster, node.Name) + fmt.Sprintf(format, args...)}
	}
	switch f.Action.Type {
	case check.TaintOutOfService:
		if has {
			_, _, r := refuse("already carries the out-of-service taint: nothing to do")
			r.Cause = drift.AlreadyGone
			return nil, "", r
		}
		node.Spec.Taints = append(node.Spec.Taints, OutOfServiceTaint)
		node.Annotations[snapshot.FencedAnnotation] = fmt.Sprintf("infra VM %s down, fenced at %s", vm, now.UTC().Format(time.RFC3339))
		delete(node.Annotations, snapshot.UnfencedAnnotation) // a stale time of an earlier un-fence
		return node, stepTaint, nil
	case check.RemoveOutOfServiceTaint:
		switch {
		case node.Annotations[snapshot.FencedAnnotation] == "":
			return refuse("has no %s record: its out-of-service taint is not tether's, and stays", snapshot.FencedAnnotation)
		case !has:
			return refuse("no longer carries the out-of-service taint: someone else removed it")
		case !node.Spec.Unschedulable:
			node.Spec.Unschedulable = true
			node.Annotations[snapshot.CordonedAnnotation] = fmt.Sprintf("to lift the fence of infra VM %s, at %s", vm, now.UTC().Format(time.RFC3339))
			return node, stepCordon, nil
		}
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == snapshot.OutOfServiceTaint })
		delete(node.Annotations, snapshot.FencedAnnotation)
		if node.Annotations[snapshot.CordonedAnnotation] != "" {
			node.Annotations[snapshot.UnfencedAnnotation] = now.UTC().Format(time.RFC3339)
		}
		return node, stepUntaint, nil
	case check.UncordonTenantNode:
		switch {
		case node.Annotations[snapshot.CordonedAnnotation] == "":
			return refuse("has no %s record: its cordon is not tether's, and stays", snapshot.CordonedAnnotation)
		case has:
			return refuse("carries the out-of-service taint again: it stays cordoned")
		}
		node.Spec.Unschedulable = false
		delete(node.Annotations, snapshot.CordonedAnnotation)
		delete(node.Annotations, snapshot.UnfencedAnnotation)
		return node, stepUncordon, nil
	}
	return nil, "", &drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf("no action to take (%s)", f.Action.Type)}
}

// fenceFingerprint is resourceVersions and, of each tenant node, what the
// fencing decision reads of it: the Node's state and what of it is still
// being released.
func fenceFingerprint(s *snapshot.Snapshot) string {
	var b strings.Builder
	b.WriteString(resourceVersions(s))
	for _, t := range s.Tenants {
		for _, n := range t.Nodes {
			fmt.Fprintf(&b, " node:%s/%s/%s/%t/%t/%t/%s/%s/%v/%q", t.Name, n.Name, n.UID, n.OutOfService, n.FencedBy != "", n.Unschedulable, n.CordonedBy, n.Ready, n.Release, n.ReleaseError)
		}
	}
	return b.String()
}

// infraVMOf is the infra VM the tenant node of the live snapshot
// resolves to.
func infraVMOf(s *snapshot.Snapshot, node string) snapshot.InfraVM {
	for i := range s.Tenants {
		t := &s.Tenants[i]
		for j := range t.Nodes {
			if t.Nodes[j].Name == node {
				return snapshot.ResolveTenantNode(&t.Nodes[j], t.Namespace, t.MatchNodesByName).VM
			}
		}
	}
	return snapshot.InfraVM{}
}

// tenantClient is a client of the tenant called name, from the tenants
// the executor observes.
func (e *Executor) tenantClient(name string) (client.Client, error) {
	for _, t := range e.Observe.Tenants {
		if t.Name == name {
			c, err := clients.New(t.Config)
			if err != nil {
				return nil, fmt.Errorf("connecting to tenant %q: %w", name, err)
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("tenant %q is not among the tenants tether was given (--tenant)", name)
}
