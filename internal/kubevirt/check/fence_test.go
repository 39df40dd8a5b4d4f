package check

import (
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
		{name: "fenced by tether, VMI Running again, node Ready -> remove the taint",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) {
				n.Ready, n.OutOfService, n.FencedBy = corev1.ConditionTrue, true, "infra VM default/vm-a down"
			},
			want: &outcome{severity: drift.SeverityWarning, action: RemoveOutOfServiceTaint, safe: true, evidence: []string{"tether added its out-of-service taint"}}},
		{name: "fenced by tether, VMI Running, node not Ready yet -> held TenantNodeNotReadyYet",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { n.OutOfService, n.FencedBy = true, "x" },
			want: blocked(drift.SeverityInfo, RemoveOutOfServiceTaint, TenantNodeNotReadyYet)},
		{name: "fenced by tether, VMI Scheduling -> held VMINotRunning",
			vm: []f.Option{f.Running()}, vmi: []f.Option{f.Phase(kubevirtv1.Scheduling)},
			node: func(n *snapshot.TenantNode) { n.Ready, n.OutOfService, n.FencedBy = corev1.ConditionTrue, true, "x" },
			want: blocked(drift.SeverityInfo, RemoveOutOfServiceTaint, VMINotRunning)},
		{name: "an operator's taint (no record), VMI Running, Ready -> no finding (never touched)",
			vm: []f.Option{f.Running()}, vmi: []f.Option{},
			node: func(n *snapshot.TenantNode) { n.Ready, n.OutOfService = corev1.ConditionTrue, true },
			want: noFinding()},
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

func withStrategy(s kubevirtv1.VirtualMachineRunStrategy) func(*kubevirtv1.VirtualMachine) {
	return func(vm *kubevirtv1.VirtualMachine) { vm.Spec.RunStrategy = &s }
}

func startRequested(vm *kubevirtv1.VirtualMachine) {
	vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest})
}
