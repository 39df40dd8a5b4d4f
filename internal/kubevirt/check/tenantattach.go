package check

import (
	"fmt"
	"strings"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// The tenant attach checks read the tenant's side first: a tenant
// VolumeAttachment of the KubeVirt CSI driver on a tenant node that is
// certainly an infra VM, compared with what that VM's VMI shows for the
// attachment's volume handle (the infra DataVolume/PVC name, which the
// driver also uses as the hot-plug volume's name). Both only report.

// tenantAttach is one tenant VolumeAttachment on a node that resolves to
// the VMI's VM.
type tenantAttach struct {
	tenant *snapshot.TenantIndex
	node   snapshot.TenantNodeRef
	snapshot.TenantAttachment
}

// The attachments each tenant attach check reads: attached ones
// (PhantomAttach) and ones whose attach failed with "already exists"
// (AttachAlreadyPresent); none being deleted.
const (
	keepAttached = iota
	keepAlreadyExists
	keeps
)

// keepFor says which check reads attachment a (keeps for none).
func keepFor(a *snapshot.TenantAttachment) int {
	switch {
	case a.Deleting:
	case a.Attached:
		return keepAttached
	case strings.Contains(strings.ToLower(a.AttachError), "already exists"):
		return keepAlreadyExists
	}
	return keeps
}

// tenantHandles are the attachments of one VMI that one check reads,
// grouped by volume handle in the order first seen.
type tenantHandles struct {
	i     int // the VMI's index in the snapshot
	order []string
	by    map[string][]tenantAttach
}

// tenantAttachments returns, for each check (keepFor), the attachments it
// reads of the snapshot's VMI i, among those of every tenant that applies
// to the VMI's namespace,
// was read whole (reachable, its CSIDriver present) and ties a node to the
// VMI's VM with certainty; a tenant with a node that may be the VM without
// certainly being it says nothing.
func tenantAttachments(in Input, i int) (out [keeps]tenantHandles) {
	vmi := &in.Snapshot.VMIs[i]
	vm := snapshot.InfraVM{Namespace: vmi.Namespace, Name: vmi.Name}
	for ti, t := range in.Index.TenantsFor(vmi.Namespace) {
		if !t.Reachable || t.DriverMissing || len(t.Ambiguous(vm)) > 0 {
			continue
		}
		for _, node := range in.vmiTenantNodes(i)[ti] {
			for _, a := range t.NodeAttachments(node) {
				k := keepFor(a)
				if k == keeps || !in.scope.volume(a.Handle) {
					continue
				}
				h := &out[k]
				if h.by == nil {
					h.by = map[string][]tenantAttach{}
				}
				if _, ok := h.by[a.Handle]; !ok {
					h.order = append(h.order, a.Handle)
				}
				h.by[a.Handle] = append(h.by[a.Handle], tenantAttach{tenant: t, node: node, TenantAttachment: *a})
			}
		}
	}
	return out
}

// tenantAttachScan returns, for each check (keepFor), the VMIs in scope
// with attachments it reads: both checks read the tenants for every VMI,
// so the first to run reads them for both, in one walk per pass.
func (in Input) tenantAttachScan() *[keeps][]tenantHandles {
	if in.memo.tenantAttach != nil {
		return in.memo.tenantAttach
	}
	scan := &[keeps][]tenantHandles{}
	for i := range in.Snapshot.VMIs {
		vmi := &in.Snapshot.VMIs[i]
		if !named(vmi) || !in.scope.namespace(vmi.Namespace) || !in.scope.labels(vmi.Labels) || len(in.Index.TenantsFor(vmi.Namespace)) == 0 {
			continue
		}
		for k, h := range tenantAttachments(in, i) {
			if len(h.order) > 0 {
				h.i = i
				scan[k] = append(scan[k], h)
			}
		}
	}
	in.memo.tenantAttach = scan
	return scan
}

// hotplugStatus returns the VMI's first volume status entry for the volume
// handle: the entry of that name (the driver hot-plugs a DataVolume under
// its own name), or one whose claim or DataVolume is that name; nil when
// there is none.
func hotplugStatus(vmi *snapshot.VMI, handle string) *snapshot.VolumeStatus {
	for i := range vmi.Status.VolumeStatus {
		if vs := &vmi.Status.VolumeStatus[i]; vs.Name == handle {
			return vs
		}
	}
	// No entry of that name: the claims are looked up only now.
	for i := range vmi.Status.VolumeStatus {
		vs := &vmi.Status.VolumeStatus[i]
		claim := snapshot.ClaimName(snapshot.VMIVolume(vmi, vs.Name))
		if claim == "" && vs.PersistentVolumeClaimInfo != nil {
			claim = vs.PersistentVolumeClaimInfo.ClaimName
		}
		if claim == handle {
			return vs
		}
	}
	return nil
}

// isReadyHotplug reports whether a status entry is a hot-plug in phase
// Ready: what the driver's ControllerPublishVolume waits for
// (kubevirt/csi-driver pkg/kubevirt/client.go:219-233).
func isReadyHotplug(vs *snapshot.VolumeStatus) bool {
	return vs != nil && vs.HotplugVolume != nil && vs.Phase == kubevirtv1.VolumeReady
}

// tenantAttachSince is when the pair could first have disagreed: the later
// of the VMI's and the attachment's creation. A new publish always comes
// with a new VolumeAttachment, and a VMI start re-attaches every hot-plug.
func tenantAttachSince(vmi *snapshot.VMI, a snapshot.TenantAttachment) time.Time {
	if a.Created.After(vmi.CreationTimestamp.Time) {
		return a.Created
	}
	return vmi.CreationTimestamp.Time
}

// FindPhantomAttachments proves that a tenant cluster believes a volume is
// attached to its node while the infra VM behind that node does not have
// it: a KubeVirt CSI VolumeAttachment with status.attached true, on a
// tenant node that resolves to the VMI's VM with certainty, whose volume
// handle has no Ready hot-plug in the VMI's status. The tenant's kubelet
// then waits for a device that never appears.
//
// Decisions, in order, per VMI in scope and volume handle:
//   - tenants: reachable, CSIDriver present, no ambiguous node for this VM;
//     attachments on the VM's nodes, attached, not being deleted, handle
//     in the prefix scope;
//   - a Ready hot-plug of the handle (by name or claim): no finding; a
//     status entry that is no hot-plug: no finding (not the driver's);
//   - held as info: the VMI terminating, not Running, migrating; the VM's
//     pending addvolume for the handle; the attachment or the VMI younger
//     than Policy.TenantAttachGrace (a mid-lifecycle phase is held as long);
//   - otherwise critical, BlockedBy HotplugMissing, never acted on.
func FindPhantomAttachments(in Input) []drift.Finding {
	in = in.ready()
	var out []drift.Finding
	eachTenantHandle(in, keepAttached, func(i int, vmi *snapshot.VMI, h string, as []tenantAttach) {
		vs := hotplugStatus(vmi, h)
		if !isReadyHotplug(vs) && (vs == nil || vs.HotplugVolume != nil) {
			out = append(out, phantomFinding(in, i, vmi, h, vs, as))
		}
	})
	return out
}

// eachTenantHandle calls fn for each VMI in scope (i is its index in the
// snapshot) and each volume handle that tenantAttachments finds for it
// for the check keep, with those attachments.
func eachTenantHandle(in Input, keep int, fn func(i int, vmi *snapshot.VMI, h string, as []tenantAttach)) {
	for _, th := range in.tenantAttachScan()[keep] {
		for _, h := range th.order {
			fn(th.i, &in.Snapshot.VMIs[th.i], h, th.by[h])
		}
	}
}

func phantomFinding(in Input, i int, vmi *snapshot.VMI, handle string, vs *snapshot.VolumeStatus, as []tenantAttach) drift.Finding {
	own := in.owner(i)
	f := drift.Finding{
		Check:     PhantomAttach,
		Namespace: vmi.Namespace,
		Object:    drift.ObjectRef{Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID},
		Volume:    handle,
		Severity:  drift.SeverityCritical,
		Message: fmt.Sprintf("tenant VolumeAttachment %s says volume %q is attached to node %s, but VMI %s/%s has no Ready hot-plug of it",
			as[0].Name, handle, as[0].Node, vmi.Namespace, vmi.Name),
		Evidence: attachFacts(in, vmi, as),
	}
	f.Evidence = append(f.Evidence, vmiSideFact(vmi, handle, vs), vmSpecFact(own, handle))
	since := tenantAttachSince(vmi, as[0].TenantAttachment)
	f.Action = drift.Action{Type: drift.None, BlockedBy: HotplugMissing, Remedy: phantomRemedy(vmi, handle, as[0])}
	hold := func(r drift.BlockReason, fact, remedy string) {
		f.Severity = drift.SeverityInfo
		f.Block(r, fact)
		f.Action.Remedy = remedy
	}
	wait := fmt.Sprintf("re-run the audit later; if it stays, then: %s", f.Action.Remedy)
	switch {
	case IsTerminating(vmi):
		hold(VMITerminating, fmt.Sprintf("VMI %s/%s is being deleted", vmi.Namespace, vmi.Name),
			fmt.Sprintf("nothing to do while the VMI is deleted: the tenant node goes with it; if it hangs, `kubectl describe vmi %s -n %s`", vmi.Name, vmi.Namespace))
	case vmi.Status.Phase != kubevirtv1.Running:
		hold(VMINotRunning, fmt.Sprintf("VMI %s/%s is in phase %s, not Running: its hot-plugs are attached once it runs", vmi.Namespace, vmi.Name, orNone(string(vmi.Status.Phase))), wait)
	case IsMigrating(vmi):
		hold(VMIMigrating, fmt.Sprintf("VMI %s/%s is migrating: its hot-plugs move with it", vmi.Namespace, vmi.Name),
			fmt.Sprintf("wait for the migration to end (`kubectl get vmim -n %s`), then %s", vmi.Namespace, wait))
	case own.VM != nil && (HasPendingAdd(own.VM, handle) || (vs != nil && HasPendingAdd(own.VM, vs.Name))):
		hold(AdditionPending, fmt.Sprintf("VM %s/%s has a pending addvolume request for %q that virt-controller has not applied yet", own.VM.Namespace, own.VM.Name, handle), wait)
	case in.Now.Sub(since) < in.Policy.TenantAttachGrace:
		hold(TenantAttachTooRecent, fmt.Sprintf("the VolumeAttachment and the VMI have existed together for %s, less than the grace of %s: a publish or a VMI start may still be attaching it",
			in.Now.Sub(since).Round(time.Second), in.Policy.TenantAttachGrace), wait)
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	return f
}

// attachFacts states each tenant attachment and how its node maps to the VM.
func attachFacts(in Input, vmi *snapshot.VMI, as []tenantAttach) []string {
	var out []string
	for _, a := range as {
		state := "status.attached=true"
		if !a.Attached {
			state = fmt.Sprintf("status.attached=false, status.attachError %q", a.AttachError)
			if !a.AttachErrorTime.IsZero() {
				state += fmt.Sprintf(" at %s", a.AttachErrorTime.UTC().Format(time.RFC3339))
			}
		}
		age := "of unknown age"
		if !a.Created.IsZero() {
			age = "created " + in.Now.Sub(a.Created).Round(time.Second).String() + " ago"
		}
		out = append(out, fmt.Sprintf("tenant %q VolumeAttachment %s (node %s, volume handle %q): %s, %s", a.tenant.Name, a.Name, a.Node, a.Handle, state, age))
		out = append(out, fmt.Sprintf("tenant %q node %s -> infra VM %s/%s by %s", a.tenant.Name, a.node.Name, vmi.Namespace, vmi.Name, a.node.How))
		if a.tenant.KubeletUses(a.Node, a.Handle) {
			out = append(out, fmt.Sprintf("tenant %q node %s lists %q in status.volumesInUse or status.volumesAttached", a.tenant.Name, a.Node, a.Handle))
		}
	}
	return out
}

// vmiSideFact says what the VMI status shows for the handle.
func vmiSideFact(vmi *snapshot.VMI, handle string, vs *snapshot.VolumeStatus) string {
	who := fmt.Sprintf("VMI %s/%s (node %s)", vmi.Namespace, vmi.Name, orNone(vmi.Status.NodeName))
	switch {
	case vs == nil:
		return fmt.Sprintf("%s status.volumeStatus has no entry for %q", who, handle)
	case vs.HotplugVolume == nil:
		return fmt.Sprintf("%s status.volumeStatus lists %q as a volume that is not hot-plugged, phase %s", who, vs.Name, orNone(string(vs.Phase)))
	}
	pod := ""
	if vs.HotplugVolume.AttachPodName != "" {
		pod = ", attachment pod " + vs.HotplugVolume.AttachPodName
	}
	return fmt.Sprintf("%s status.volumeStatus lists hot-plug %q in phase %s%s", who, vs.Name, orNone(string(vs.Phase)), pod)
}

// vmSpecFact says whether the owning VM's spec lists the volume.
func vmSpecFact(own Ownership, handle string) string {
	switch {
	case own.Owner == nil:
		return "the VMI has no VirtualMachine owner (standalone)"
	case own.VM == nil:
		return fmt.Sprintf("owner VM %s does not exist", own.Owner.Name)
	case snapshot.VMVolume(own.VM, handle) != nil:
		return fmt.Sprintf("VM %s/%s spec lists volume %q", own.VM.Namespace, own.VM.Name, handle)
	}
	return fmt.Sprintf("VM %s/%s spec does not list volume %q", own.VM.Namespace, own.VM.Name, handle)
}

// phantomRemedy makes the driver publish again, which hot-plugs the volume
// and waits for it to be Ready; the status is never written by hand.
func phantomRemedy(vmi *snapshot.VMI, handle string, a tenantAttach) string {
	return fmt.Sprintf("never patch the VolumeAttachment's status; have the driver publish again: in tenant %q, stop the pods on node %s that use the volume "+
		"(`kubectl get pods -A -o wide --field-selector spec.nodeName=%s`; scale their workloads down), wait until `kubectl get volumeattachment %s` is NotFound "+
		"(the driver's unpublish removes %q from VM %s/%s), then scale them up again: the new publish hot-plugs it and waits until "+
		"`kubectl get vmi %s -n %s -o jsonpath='{.status.volumeStatus}'` shows it Ready; see also the virt-controller logs for why the VMI lost it",
		a.tenant.Name, a.Node, a.Node, a.Name, handle, vmi.Namespace, vmi.Name, vmi.Name, vmi.Namespace)
}

// FindAttachAlreadyPresent proves that a tenant attach fails although the
// volume is attached: a KubeVirt CSI VolumeAttachment not attached, whose
// status.attachError says the volume "already exists" (virt-api's
// addvolume conflict), on a tenant node that resolves to the VMI's VM with
// certainty, while the VMI has a Ready hot-plug of the handle. The infra
// side is right; the driver should have answered success.
//
// Decisions, in order, per VMI in scope and volume handle:
//   - tenants as for PhantomAttach; attachments not attached, not being
//     deleted, with an attach error containing "already exists";
//   - no Ready hot-plug of the handle: no finding (the attach is not
//     done; that is not this check's case);
//   - held as info: the VMI terminating or migrating; the attachment or
//     the VMI younger than Policy.TenantAttachGrace;
//   - otherwise warning, BlockedBy DriverNotIdempotent, never acted on.
func FindAttachAlreadyPresent(in Input) []drift.Finding {
	in = in.ready()
	var out []drift.Finding
	eachTenantHandle(in, keepAlreadyExists, func(i int, vmi *snapshot.VMI, h string, as []tenantAttach) {
		if vs := hotplugStatus(vmi, h); isReadyHotplug(vs) {
			out = append(out, alreadyPresentFinding(in, i, vmi, h, vs, as))
		}
	})
	return out
}

func alreadyPresentFinding(in Input, i int, vmi *snapshot.VMI, handle string, vs *snapshot.VolumeStatus, as []tenantAttach) drift.Finding {
	f := drift.Finding{
		Check:     AttachAlreadyPresent,
		Namespace: vmi.Namespace,
		Object:    drift.ObjectRef{Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID},
		Volume:    handle,
		Severity:  drift.SeverityWarning,
		Message: fmt.Sprintf("volume %q is attached to VMI %s/%s (Ready), yet tenant VolumeAttachment %s fails with \"already exists\": the CSI driver should answer success",
			handle, vmi.Namespace, vmi.Name, as[0].Name),
		Evidence: attachFacts(in, vmi, as),
	}
	f.Evidence = append(f.Evidence, vmiSideFact(vmi, handle, vs), vmSpecFact(in.owner(i), handle),
		"the infra side is right (the volume is attached and Ready); the tenant side is wrong: its attach should have succeeded")
	f.Action = drift.Action{Type: drift.None, BlockedBy: DriverNotIdempotent, Remedy: alreadyPresentRemedy(vmi, handle, as[0])}
	since := tenantAttachSince(vmi, as[0].TenantAttachment)
	switch {
	case IsTerminating(vmi):
		f.Severity = drift.SeverityInfo
		f.Block(VMITerminating, fmt.Sprintf("VMI %s/%s is being deleted", vmi.Namespace, vmi.Name))
	case IsMigrating(vmi):
		f.Severity = drift.SeverityInfo
		f.Block(VMIMigrating, fmt.Sprintf("VMI %s/%s is migrating", vmi.Namespace, vmi.Name))
	case in.Now.Sub(since) < in.Policy.TenantAttachGrace:
		f.Severity = drift.SeverityInfo
		f.Block(TenantAttachTooRecent, fmt.Sprintf("the VolumeAttachment and the VMI have existed together for %s, less than the grace of %s: the attacher may still retry",
			in.Now.Sub(since).Round(time.Second), in.Policy.TenantAttachGrace))
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	return f
}

func alreadyPresentRemedy(vmi *snapshot.VMI, handle string, a tenantAttach) string {
	return fmt.Sprintf("change nothing on the infra side: VMI %s/%s has %q Ready and the guest may use it (do not remove it); the tenant %q CSI driver (%s) must answer "+
		"ControllerPublishVolume with success for a volume the VM already has: upgrade it to a release that does; the external-attacher retries "+
		"VolumeAttachment %s by itself and it turns attached once the driver succeeds (`kubectl get volumeattachment %s -o jsonpath='{.status}'` in the tenant); never patch its status",
		vmi.Namespace, vmi.Name, handle, a.tenant.Name, a.tenant.Driver, a.Name, a.Name)
}
