package check

import (
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// The oracle of this table is what Kubernetes and KubeVirt document and do:
//
//   - Non-graceful node shutdown (GA in 1.28, Kubernetes docs "Node
//     Shutdowns"): the taint node.kubernetes.io/out-of-service (effect
//     NoExecute) is to be added only when the node is really shut down or
//     powered off; then the pod GC deletes its terminating pods and the
//     attach/detach controller detaches at once.
//   - A KubeVirt VM is down when it has no VMI or a final one: a VMI in
//     Succeeded or Failed never runs again (a restart makes a new VMI). The
//     VM starts a new one for runStrategy Always (or running: true), for
//     RerunOnFailure after a failure, on a Start request, and for Once when
//     none ran; Halted and Manual do not (KubeVirt user guide, "Run
//     Strategies").
//   - A kubelet that stops posting turns its Node's Ready condition Unknown
//     after the node monitor grace period (40 s by default), with a new
//     lastTransitionTime; a guest shut down from inside may leave it Ready
//     until then (harvester #9939).

type fenceCase struct {
	name   string
	vm     []f.Option // nil: no VM
	vmEdit func(*kubevirtv1.VirtualMachine)
	vmi    []f.Option // nil: no VMI
	node   func(*snapshot.TenantNode)
	tenant []f.TenantOption
	policy func(*Policy)
	want   *outcome
}

// downNode is tenant node worker-0, infra VM vm-a, NotReady (Unknown) for
// ten minutes.
func downNode() snapshot.TenantNode {
	n := tenantNode()
	n.Ready, n.ReadySince = corev1.ConditionUnknown, now.Add(-10*time.Minute)
	return n
}

func (c fenceCase) run(t *testing.T) {
	var items []any
	var vm *kubevirtv1.VirtualMachine
	if c.vm != nil {
		vm = f.VM("vm-a", c.vm...)
		if c.vmEdit != nil {
			c.vmEdit(vm)
		}
		items = append(items, vm)
	}
	if c.vmi != nil {
		opts := c.vmi
		if vm != nil {
			opts = append([]f.Option{f.OwnedBy(vm)}, opts...)
		}
		items = append(items, f.VMI("vm-a", opts...))
	}
	n := downNode()
	if c.node != nil {
		c.node(&n)
	}
	items = append(items, f.Tenant("t1", append([]f.TenantOption{f.WithNode(n)}, c.tenant...)...))
	p := DefaultPolicy()
	if c.policy != nil {
		c.policy(&p)
	}
	p.Checks = []string{TenantNodeDown}
	fs := Run(f.Snapshot(items...), p, now)
	for _, fd := range fs {
		assertWellFormed(t, fd)
	}
	assertOutcome(t, only(fs, TenantNodeDown, "worker-0", ""), c.want)
}

func fence() *outcome {
	return &outcome{severity: drift.SeverityCritical, action: TaintOutOfService, safe: true}
}

func TestTenantNodeDown(t *testing.T) {
	halted := []f.Option{}
	succeeded := []f.Option{f.Phase(kubevirtv1.Succeeded)}
	failed := []f.Option{f.Phase(kubevirtv1.Failed)}
	cases := []fenceCase{
		{name: "VM halted, no VMI, node NotReady 10m -> fence",
			vm: halted,
			want: &outcome{severity: drift.SeverityCritical, action: TaintOutOfService, safe: true, evidence: []string{
				`tenant "t1" node worker-0: Ready=Unknown since`, `by providerID kubevirt://vm-a`, `run strategy Halted`, `infra VMI default/vm-a does not exist`}}},
		{name: "VM deleted and its VMI gone -> fence (the node never comes back)",
			want: &outcome{severity: drift.SeverityCritical, action: TaintOutOfService, safe: true, evidence: []string{`infra VM default/vm-a does not exist`}}},
		{name: "VMI Succeeded (guest shut down), VM halted -> fence", vm: halted, vmi: succeeded, want: fence()},
		{name: "VMI Failed, VM Manual -> fence", vm: halted, vmEdit: withStrategy(kubevirtv1.RunStrategyManual), vmi: failed, want: fence()},
		{name: "VMI Succeeded under RerunOnFailure -> fence (not restarted)", vm: halted, vmEdit: withStrategy(kubevirtv1.RunStrategyRerunOnFailure), vmi: succeeded, want: fence()},
		{name: "VMI Failed under RerunOnFailure -> held VMStarting", vm: halted, vmEdit: withStrategy(kubevirtv1.RunStrategyRerunOnFailure), vmi: failed,
			want: blocked(drift.SeverityInfo, TaintOutOfService, VMStarting, "is starting a new VMI")},
		{name: "VM Always, VMI Succeeded -> held VMStarting", vm: []f.Option{f.Running()}, vmi: succeeded,
			want: blocked(drift.SeverityInfo, TaintOutOfService, VMStarting)},
		{name: "VM Always, no VMI yet -> held VMStarting", vm: []f.Option{f.Running()},
			want: blocked(drift.SeverityInfo, TaintOutOfService, VMStarting)},
		{name: "a Start request pending -> held VMStarting", vm: halted, vmEdit: startRequested,
			want: blocked(drift.SeverityInfo, TaintOutOfService, VMStarting)},
		{name: "run strategy WaitAsReceiver -> held (never fence on doubt)", vm: halted, vmEdit: withStrategy(kubevirtv1.RunStrategyWaitAsReceiver),
			want: blocked(drift.SeverityInfo, TaintOutOfService, VMStarting)},
		{name: "VMI Succeeded while the node still reports Ready (harvester #9939) -> held TenantNodeStillReady",
			vm: halted, vmi: succeeded, node: func(n *snapshot.TenantNode) { n.Ready = corev1.ConditionTrue },
			want: blocked(drift.SeverityInfo, TaintOutOfService, TenantNodeStillReady, "still reports Ready")},
		{name: "NotReady for 30s, less than the grace -> held NotReadyTooRecent",
			vm: halted, node: func(n *snapshot.TenantNode) { n.ReadySince = now.Add(-30 * time.Second) },
			want: blocked(drift.SeverityInfo, TaintOutOfService, NotReadyTooRecent, "less than the grace of 1m0s")},
		{name: "a longer --fence-after holds it", vm: halted, policy: func(p *Policy) { p.FenceAfter = time.Hour },
			want: blocked(drift.SeverityInfo, TaintOutOfService, NotReadyTooRecent)},
		{name: "Ready=False (kubelet says not ready) counts as NotReady -> fence", vm: halted,
			node: func(n *snapshot.TenantNode) { n.Ready = corev1.ConditionFalse }, want: fence()},
		{name: "already out of service -> no finding", vm: halted,
			node: func(n *snapshot.TenantNode) { n.OutOfService = true }, want: noFinding()},
		{name: "VMI Running, node NotReady (a hung guest) -> held InfraVMIRunning", vm: []f.Option{f.Running()}, vmi: []f.Option{},
			want: blocked(drift.SeverityInfo, TaintOutOfService, InfraVMIRunning)},
		{name: "VMI migrating, node NotReady -> held InfraVMIRunning", vm: []f.Option{f.Running()}, vmi: []f.Option{f.Migrating()},
			want: blocked(drift.SeverityInfo, TaintOutOfService, InfraVMIRunning)},
		{name: "VMI Scheduling -> held InfraVMIRunning", vm: []f.Option{f.Running()}, vmi: []f.Option{f.Phase(kubevirtv1.Scheduling)},
			want: blocked(drift.SeverityInfo, TaintOutOfService, InfraVMIRunning)},
		{name: "VMI Running, node Ready -> no finding", vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { n.Ready = corev1.ConditionTrue }, want: noFinding()},
		{name: "a node named otherwise than its VM (providerID names it) -> fence", vm: halted,
			node: func(n *snapshot.TenantNode) { n.Name = "worker-0" }, want: fence()},
		{name: "node mapped by name only, no VM of that name -> held TenantNodeUnmapped",
			tenant: []f.TenantOption{f.ForNamespace(f.Namespace), func(t *snapshot.Tenant) { t.MatchNodesByName = true }},
			node:   func(n *snapshot.TenantNode) { n.ProviderID, n.ClusterNamespace = "", "" },
			want:   blocked(drift.SeverityInfo, TaintOutOfService, TenantNodeUnmapped, "by its name only")},
		{name: "node with no mapping, NotReady -> held TenantNodeUnmapped",
			node: func(n *snapshot.TenantNode) { n.ProviderID, n.ClusterNamespace = "", "" },
			want: blocked(drift.SeverityInfo, TaintOutOfService, TenantNodeUnmapped)},
		{name: "node with no mapping, Ready -> no finding",
			node: func(n *snapshot.TenantNode) { n.ProviderID, n.ClusterNamespace, n.Ready = "", "", corev1.ConditionTrue },
			want: noFinding()},
		{name: "no Ready condition at all (no kubelet ever posted) -> no finding", vm: halted,
			node: func(n *snapshot.TenantNode) { n.Ready = "" }, want: noFinding()},
		{name: "tenant unreachable -> no finding", vm: halted, tenant: []f.TenantOption{f.Unreachable("timeout")}, want: noFinding()},
		{name: "VM namespace out of scope -> no finding", vm: halted, policy: func(p *Policy) { p.Scope.Namespaces = []string{"other"} }, want: noFinding()},
		{name: "fenced by tether, VMI Running again, node Ready, nothing being released -> lift the fence (cordon first)",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { fencedBack(n) },
			want: &outcome{severity: drift.SeverityWarning, action: RemoveOutOfServiceTaint, safe: true, evidence: []string{"tether added its out-of-service taint", "tether cordons it before the taint goes"}}},
		{name: "fenced and cordoned by tether (a pass stopped after the cordon) -> lift the fence (the taint next)",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { fencedBack(n); n.Unschedulable, n.CordonedBy = true, "x" },
			want: &outcome{severity: drift.SeverityWarning, action: RemoveOutOfServiceTaint, safe: true, evidence: []string{"cordoned by tether"}}},
		{name: "fenced by tether, cordoned by an operator -> lift the fence (that cordon stays)",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { fencedBack(n); n.Unschedulable = true },
			want: &outcome{severity: drift.SeverityWarning, action: RemoveOutOfServiceTaint, safe: true, evidence: []string{"not by tether: that cordon stays"}}},
		{name: "fenced by tether, back, a VolumeAttachment of the node still being deleted -> held TenantNodeReleasing (KEP-2268)",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) {
				fencedBack(n)
				n.Release.Attachments = []string{"csi-0123"}
			},
			want: blocked(drift.SeverityInfo, RemoveOutOfServiceTaint, TenantNodeReleasing, "1 VolumeAttachment(s) being deleted (a detach in flight): csi-0123")},
		{name: "fenced and cordoned by tether, a pod bound to it still terminating -> held TenantNodeReleasing",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) {
				fencedBack(n)
				n.Unschedulable, n.CordonedBy = true, "x"
				n.Release.Pods = []string{"default/app"}
			},
			want: blocked(drift.SeverityInfo, RemoveOutOfServiceTaint, TenantNodeReleasing, "1 pod(s) bound to it terminating: default/app")},
		{name: "fenced by tether, back, what is being released unreadable -> held TenantNodeReleaseUnknown",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) {
				fencedBack(n)
				n.Release, n.ReleaseError = nil, "pods is forbidden"
			},
			want: blocked(drift.SeverityInfo, RemoveOutOfServiceTaint, TenantNodeReleaseUnknown, "pods is forbidden")},
		{name: "fenced by tether, VMI Running, node not Ready yet -> held TenantNodeNotReadyYet",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { fencedBack(n); n.Ready = corev1.ConditionUnknown },
			want: blocked(drift.SeverityInfo, RemoveOutOfServiceTaint, TenantNodeNotReadyYet)},
		{name: "fenced by tether, VMI Scheduling -> held VMINotRunning",
			vm: []f.Option{f.Running()}, vmi: []f.Option{f.Phase(kubevirtv1.Scheduling)},
			node: func(n *snapshot.TenantNode) { fencedBack(n) },
			want: blocked(drift.SeverityInfo, RemoveOutOfServiceTaint, VMINotRunning)},
		{name: "taint removed by tether 10s ago, still cordoned -> held UnfenceSettling",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { settling(n, 10*time.Second) },
			want: blocked(drift.SeverityInfo, UncordonTenantNode, UnfenceSettling, "removed the taint 10s ago", "less than the 1m0s")},
		{name: "taint removed by tether 2m ago, still cordoned -> uncordon",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { settling(n, 2*time.Minute) },
			want: &outcome{severity: drift.SeverityWarning, action: UncordonTenantNode, safe: true, evidence: []string{"cordoned by tether"}}},
		{name: "a longer --unfence-settle holds the uncordon",
			vm: []f.Option{f.Running()}, vmi: []f.Option{}, policy: func(p *Policy) { p.UnfenceSettle = 5 * time.Minute },
			node: func(n *snapshot.TenantNode) { settling(n, 2*time.Minute) },
			want: blocked(drift.SeverityInfo, UncordonTenantNode, UnfenceSettling)},
		{name: "taint gone 2m ago, but a detach started on the node since -> held TenantNodeReleasing (stays cordoned)",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { settling(n, 2*time.Minute); n.Release.Attachments = []string{"csi-9"} },
			want: blocked(drift.SeverityInfo, UncordonTenantNode, TenantNodeReleasing)},
		{name: "tether's cordon, the taint gone at a time nobody recorded -> held UnfenceSettling (uncordon by hand)",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { settling(n, 0); n.UnfencedAt = time.Time{} },
			want: blocked(drift.SeverityInfo, UncordonTenantNode, UnfenceSettling, "cannot be told")},
		{name: "taint removed by tether, the node NotReady again -> held TenantNodeNotReadyYet (stays cordoned)",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { settling(n, 2*time.Minute); n.Ready = corev1.ConditionFalse },
			want: blocked(drift.SeverityInfo, UncordonTenantNode, TenantNodeNotReadyYet)},
		{name: "tether's cordon record on a node someone uncordoned -> remove the record",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { settling(n, 5*time.Second); n.Unschedulable = false },
			want: &outcome{severity: drift.SeverityWarning, action: UncordonTenantNode, safe: true, evidence: []string{"schedulable, and carries tether's record"}}},
		{name: "an operator's cordon after tether's un-fence (no record) -> no finding",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { n.Ready, n.Unschedulable = corev1.ConditionTrue, true },
			want: noFinding()},
		{name: "tether's cordon, and the VM down again, NotReady -> fence again",
			vm:   halted,
			node: func(n *snapshot.TenantNode) { settling(n, time.Minute); n.Ready = corev1.ConditionUnknown },
			want: fence()},
		{name: "an operator's taint (no record), VMI Running, Ready -> no finding (never touched)",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { n.Ready, n.OutOfService = corev1.ConditionTrue, true },
			want: noFinding()},
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

