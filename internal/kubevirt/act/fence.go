package act

import (
	"context"
	"fmt"
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
// Cluster): add the out-of-service taint and tether's record of it, or
// remove both. Live re-read (the tenant, then the infra VM and VMI by
// GET) and re-check; the Node read in the tenant right after, its UID
// compared; an update of that Node preconditioned on the resourceVersion
// read, dry run first; between the dry run and the write the infra VM and
// VMI are read again and must not have moved.
func (e *Executor) fence(f drift.Finding, _ Evidence) action {
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
		changed, refusal := fenced(f, node.DeepCopy(), infraVMOf(s, f.Object.Name), e.now())
		if refusal != nil {
			return nil, refusal
		}
		do := func(ctx context.Context, dryRun bool) *drift.Result {
			target := changed.DeepCopy() // carries the resourceVersion read
			return refused(dryRun, fmt.Sprintf("update of tenant %q node %s", f.Cluster, node.Name), tc.Update(ctx, target, withDryRun[client.UpdateOption](dryRun)...))
		}
		done := func(context.Context) drift.Result {
			what := fmt.Sprintf("tainted tenant %q node %s %s=%s:%s", f.Cluster, node.Name, OutOfServiceTaint.Key, OutOfServiceTaint.Value, OutOfServiceTaint.Effect)
			if f.Action.Type == check.RemoveOutOfServiceTaint {
				what = fmt.Sprintf("removed the out-of-service taint tether had put on tenant %q node %s", f.Cluster, node.Name)
			}
			return drift.Result{Outcome: drift.Applied, Message: what}
		}
		return &write{do: do, fingerprint: resourceVersions, done: done}, nil
	}
	return a
}

// fenced is node with the finding's change made: the taint and the record
// added, or both removed (only when the record says tether added it).
func fenced(f drift.Finding, node *corev1.Node, vm snapshot.InfraVM, now time.Time) (*corev1.Node, *drift.Result) {
	has := false
	var kept []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key == snapshot.OutOfServiceTaint {
			has = true
			continue
		}
		kept = append(kept, t)
	}
	switch f.Action.Type {
	case check.TaintOutOfService:
		if has {
			return nil, &drift.Result{Outcome: drift.Refused, Cause: drift.AlreadyGone, Message: fmt.Sprintf("tenant %q node %s already carries the out-of-service taint: nothing to do", f.Cluster, node.Name)}
		}
		node.Spec.Taints = append(node.Spec.Taints, OutOfServiceTaint)
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[snapshot.FencedAnnotation] = fmt.Sprintf("infra VM %s down, fenced at %s", vm, now.UTC().Format(time.RFC3339))
	case check.RemoveOutOfServiceTaint:
		if node.Annotations[snapshot.FencedAnnotation] == "" {
			return nil, &drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf("tenant %q node %s has no %s record: its out-of-service taint is not tether's, and stays", f.Cluster, node.Name, snapshot.FencedAnnotation)}
		}
		node.Spec.Taints = kept
		delete(node.Annotations, snapshot.FencedAnnotation)
	default:
		return nil, &drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf("no action to take (%s)", f.Action.Type)}
	}
	return node, nil
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
