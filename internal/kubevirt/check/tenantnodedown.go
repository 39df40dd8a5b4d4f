package check

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// TenantNodeDown: a tenant Node whose infra VM is down for certain.
const TenantNodeDown = "TenantNodeDown"

// The fencing actions, on a tenant Node.
const (
	// TaintOutOfService adds the out-of-service taint (and tether's
	// record of it) to a tenant Node whose infra VM is down.
	TaintOutOfService drift.ActionType = "TaintOutOfService"
	// RemoveOutOfServiceTaint lifts the fence of a tenant Node whose infra
	// VM runs again, whose kubelet is Ready and of which nothing is still
	// being released: it cordons the Node (and records that tether did),
	// then removes the out-of-service taint tether put there; two writes,
	// each re-checked, and the next pass resumes after either.
	RemoveOutOfServiceTaint drift.ActionType = "RemoveOutOfServiceTaint"
	// UncordonTenantNode ends the un-fence: once the taint has been gone
	// for Policy.UnfenceSettle, it uncordons a Node tether cordoned and
	// removes tether's records of the cordon.
	UncordonTenantNode drift.ActionType = "UncordonTenantNode"
)

// The holds of TenantNodeDown.
const (
	// VMStarting: KubeVirt is starting a new VMI for the VM.
	VMStarting drift.BlockReason = "VMStarting"
	// TenantNodeStillReady: the infra VM is down but the tenant Node still
	// reports Ready; fencing waits until the node lifecycle controller
	// marks it NotReady.
	TenantNodeStillReady drift.BlockReason = "TenantNodeStillReady"
	// NotReadyTooRecent: NotReady for less than Policy.FenceAfter.
	NotReadyTooRecent drift.BlockReason = "NotReadyTooRecent"
	// InfraVMIRunning: the infra VMI exists and is not final: a hung guest
	// is not proof that the node is down.
	InfraVMIRunning drift.BlockReason = "InfraVMIRunning"
	// TenantNodeNotReadyYet: the infra VM runs again, but the tenant Node
	// tether fenced has not posted Ready yet; the taint stays until it does.
	TenantNodeNotReadyYet drift.BlockReason = "TenantNodeNotReadyYet"
	// TenantNodeReleasing: something of the tenant Node tether fenced is
	// still being released (a VolumeAttachment being deleted, a pod
	// terminating): the taint stays until it is gone (KEP-2268).
	TenantNodeReleasing drift.BlockReason = "TenantNodeReleasing"
	// TenantNodeReleaseUnknown: what of the node is still being released
	// could not be read; unknown is never "nothing".
	TenantNodeReleaseUnknown drift.BlockReason = "TenantNodeReleaseUnknown"
	// UnfenceSettling: tether removed its taint less than
	// Policy.UnfenceSettle ago; the node stays cordoned until the
	// controllers that read the taint from their caches must have seen it go.
	UnfenceSettling drift.BlockReason = "UnfenceSettling"
)

// DefaultUnfenceSettle is how long a tenant Node stays cordoned after
// tether removed its out-of-service taint. kube-controller-manager's pod
// garbage collector and attach/detach controller read the taint from one
// shared Node informer (pkg/controller/podgc/gc_controller.go:154,
// pkg/controller/volume/attachdetach/reconciler/reconciler.go:148, v1.36):
// while that cache still shows the taint, the pod GC force-deletes
// terminating pods of the node and the attach/detach controller detaches
// without the unmount check (kubernetes#142331, #141887, #141888). A
// healthy watch delivers the change in well under a second; a broken one
// is retried with a backoff of up to 30 s (client-go
// tools/cache/reflector.go:63), and the pod GC looks every 20 s
// (gc_controller.go:48). A minute covers the longest retry and a pod-GC
// period after it; while the node is cordoned no new pod is scheduled
// there to be hurt by a late cache.
const DefaultUnfenceSettle = time.Minute

