package check

import (
	"fmt"
	"strings"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// removeCmd is the manual removevolume for an action, dry run first, as
// it works on the KubeVirt version g reports. virtctl 1.9 ignores
// --persist and always calls the VM route first, falling back to the VMI
// route only on 404 (pkg/virtctl/vm/remove_volume.go:49,73-101), so it
// cannot make a VMI-level call on a VM-owned VMI: for the VMI level on 1.9,
// or an unknown version, the command is a raw PUT to the VMI subresource.
func removeCmd(sub *subject, action drift.ActionType, g snapshot.FeatureGates) string {
	return removeCommand(sub, action, kubeVirtBefore19(g))
}

// kubeVirtBefore19 reports whether g names a KubeVirt version older than
// v1.9 (false when the version is unknown).
func kubeVirtBefore19(g snapshot.FeatureGates) bool {
	v, err := snapshot.ParseKubeVirtVersion(g.KubeVirtVersion)
	if err != nil || !g.Known {
		return false
	}
	return !(snapshot.KubeVirtVersion{Major: v.Major, Minor: v.Minor}).AtLeast(snapshot.KubeVirtVersion{Major: 1, Minor: 9})
}

// removeCommand is removeCmd for a version known to be before v1.9 or not.
func removeCommand(sub *subject, action drift.ActionType, before19 bool) string {
	ns, name, vol := sub.vmi.Namespace, sub.vmi.Name, sub.volume()
	check := fmt.Sprintf("then check that `kubectl get vmi %s -n %s -o jsonpath='{.status.volumeStatus[*].name}'` no longer lists %s", name, ns, vol)
	if action == VMIRemoveVolume && !before19 {
		path := fmt.Sprintf("/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachineinstances/%s/removevolume", ns, name)
		put := func(body string) string { return fmt.Sprintf("echo '%s' | kubectl replace --raw %s -f -", body, path) }
		return fmt.Sprintf("%s && %s; %s", put(fmt.Sprintf(`{"name":%q,"dryRun":["All"]}`, vol)), put(fmt.Sprintf(`{"name":%q}`, vol)), check)
	}
	persist := ""
	if action == VMRemoveVolume {
		name = sub.own.VM.Name
		if before19 {
			persist = " --persist"
		}
	}
	cmd := fmt.Sprintf("virtctl removevolume %s -n %s --volume-name=%s%s", name, ns, vol, persist)
	return fmt.Sprintf("%s --dry-run && %s; %s", cmd, cmd, check)
}

func tenantCmd(sub *subject, tenants []string) string {
	who := "the tenant cluster"
	if len(tenants) > 0 {
		who = "tenant " + strings.Join(tenants, ", ")
	}
	return fmt.Sprintf("in %s, check that `kubectl get volumeattachments -o wide` shows no attachment to node %s of the PV with volume handle %s",
		who, sub.vmi.Name, handles(sub.volume(), sub.claimName()))
}

// volumeRemedy is the manual procedure for a volume finding: what to wait
// for or verify first, given the block, then the command.
func volumeRemedy(in Input, sub *subject, v verdict, block drift.BlockReason) string {
	switch block {
	case VMITerminating, VMTerminating, RemovalPending, AdditionPending, DetachInProgress, DeclarativeSync, OwnerGone:
		// These name the VMI and its VM, never the volume: the VMI's other
		// volumes held for the same reason share the text.
		if t := sub.said; t != nil && t.block == block {
			return t.text
		}
		text := remedyFor(in, sub, v, block)
		sub.said = &vmiText{block: block, text: text}
		return text
	}
	return remedyFor(in, sub, v, block)
}

// vmiText is a remedy that names only a VMI and its VM, and the block it
// is the remedy of.
type vmiText struct {
	block drift.BlockReason
	text  string
}

// remedyFor is volumeRemedy's text.
func remedyFor(in Input, sub *subject, v verdict, block drift.BlockReason) string {
	ns, vmi := sub.vmi.Namespace, sub.vmi.Name
	// The command only where the text says it (building it for every
	// finding that does not was a kilobyte of garbage a finding).
	base := func() string { return removeCommand(sub, v.action, in.before19()) }
	switch block {
	case "":
		return base()
	case VMITerminating:
		return fmt.Sprintf("nothing to remove: deleting the VMI detaches its volumes; if it hangs, `kubectl describe vmi %s -n %s`", vmi, ns)
	case VMTerminating:
		return fmt.Sprintf("nothing to remove: the VM and its VMI are being deleted; if they hang, `kubectl describe vm %s -n %s`", sub.own.VM.Name, ns)
	case VMIMigrating:
		return fmt.Sprintf("wait for the migration to end (`kubectl get vmim -n %s`), re-run the audit, then: %s", ns, base())
	case VMINotRunning:
		return fmt.Sprintf("removevolume needs a Running VMI (`kubectl get vmi %s -n %s`); once it runs, re-run the audit, then: %s", vmi, ns, base())
	case RemovalPending:
		return fmt.Sprintf("a removal is already requested; watch `kubectl get vm %s -n %s -o jsonpath='{.status.volumeRequests}'` and the virt-controller logs", sub.own.VM.Name, ns)
	case AdditionPending:
		return fmt.Sprintf("KubeVirt has not applied an addvolume request for it yet; watch `kubectl get vm %s -n %s -o jsonpath='{.status.volumeRequests}'` and the virt-controller logs, and re-run the audit once the request is gone", sub.own.VM.Name, ns)
	case DetachInProgress:
		return fmt.Sprintf("a detach is under way; watch `kubectl get vmi %s -n %s -o jsonpath='{.status.volumeStatus}'` and `kubectl get pods -n %s -l kubevirt.io=hotplug-disk`, and re-run the audit when it settles", vmi, ns, ns)
	case VolumeNotReady:
		return fmt.Sprintf("the volume is still attaching; wait for phase Ready, re-run the audit, then: %s", base())
	case DeclarativeSync:
		return fmt.Sprintf("no API call can remove it (virt-controller owns this VMI's hot-plugs); find why the VM sync has not: `kubectl get vm %s -n %s -o jsonpath='{.status.conditions}'`, "+
			"`kubectl get events -n %s --field-selector involvedObject.name=%s`, the virt-controller logs, and for a volume the VMI spec no longer lists, virt-handler on node %s; restarting the VM also drops it",
			sub.own.VM.Name, ns, ns, sub.own.VM.Name, orNone(sub.vmi.Status.NodeName))
	case OwnerGone:
		return fmt.Sprintf("nothing to remove: the garbage collector deletes the VMI; if it stays, `kubectl get vmi %s -n %s -o jsonpath='{.metadata.finalizers}'` and the kube-controller-manager logs say why", vmi, ns)
	case VMIOnlyHotplug:
		return fmt.Sprintf("a VMI-only hot-plug is legitimate with the HotplugVolumes gate on: confirm with the VM's owner that the guest no longer uses it, then: %s (or restart the VM, which drops VMI-only hot-plugs)", base())
	case TenantUnreachable, TenantIncomplete, TenantNodeUnmapped:
		return fmt.Sprintf("%s; if there is none, then: %s", tenantCmd(sub, v.tenants), base())
	case VolumeNotHotpluggable:
		return vmRestartRemedy(sub, "removevolume refuses volumes not marked hotpluggable")
	case HotplugGateDisabled:
		return gateRemedy(sub, base(), "enable the HotplugVolumes feature gate in the KubeVirt CR")
	case HotplugGateUnknown:
		return gateRemedy(sub, base(), "check that `kubectl get kubevirt -A -o jsonpath='{..developerConfiguration.featureGates}'` lists HotplugVolumes")
	}
	return base()
}

func vmRestartRemedy(sub *subject, why string) string {
	ns := sub.vmi.Namespace
	if sub.own.VM == nil {
		return fmt.Sprintf("%s; the volume goes away with the VMI (`kubectl delete vmi %s -n %s`) once nothing needs it", why, sub.vmi.Name, ns)
	}
	return fmt.Sprintf("%s; remove it from the VM spec (`kubectl edit vm %s -n %s`) and restart the VM (`virtctl restart %s -n %s`)",
		why, sub.own.VM.Name, ns, sub.own.VM.Name, ns)
}

func gateRemedy(sub *subject, base, first string) string {
	alt := ""
	if sub.own.VM != nil {
		alt = fmt.Sprintf("; or restart the VM (`virtctl restart %s -n %s`), which drops VMI-only hot-plugs", sub.own.VM.Name, sub.vmi.Namespace)
	}
	return fmt.Sprintf("%s, then: %s%s", first, base, alt)
}