// fencedBack is a node tether fenced whose kubelet is Ready again, of
// which nothing is being released.
func fencedBack(n *snapshot.TenantNode) {
	n.Ready, n.OutOfService, n.FencedBy = corev1.ConditionTrue, true, "infra VM default/vm-a down"
	n.Release = &snapshot.NodeRelease{}
}

// settling is a Ready node from which tether removed its taint ago ago,
// still cordoned by tether.
func settling(n *snapshot.TenantNode, ago time.Duration) {
	n.Ready, n.Unschedulable, n.CordonedBy, n.UnfencedAt = corev1.ConditionTrue, true, "to lift the fence", now.Add(-ago)
	n.Release = &snapshot.NodeRelease{}
}

func withStrategy(s kubevirtv1.VirtualMachineRunStrategy) func(*kubevirtv1.VirtualMachine) {
	return func(vm *kubevirtv1.VirtualMachine) { vm.Spec.RunStrategy = &s }
}

func startRequested(vm *kubevirtv1.VirtualMachine) {
	vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest})
}

// TestUnfence_neverLiftsTooEarly draws tenant nodes in every state of
// tether's fence and un-fence (taint, records, cordon, readiness, what is
// still being released, the VMI's phase) and holds each un-fence action the
// check calls safe to unsafeUnfence, the rules of KEP-2268 and of
// kubernetes#142331; and it counts the safe ones, so that the rules are not
// met by never acting.
func TestUnfence_neverLiftsTooEarly(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 1))
	pick := func(n int) int { return r.IntN(n) }
	safe := map[drift.ActionType]int{}
	for i := 0; i < 20000; i++ {
		n := tenantNode()
		n.Ready = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionTrue, corev1.ConditionUnknown, corev1.ConditionFalse}[pick(4)]
		n.ReadySince = now.Add(-time.Duration(pick(600)) * time.Second)
		n.OutOfService = pick(3) != 0
		if pick(4) != 0 {
			n.FencedBy = "infra VM default/vm-a down"
		}
		n.Unschedulable = pick(2) == 0
		if pick(2) == 0 {
			n.CordonedBy = "to lift the fence"
		}
		if pick(3) != 0 {
			n.UnfencedAt = now.Add(-time.Duration(pick(180)) * time.Second)
		}
		switch pick(5) {
		case 0:
			n.ReleaseError = "forbidden"
		case 1:
			n.Release = &snapshot.NodeRelease{Attachments: []string{"csi-1"}}
		case 2:
			n.Release = &snapshot.NodeRelease{Pods: []string{"default/app"}}
		default:
			n.Release = &snapshot.NodeRelease{}
		}
		items := []any{f.VM("vm-a", f.Running())}
		phases := []kubevirtv1.VirtualMachineInstancePhase{kubevirtv1.Running, kubevirtv1.Running, kubevirtv1.Scheduling, kubevirtv1.Succeeded, ""}
		var vmi *kubevirtv1.VirtualMachineInstance
		if ph := phases[pick(len(phases))]; ph != "" {
			vmi = f.VMI("vm-a", f.OwnedBy(items[0].(*kubevirtv1.VirtualMachine)), f.Phase(ph))
			items = append(items, vmi)
		}
		items = append(items, f.Tenant("t1", f.WithNode(n)))
		p := DefaultPolicy()
		p.Checks = []string{TenantNodeDown}
		s := f.Snapshot(items...)
		for _, fd := range Run(s, p, now) {
			assertWellFormed(t, fd)
			if !fd.Action.Safe || (fd.Action.Type != RemoveOutOfServiceTaint && fd.Action.Type != UncordonTenantNode) {
				continue
			}
			safe[fd.Action.Type]++
			if why := unsafeUnfence(&s.Tenants[0].Nodes[0], findVMI(s, "default", "vm-a"), p, now, fd.Action.Type); why != "" {
				t.Fatalf("world %d: %s is safe, but %s\nnode %+v\nrelease %+v\nfinding %+v", i, fd.Action.Type, why, n, n.Release, fd)
			}
		}
	}
	if safe[RemoveOutOfServiceTaint] < 100 || safe[UncordonTenantNode] < 100 {
		t.Fatalf("too few safe un-fence actions to prove anything: %v", safe)
	}
	t.Logf("safe un-fence actions checked: %v", safe)
}
