package check

import (
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// The oracle of these tables is what the KubeVirt CSI driver and KubeVirt
// do, read from their sources (kubevirt/csi-driver at 27b52aa2, kubevirt
// v1.9.0):
//
//   - ControllerPublishVolume answers success at once when the VM spec
//     lists the volume (csi-driver pkg/service/controller.go:418-426, by
//     EnsureVolumeAvailableVM, pkg/kubevirt/client.go:637-656, which reads
//     the VM spec only); otherwise it adds the volume to the VM and waits
//     up to 2 minutes for the VMI status to show it Ready
//     (controller.go:448-469; client.go:219-233). So status.attached true
//     says nothing about the VMI status: a VMI that lost the hot-plug (a
//     restart, a removal behind the driver's back) leaves a phantom, and
//     the node plugin then cannot find the disk by its serial
//     (pkg/service/node.go:175-178).
//   - The driver names the hot-plug after the DataVolume (the volume
//     handle): AddVolumeOptions{Name: dvName} (controller.go:431-445).
//   - virt-api refuses an addvolume whose name or source the VM template
//     already lists with 409 Conflict "Unable to add volume [%s] because
//     volume with that name already exists" or "Unable to add volume source
//     [%s] because it already exists" (pkg/virt-api/rest/volumes.go:190-192,
//     292-301): a driver that calls it for a volume the VM has gets that
//     error although the volume is attached (harvester #10889).
//   - A pending VM addvolume request is recorded in the VM status and
//     applied by virt-controller later (volumes.go:410-424).
//   - The external-attacher records the CSI node ID it attached to in the
//     csi.alpha.kubernetes.io/node-id annotation, and the driver's node ID
//     is "<namespace>/<vm>" (controller.go:374-375).

// tenantNode is tenant node worker-0, the infra VM vm-a in namespace
// default, as Cluster API's KubeVirt provider leaves it.
func tenantNode() snapshot.TenantNode {
	return snapshot.TenantNode{Name: "worker-0", ProviderID: snapshot.ProviderIDPrefix + "vm-a", ClusterNamespace: f.Namespace}
}

// tenantVA is the tenant's VolumeAttachment of handle h on worker-0.
func tenantVA(h string, opts ...f.Option) f.TenantOption {
	return f.Attaches("worker-0", h, append([]f.Option{f.AttachedToID(f.Namespace + "/vm-a")}, opts...)...)
}

// alreadyExists is the error harvester #10889 reports, as virt-api words
// it (volumes.go:298) behind the driver's prefix.
func alreadyExists(h string) string {
	return `rpc error: code = Internal desc = Failed to add volume to node vm-a: Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm-a": ` +
		"Unable to add volume [" + h + "] because volume with that name already exists"
}

type tenantAttachCase struct {
	name string
	// vm and vmi options; the VMI is vm-a, owned by VM vm-a.
	vm, vmi []f.Option
	edit    func(*kubevirtv1.VirtualMachineInstance)
	tenant  []f.TenantOption
	policy  func(*Policy)
	// extra are more snapshot items (e.g. the feature gates).
	extra []any
	check string
	want  *outcome
}

func (c tenantAttachCase) run(t *testing.T) {
	vm := f.VM("vm-a", append([]f.Option{f.Running()}, c.vm...)...)
	vmi := f.VMI("vm-a", append([]f.Option{f.OwnedBy(vm)}, c.vmi...)...)
	if c.edit != nil {
		c.edit(vmi)
	}
	tn := f.Tenant("t1", append([]f.TenantOption{f.WithNode(tenantNode())}, c.tenant...)...)
	p := DefaultPolicy()
	if c.policy != nil {
		c.policy(&p)
	}
	p.Checks = []string{c.check}
	fs := Run(f.Snapshot(append([]any{vm, vmi, tn}, c.extra...)...), p, now)
	assertOutcome(t, only(fs, c.check, "vm-a", ""), c.want)
}

func report(sev drift.Severity, r drift.BlockReason, evidence ...string) *outcome {
	return blocked(sev, drift.None, r, evidence...)
}

func TestPhantomAttach(t *testing.T) {
	recent := now.Add(-time.Minute)
	cases := []tenantAttachCase{
		{name: "attached VA, VMI lists no entry -> critical HotplugMissing",
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want: report(drift.SeverityCritical, HotplugMissing, `VolumeAttachment csi-`, `status.attached=true`,
				`VMI default/vm-a (node node-1) status.volumeStatus has no entry for "dv-1"`, `VM default/vm-a spec does not list volume "dv-1"`,
				`node worker-0 -> infra VM default/vm-a by providerID kubevirt://vm-a`)},
		{name: "attached VA, VM spec lists it but the VMI lost it -> critical (publish's fast path reads the VM spec only)",
			vm:     []f.Option{f.WithVolume("dv-1", f.DataVolume("dv-1"), f.Hotpluggable())},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want:   report(drift.SeverityCritical, HotplugMissing, `VM default/vm-a spec lists volume "dv-1"`)},
		{name: "attached VA, hot-plug Ready -> no finding",
			vmi:    []f.Option{f.WithHotplug("dv-1")},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want:   noFinding()},
		{name: "attached VA, hot-plug Ready under another name with the handle as claim -> no finding",
			vmi:    []f.Option{f.WithHotplug("disk-1", f.Claim("dv-1"))},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want:   noFinding()},
		{name: "attached VA, a non-hot-plug volume of that name -> no finding (not the driver's)",
			vmi: []f.Option{f.WithVolume("dv-1", f.DataVolume("dv-1"))},
			edit: func(vmi *kubevirtv1.VirtualMachineInstance) {
				vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: "dv-1", Phase: kubevirtv1.VolumeReady})
			},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want:   noFinding()},
		{name: "attached VA, hot-plug stuck in AttachedToNode past the grace -> critical with the phase",
			vmi:    []f.Option{f.WithHotplug("dv-1", f.VolumePhase(kubevirtv1.HotplugVolumeAttachedToNode))},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want:   report(drift.SeverityCritical, HotplugMissing, `lists hot-plug "dv-1" in phase AttachedToNode, attachment pod hp-volume-vm-a`)},
		{name: "attached VA younger than the grace -> info TenantAttachTooRecent",
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached(), f.CreatedAt(recent))},
			want:   report(drift.SeverityInfo, TenantAttachTooRecent, "less than the grace of 5m0s")},
		{name: "VMI restarted within the grace, hot-plug MountedToPod -> info TenantAttachTooRecent",
			vmi:    []f.Option{f.CreatedAt(recent), f.WithHotplug("dv-1", f.VolumePhase(kubevirtv1.HotplugVolumeMounted))},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want:   report(drift.SeverityInfo, TenantAttachTooRecent, "in phase MountedToPod")},
		{name: "a longer grace holds an older attachment -> info",
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			policy: func(p *Policy) { p.TenantAttachGrace = 2 * time.Hour },
			want:   report(drift.SeverityInfo, TenantAttachTooRecent)},
		{name: "VMI migrating -> info VMIMigrating",
			vmi:    []f.Option{f.Migrating()},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want:   report(drift.SeverityInfo, VMIMigrating)},
		{name: "VMI not running -> info VMINotRunning",
			vmi:    []f.Option{f.Phase(kubevirtv1.Scheduling)},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want:   report(drift.SeverityInfo, VMINotRunning)},
		{name: "VMI terminating -> info VMITerminating",
			vmi:    []f.Option{f.Terminating(now.Add(-time.Minute))},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want:   report(drift.SeverityInfo, VMITerminating)},
		{name: "VM has a pending addvolume for the handle -> info AdditionPending",
			vm:     []f.Option{f.PendingAdd("dv-1", f.DataVolume("dv-1"))},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want:   report(drift.SeverityInfo, AdditionPending)},
		{name: "VA not attached -> no finding",
			tenant: []f.TenantOption{tenantVA("dv-1")},
			want:   noFinding()},
		{name: "VA being deleted -> no finding (the tenant is detaching)",
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached(), f.Terminating(now))},
			want:   noFinding()},
		{name: "VA of another attacher -> no finding",
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached(), f.Attacher("other.csi"))},
			want:   noFinding()},
		{name: "VA published to another node ID -> no finding (the node no longer maps to the VM)",
			tenant: []f.TenantOption{f.Attaches("worker-0", "dv-1", f.Attached(), f.AttachedToID(f.Namespace+"/vm-b"))},
			want:   noFinding()},
		{name: "tenant unreachable -> no finding",
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached()), f.Unreachable("timeout")},
			want:   noFinding()},
		{name: "tenant without its CSIDriver -> no finding",
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached()), func(t *snapshot.Tenant) { t.DriverMissing = true }},
			want:   noFinding()},
		{name: "a tenant node that may be the VM without certainty -> no finding",
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached()), f.ForNamespace(f.Namespace),
				f.WithNode(snapshot.TenantNode{Name: "worker-9", ProviderID: snapshot.ProviderIDPrefix + "vm-a", ClusterNamespace: "elsewhere"})},
			want: noFinding()},
		{name: "VA on a node of another VM -> no finding",
			tenant: []f.TenantOption{f.NodesIn(f.Namespace, "vm-b"), f.Attaches("vm-b", "dv-1", f.Attached())},
			want:   noFinding()},
		{name: "handle outside the volume prefix -> no finding",
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			policy: func(p *Policy) { p.Scope.VolumePrefix = "pvc-" },
			want:   noFinding()},
		{name: "the kubelet lists the handle too -> critical, with the kubelet's word",
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached()), func(t *snapshot.Tenant) { t.Nodes[0].InUse = []string{"dv-1"} }},
			want:   report(drift.SeverityCritical, HotplugMissing, `node worker-0 lists "dv-1" in status.volumesInUse or status.volumesAttached`)},
	}
	for _, c := range cases {
		c.check = PhantomAttach
		t.Run(c.name, c.run)
	}
}