// releasePoll is how often a held un-fence looks again at what of its node
// is still being released (pods and VolumeAttachments of the tenant wake
// no pass).
const releasePoll = 10 * time.Second

// DefaultFenceAfter is how long a tenant Node must have been NotReady,
// with its infra VM down, before it is fenced.
const DefaultFenceAfter = time.Minute

// FindTenantNodesDown proves that a tenant cluster's Node is down: the
// infra VM it is has no VMI, or only a final one (Succeeded or Failed), and
// KubeVirt is not starting one (the VM is deleted, halted, stopped, or its
// run strategy does not restart a finished VMI), while the Node has been
// NotReady for Policy.FenceAfter. Its action is the out-of-service taint
// in the tenant, which lets Kubernetes' own controllers delete the node's
// pods and detach its volumes at once (non-graceful node shutdown) instead
// of waiting, or force-detaching after six minutes without knowing.
//
// Decisions, in order, per reachable tenant and Node (tenant nodes of
// infra namespaces out of scope, and nodes with no Ready condition at all,
// are skipped):
//   - the Node's mapping to an infra VM: uncertain and the Node NotReady:
//     held (TenantNodeUnmapped); uncertain and Ready: no finding;
//   - the infra VMI exists and is not final: when tether fenced the Node
//     and the VMI runs and the Node is Ready again, the taint goes
//     (RemoveOutOfServiceTaint, safe); when the Node is NotReady for the
//     grace, held (InfraVMIRunning); otherwise no finding;
//   - the infra VM down: the Node already out of service: no finding;
//     the VM starting a VMI: held (VMStarting); the Node Ready: held
//     (TenantNodeStillReady); NotReady for less than the grace: held
//     (NotReadyTooRecent); otherwise TaintOutOfService, critical, safe.
func FindTenantNodesDown(in Input) []drift.Finding {
	in = in.ready()
	var out []drift.Finding
	for i := range in.Snapshot.Tenants {
		t := &in.Snapshot.Tenants[i]
		if !t.Reachable {
			continue
		}
		for j := range t.Nodes {
			if f, ok := decideTenantNode(in, t, &t.Nodes[j]); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

// CheckTenantNode re-runs the TenantNodeDown decision for one tenant Node,
// typically on a snapshot of freshly read objects; false when there is no
// finding.
func CheckTenantNode(s *snapshot.Snapshot, p Policy, now time.Time, tenant, node string) (drift.Finding, bool) {
	in := NewInput(s, p, now).ready()
	for i := range s.Tenants {
		t := &s.Tenants[i]
		if t.Name != tenant || !t.Reachable {
			continue
		}
		for j := range t.Nodes {
			if t.Nodes[j].Name == node {
				return decideTenantNode(in, t, &t.Nodes[j])
			}
		}
	}
	return drift.Finding{}, false
}

func decideTenantNode(in Input, t *snapshot.Tenant, n *snapshot.TenantNode) (drift.Finding, bool) {
	if n.Ready == "" {
		// No Ready condition: no kubelet has spoken for the node, and no
		// node lifecycle controller has either. No word is no evidence.
		return drift.Finding{}, false
	}
	notReady := n.Ready != corev1.ConditionTrue
	m := snapshot.ResolveTenantNode(n, t.Namespace, t.MatchNodesByName)
	// The scope is the infra namespace of the node's VM (where its Events
	// go), or the tenant's when the VM is unknown.
	f := drift.Finding{
		Check:     TenantNodeDown,
		Namespace: t.Namespace,
		Cluster:   t.Name,
		Object:    drift.ObjectRef{Kind: "Node", Name: n.Name, UID: n.UID},
		Severity:  drift.SeverityInfo,
		Evidence:  []string{tenantNodeFact(t, n, in.Now)},
	}
	if m.Unknown == "" {
		f.Namespace = m.VM.Namespace
	}
	f.ID = f.DerivedID()
	if m.Unknown != "" {
		if !notReady || n.OutOfService {
			return drift.Finding{}, false
		}
		f.Message = fmt.Sprintf("tenant %q node %s is NotReady, but which infra VM it is cannot be told with certainty: not fenced", t.Name, n.Name)
		f.Evidence = append(f.Evidence, m.Unknown)
		f.Action = drift.Action{Type: TaintOutOfService, BlockedBy: TenantNodeUnmapped,
			Remedy: fmt.Sprintf("give tenant %q node %s a providerID kubevirt://<vm> (or the infra-VM annotations) naming its infra VM; or, once you know the node is down, `kubectl taint node %s %s=nodeshutdown:NoExecute` in the tenant", t.Name, n.Name, n.Name, snapshot.OutOfServiceTaint)}
		return f, true
	}
	if !in.scope.namespace(m.VM.Namespace) {
		return drift.Finding{}, false
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("tenant %q node %s -> infra VM %s by %s", t.Name, n.Name, m.VM, m.How))
	vm, vmi := in.Index.VM(m.VM.Namespace, m.VM.Name), in.Index.VMI(m.VM.Namespace, m.VM.Name)
	f.Evidence = append(f.Evidence, infraVMFacts(m.VM, vm, vmi)...)
	if vmi != nil && !vmiFinal(vmi) {
		return vmiUp(in, t, n, m.VM, vmi, f)
	}
	if n.OutOfService {
		return drift.Finding{}, false
	}
	f.Severity = drift.SeverityCritical
	f.Message = fmt.Sprintf("tenant %q node %s is infra VM %s, which is down: fence it with the out-of-service taint so that its pods and volumes are released", t.Name, n.Name, m.VM)
	f.Action = drift.Action{Type: TaintOutOfService, Safe: true, Remedy: fenceRemedy(t, n, m.VM)}
	hold := func(r drift.BlockReason, fact, remedy string) {
		f.Severity = drift.SeverityInfo
		f.Block(r, fact)
		f.Action.Remedy = remedy
	}
	switch {
	case vm == nil && m.ByName:
		hold(TenantNodeUnmapped, fmt.Sprintf("tenant node %s is tied to VM %s by its name only, and no VM of that name exists: nothing says the node ever was one", n.Name, m.VM),
			fmt.Sprintf("give tenant %q node %s a providerID kubevirt://<vm> naming its infra VM; or, once you know the node is down, `kubectl taint node %s %s=nodeshutdown:NoExecute` in the tenant", t.Name, n.Name, n.Name, snapshot.OutOfServiceTaint))
	case vm != nil && (StartingUp(vm, vmi) || runsOnItsOwn(vm)):
		hold(VMStarting, fmt.Sprintf("VM %s is starting a new VMI (run strategy %s): the node comes back", m.VM, runStrategyName(vm)),
			fmt.Sprintf("nothing to do while VM %s starts: `kubectl get vmi %s -n %s -w`", m.VM, m.VM.Name, m.VM.Namespace))
	case !notReady:
		hold(TenantNodeStillReady, fmt.Sprintf("tenant node %s still reports Ready: fenced only once the node lifecycle controller marks it NotReady (a guest shut down from inside may report Ready for a while)", n.Name),
			"wait for the node to turn NotReady, then re-run; "+fenceRemedy(t, n, m.VM))
	case in.Now.Sub(n.ReadySince) < in.Policy.FenceAfter:
		hold(NotReadyTooRecent, fmt.Sprintf("tenant node %s has been NotReady for %s, less than the grace of %s", n.Name, in.Now.Sub(n.ReadySince).Round(time.Second), in.Policy.FenceAfter),
			"re-run after the grace; "+fenceRemedy(t, n, m.VM))
	}
	return f, true
}

// vmiUp decides a Node whose infra VMI exists and is not final: never
// fenced (a hung guest is not proof); un-fenced, step by step, when tether
// fenced it and it is back.
func vmiUp(in Input, t *snapshot.Tenant, n *snapshot.TenantNode, vm snapshot.InfraVM, vmi *snapshot.VMI, f drift.Finding) (drift.Finding, bool) {
	if (n.OutOfService && n.FencedBy != "") || (!n.OutOfService && n.CordonedBy != "") {
		return unfence(in, t, n, vm, vmi, f), true
	}
	notReady := n.Ready != corev1.ConditionTrue
	if !notReady || n.OutOfService || in.Now.Sub(n.ReadySince) < in.Policy.FenceAfter {
		return drift.Finding{}, false
	}
	f.Message = fmt.Sprintf("tenant %q node %s is NotReady, but its infra VMI %s is %s: a hung guest is not proof that the node is down; not fenced", t.Name, n.Name, vm, orNone(string(vmi.Status.Phase)))
	f.Action = drift.Action{Type: TaintOutOfService, BlockedBy: InfraVMIRunning,
		Remedy: fmt.Sprintf("look at the guest: `virtctl console %s -n %s`; if it is hung, stop it (`virtctl stop %s -n %s`) and tether fences the node once the VMI is final", vm.Name, vm.Namespace, vm.Name, vm.Namespace)}
	f.Block(InfraVMIRunning, "")
	return f, true
}

// unfence decides the next step of lifting tether's fence from a Node
// whose infra VMI exists again. The steps follow non-graceful node
// shutdown (KEP-2268: the taint goes only once the node's pods are gone and
// its volumes detached) and close the race of a cached taint outliving the
// real one (kubernetes#142331): while the taint is on, RemoveOutOfServiceTaint
// (cordon, then remove the taint); once it is off, UncordonTenantNode after
// Policy.UnfenceSettle. Each step waits for the VMI to run, the Node to be
// Ready and nothing of it to be still being released. The un-fence is a
// finding of its own (its own record in the controller): the fence's
// record keeps counting in the blast-radius window after it is resolved.
func unfence(in Input, t *snapshot.Tenant, n *snapshot.TenantNode, vm snapshot.InfraVM, vmi *snapshot.VMI, f drift.Finding) drift.Finding {
	f.ID = unfenceID(f)
	f.Severity = drift.SeverityWarning
	settle := in.Policy.UnfenceSettle
	if n.OutOfService {
		f.Message = fmt.Sprintf("tenant %q node %s carries the out-of-service taint tether added, and its infra VM %s runs again: lift the fence (cordon, remove the taint, uncordon %s later)", t.Name, n.Name, vm, settle)
		f.Evidence = append(f.Evidence, fmt.Sprintf("tenant node %s has annotation %s=%q: tether added its out-of-service taint", n.Name, snapshot.FencedAnnotation, n.FencedBy))
		f.Action = drift.Action{Type: RemoveOutOfServiceTaint, Safe: true, Remedy: unfenceRemedy(t, n, settle)}
	} else {
		// The uncordon is a finding of its own too: the un-fence's record,
		// acted on, cools down in the blast-radius window.
		f.ID = uncordonID(f)
		f.Message = fmt.Sprintf("tenant %q node %s: tether removed its out-of-service taint and keeps the node cordoned until the controllers' caches have seen the taint go; then it uncordons it", t.Name, n.Name)
		f.Action = drift.Action{Type: UncordonTenantNode, Safe: true,
			Remedy: fmt.Sprintf("in tenant %q, once the taint has been gone for %s: `kubectl uncordon %s` and `kubectl annotate node %s %s- %s-`", t.Name, settle, n.Name, n.Name, snapshot.CordonedAnnotation, snapshot.UnfencedAnnotation)}
	}
	f.Evidence = append(f.Evidence, cordonFact(n))
	if !n.OutOfService && !n.Unschedulable {
		// Someone uncordoned the node already: only tether's records of
		// its cordon are left to remove.
		f.Message = fmt.Sprintf("tenant %q node %s was uncordoned while tether's record of its cordon stayed: tether removes the record", t.Name, n.Name)
		return f
	}
	hold := func(r drift.BlockReason, fact string) drift.Finding {
		f.Severity = drift.SeverityInfo
		f.Block(r, fact)
		return f
	}
	switch {
	case vmi.Status.Phase != kubevirtv1.Running:
		return hold(VMINotRunning, fmt.Sprintf("VMI %s is %s, not Running yet", vm, orNone(string(vmi.Status.Phase))))
	case n.Ready != corev1.ConditionTrue:
		return hold(TenantNodeNotReadyYet, fmt.Sprintf("tenant node %s is not Ready yet: the fence stays until its kubelet posts Ready", n.Name))
	case n.Release == nil:
		why := n.ReleaseError
		if why == "" {
			why = "they were not read"
		}
		return hold(TenantNodeReleaseUnknown, fmt.Sprintf("what of tenant node %s is still being released (its pods terminating, its VolumeAttachments being deleted) is unknown: %s; the fence stays", n.Name, why))
	case !n.Release.Empty():
		return hold(TenantNodeReleasing, releaseFact(n))
	case n.OutOfService:
		return f
	case n.UnfencedAt.IsZero():
		return hold(UnfenceSettling, fmt.Sprintf("tenant node %s carries no %s time: when its taint went cannot be told, so tether does not uncordon it; uncordon it by hand once the controllers have seen the taint go", n.Name, snapshot.UnfencedAnnotation))
	case in.Now.Sub(n.UnfencedAt) < settle:
		return hold(UnfenceSettling, fmt.Sprintf("tether removed the taint %s ago (at %s), less than the %s the attach/detach and pod garbage-collection controllers' caches are given to see it go: the node stays cordoned",
			in.Now.Sub(n.UnfencedAt).Round(time.Second), n.UnfencedAt.UTC().Format(time.RFC3339), settle))
	}
	return f
}

// cordonFact states the node's cordon and whose it is.
func cordonFact(n *snapshot.TenantNode) string {
	switch {
	case n.Unschedulable && n.CordonedBy != "":
		return fmt.Sprintf("tenant node %s is cordoned by tether (annotation %s=%q)", n.Name, snapshot.CordonedAnnotation, n.CordonedBy)
	case n.Unschedulable:
		return fmt.Sprintf("tenant node %s is cordoned, not by tether: that cordon stays", n.Name)
	case n.CordonedBy != "":
		return fmt.Sprintf("tenant node %s is schedulable, and carries tether's record of a cordon (%s=%q)", n.Name, snapshot.CordonedAnnotation, n.CordonedBy)
	}
	return fmt.Sprintf("tenant node %s is schedulable: tether cordons it before the taint goes", n.Name)
}

// releaseFact says what of the node is still being released.
func releaseFact(n *snapshot.TenantNode) string {
	var parts []string
	if a := n.Release.Attachments; len(a) > 0 {
		parts = append(parts, fmt.Sprintf("%d VolumeAttachment(s) being deleted (a detach in flight): %s", len(a), firstFew(a)))
	}
	if p := n.Release.Pods; len(p) > 0 {
		parts = append(parts, fmt.Sprintf("%d pod(s) bound to it terminating: %s", len(p), firstFew(p)))
	}
	return fmt.Sprintf("tenant node %s is still being released: %s; the fence stays until they are gone (KEP-2268), or a stale cached taint could force-detach or force-delete what the node uses again", n.Name, strings.Join(parts, "; "))
}

// firstFew lists up to five names, and how many more there are.
func firstFew(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}

// unfenceRemedy is how an operator lifts tether's fence by hand.
func unfenceRemedy(t *snapshot.Tenant, n *snapshot.TenantNode, settle time.Duration) string {
	return fmt.Sprintf("in tenant %q, once no pod of node %s is terminating and none of its VolumeAttachments is being deleted: `kubectl cordon %s`, `kubectl taint node %s %s-`, `kubectl annotate node %s %s-`; `kubectl uncordon %s` %s later",
		t.Name, n.Name, n.Name, n.Name, snapshot.OutOfServiceTaint, n.Name, snapshot.FencedAnnotation, n.Name, settle)
}

// unfenceID is the id of an un-fence finding: derived like every other
// (drift.Finding.DerivedID), with "unfence" in place of the volume.
func unfenceID(f drift.Finding) string {
	return drift.FindingID(f.Check, f.Namespace, f.Object, "unfence@"+f.Cluster)
}

// uncordonID is the id of the finding that ends an un-fence: derived like
// unfenceID, with "uncordon" in place of the volume.
func uncordonID(f drift.Finding) string {
	return drift.FindingID(f.Check, f.Namespace, f.Object, "uncordon@"+f.Cluster)
}

// vmiFinal: the VMI ended (KubeVirt never restarts a final VMI; a new one
// comes as a new object).
func vmiFinal(vmi *snapshot.VMI) bool {
	return vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed
}

// runsOnItsOwn: run strategies whose behaviour after a final VMI tether
// does not decide (WaitAsReceiver, or one it does not know) count as
// starting: never fence on doubt.
func runsOnItsOwn(vm *snapshot.VM) bool {
	if vm.Spec.RunStrategy == nil || vm.DeletionTimestamp != nil {
		return false
	}
	switch *vm.Spec.RunStrategy {
	case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyOnce,
		kubevirtv1.RunStrategyHalted, kubevirtv1.RunStrategyManual:
		return false
	}
	return true
}

func runStrategyName(vm *snapshot.VM) string {
	switch {
	case vm.Spec.RunStrategy != nil:
		return string(*vm.Spec.RunStrategy)
	case vm.Spec.Running != nil && *vm.Spec.Running:
		return "running: true"
	case vm.Spec.Running != nil:
		return "running: false"
	}
	return "Halted (none set)"
}

// tenantNodeFact states the Node's Ready condition and taint.
func tenantNodeFact(t *snapshot.Tenant, n *snapshot.TenantNode, now time.Time) string {
	ready := fmt.Sprintf("Ready=%s", orNone(string(n.Ready)))
	if !n.ReadySince.IsZero() {
		ready += fmt.Sprintf(" since %s (%s ago)", n.ReadySince.UTC().Format(time.RFC3339), now.Sub(n.ReadySince).Round(time.Second))
	}
	taint := "no out-of-service taint"
	if n.OutOfService {
		taint = "the out-of-service taint"
	}
	return fmt.Sprintf("tenant %q node %s: %s, %s", t.Name, n.Name, ready, taint)
}

// infraVMFacts state the infra VM and VMI.
func infraVMFacts(ref snapshot.InfraVM, vm *snapshot.VM, vmi *snapshot.VMI) []string {
	var out []string
	switch {
	case vm == nil:
		out = append(out, fmt.Sprintf("infra VM %s does not exist", ref))
	case vm.DeletionTimestamp != nil:
		out = append(out, fmt.Sprintf("infra VM %s is being deleted", ref))
	default:
		out = append(out, fmt.Sprintf("infra VM %s: run strategy %s, status %s", ref, runStrategyName(vm), orNone(string(vm.Status.PrintableStatus))))
	}
	if vmi == nil {
		out = append(out, fmt.Sprintf("infra VMI %s does not exist", ref))
	} else {
		out = append(out, fmt.Sprintf("infra VMI %s is %s (node %s)", ref, orNone(string(vmi.Status.Phase)), orNone(vmi.Status.NodeName)))
	}
	return out
}

func fenceRemedy(t *snapshot.Tenant, n *snapshot.TenantNode, vm snapshot.InfraVM) string {
	return fmt.Sprintf("in tenant %q, once you know infra VM %s stays down: `kubectl taint node %s %s=nodeshutdown:NoExecute` (non-graceful node shutdown: the node's pods are deleted and its volumes detached at once); remove the taint when the node is back (`kubectl taint node %s %s-`)",
		t.Name, vm, n.Name, snapshot.OutOfServiceTaint, n.Name, snapshot.OutOfServiceTaint)
}