func TestAttachAlreadyPresent(t *testing.T) {
	cases := []tenantAttachCase{
		{name: "attach error already exists, hot-plug Ready -> warning DriverNotIdempotent",
			vm:     []f.Option{f.WithVolume("dv-1", f.DataVolume("dv-1"), f.Hotpluggable())},
			vmi:    []f.Option{f.WithHotplug("dv-1")},
			tenant: []f.TenantOption{tenantVA("dv-1", f.AttachError(alreadyExists("dv-1"), now.Add(-time.Minute)))},
			want: report(drift.SeverityWarning, DriverNotIdempotent, `status.attached=false`, `because volume with that name already exists`,
				`lists hot-plug "dv-1" in phase Ready`, `VM default/vm-a spec lists volume "dv-1"`, "the infra side is right")},
		{name: "attach error names the volume source -> warning",
			vmi:    []f.Option{f.WithHotplug("dv-1")},
			tenant: []f.TenantOption{tenantVA("dv-1", f.AttachError("Unable to add volume source [dv-1] because it already exists", now))},
			want:   report(drift.SeverityWarning, DriverNotIdempotent)},
		{name: "attach error already exists, hot-plug not Ready -> no finding (the attach is not done)",
			vmi:    []f.Option{f.WithHotplug("dv-1", f.VolumePhase(kubevirtv1.VolumePending))},
			tenant: []f.TenantOption{tenantVA("dv-1", f.AttachError(alreadyExists("dv-1"), now))},
			want:   noFinding()},
		{name: "attach error already exists, VMI lacks it -> no finding",
			tenant: []f.TenantOption{tenantVA("dv-1", f.AttachError(alreadyExists("dv-1"), now))},
			want:   noFinding()},
		{name: "another attach error, hot-plug Ready -> no finding",
			vmi:    []f.Option{f.WithHotplug("dv-1")},
			tenant: []f.TenantOption{tenantVA("dv-1", f.AttachError("timed out waiting for the condition", now))},
			want:   noFinding()},
		{name: "attached, hot-plug Ready -> no finding",
			vmi:    []f.Option{f.WithHotplug("dv-1")},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Attached())},
			want:   noFinding()},
		{name: "VA younger than the grace -> info TenantAttachTooRecent",
			vmi:    []f.Option{f.WithHotplug("dv-1")},
			tenant: []f.TenantOption{tenantVA("dv-1", f.CreatedAt(now.Add(-time.Minute)), f.AttachError(alreadyExists("dv-1"), now))},
			want:   report(drift.SeverityInfo, TenantAttachTooRecent)},
		{name: "VMI migrating -> info VMIMigrating",
			vmi:    []f.Option{f.WithHotplug("dv-1"), f.Migrating()},
			tenant: []f.TenantOption{tenantVA("dv-1", f.AttachError(alreadyExists("dv-1"), now))},
			want:   report(drift.SeverityInfo, VMIMigrating)},
		{name: "VA being deleted -> no finding",
			vmi:    []f.Option{f.WithHotplug("dv-1")},
			tenant: []f.TenantOption{tenantVA("dv-1", f.Terminating(now), f.AttachError(alreadyExists("dv-1"), now))},
			want:   noFinding()},
		{name: "tenant unreachable -> no finding",
			vmi:    []f.Option{f.WithHotplug("dv-1")},
			tenant: []f.TenantOption{tenantVA("dv-1", f.AttachError(alreadyExists("dv-1"), now)), f.Unreachable("timeout")},
			want:   noFinding()},
	}
	for _, c := range cases {
		c.check = AttachAlreadyPresent
		t.Run(c.name, c.run)
	}
}

// The remedies never write a VolumeAttachment's status, and say what to run.
func TestTenantAttachRemedies(t *testing.T) {
	vm := f.VM("vm-a", f.Running())
	s := f.Snapshot(f.VM("vm-a", f.Running()), f.VMI("vm-a", f.OwnedBy(vm), f.WithHotplug("dv-2")),
		f.Tenant("t1", f.WithNode(tenantNode()), tenantVA("dv-1", f.Attached()), tenantVA("dv-2", f.AttachError(alreadyExists("dv-2"), now))))
	fs := Run(s, DefaultPolicy(), now)
	seen := map[string]bool{}
	for _, fd := range fs {
		if fd.Check != PhantomAttach && fd.Check != AttachAlreadyPresent {
			continue
		}
		seen[fd.Check] = true
		r := fd.Action.Remedy
		if !strings.Contains(r, "never patch") || strings.Contains(r, "kubectl patch") || !strings.Contains(r, "kubectl get volumeattachment") {
			t.Errorf("%s remedy: %q", fd.Check, r)
		}
		if fd.Action.Type != drift.None || fd.Action.Safe {
			t.Errorf("%s must only report, got %+v", fd.Check, fd.Action)
		}
	}
	if !seen[PhantomAttach] || !seen[AttachAlreadyPresent] {
		t.Fatalf("want both checks to find, got %v", fs)
	}
}

// tenantAttachWorld is a fixture world in which both tenant attach checks
// find something: VMI vm-a has dv-2 Ready; its tenant attaches dv-1 (a
// phantom) and fails to attach dv-2 ("already exists").
func tenantAttachWorld() []any {
	vm := f.VM("vm-a", f.Running(), f.WithVolume("dv-3", f.DataVolume("dv-3"), f.Hotpluggable()))
	return []any{vm, f.VMI("vm-a", f.OwnedBy(vm), f.WithHotplug("dv-2")),
		f.Tenant("t1", f.WithNode(tenantNode()), tenantVA("dv-1", f.Attached()), tenantVA("dv-2", f.AttachError(alreadyExists("dv-2"), now)), f.Volumes("dv-3"))}
}
