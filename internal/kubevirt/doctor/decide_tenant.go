package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

const fixTenantReader = "bind the tenant's identity to config/rbac/tenant-reader.yaml (`tether manifests tenant` prints it with its binding), and check the kubeconfig's server and credentials"

const fixTenantFencer = "in the tenant, bind the opt-in config/rbac/tenant-fencer.yaml to the identity the controller uses there: `tether manifests tenant --service-account NAMESPACE/NAME --fence | kubectl --context TENANT apply -f -`; or let TenantNodeDown only report (checks.TenantNodeDown.dryRun: true)"

// tenantLines: one tenant's access, node mapping, CSIDriver, route and
// fencing rights; fences says the controller's configuration fences.
func tenantLines(t Tenant, h snapshot.HotplugGates, fences bool) []drift.Line {
	r := t.Read
	subj := "tenant " + r.Name
	if !r.Reachable {
		st, why := drift.StatusFail, "could not be read: "+r.Error
		if strings.Contains(strings.ToLower(r.Error), "forbidden") {
			why = "reachable, but its identity lacks read rights: " + r.Error
		}
		return []drift.Line{line(CheckTenantAccess, subj, st, why+"; its evidence counts as unknown, so hot-plugs it might want are held", fixTenantReader, srcNodes)}
	}
	out := []drift.Line{line(CheckTenantAccess, subj, drift.StatusOK,
		"read its Nodes, CSINodes, VolumeAttachments, PersistentVolumes and CSIDriver "+r.CSIDriver(), "", srcNodes)}
	out = append(out, nodesLine(r), driverLine(r))
	if !r.DriverMissing {
		out = append(out, driverRouteLine(t, h))
	}
	if t.Fence != nil {
		out = append(out, fenceLine(subj, *t.Fence, fences))
	}
	return out
}

// fenceLine: whether the identity of the tenant's kubeconfig holds what
// TenantNodeDown needs to fence there, against whether the controller's
// configuration fences. Lacking the opt-in role is the default and fine
// where nothing fences; where the configuration fences, every fence by
// that identity would fail (the controller also refuses to start so).
func fenceLine(subj string, fa FenceAccess, fences bool) drift.Line {
	const role = "tether-tenant-fencer's rights (config/rbac/tenant-fencer.yaml)"
	switch {
	case fa.Err != "":
		return line(CheckTenantFence, subj, drift.StatusWarn, "could not ask whether the identity of its kubeconfig may fence: "+fa.Err,
			"check the kubeconfig's server and credentials", srcFence)
	case len(fa.Missing) == 0:
		why := "the identity of its kubeconfig holds " + role + ": TenantNodeDown can taint a down Node out-of-service and lift the taint"
		if !fences {
			why += "; the controller's configuration, where read, does not fence"
		}
		return line(CheckTenantFence, subj, drift.StatusOK, why, "", srcFence)
	case fences:
		return line(CheckTenantFence, subj, drift.StatusWarn,
			"the controller's configuration lets TenantNodeDown fence, but the identity of its kubeconfig lacks "+role+": "+strings.Join(fa.Missing, ", ")+
				"; where the controller uses this identity, it refuses to start",
			fixTenantFencer, srcFence)
	default:
		return line(CheckTenantFence, subj, drift.StatusOK,
			"the identity of its kubeconfig holds no fencer rights (lacks "+strings.Join(fa.Missing, ", ")+"): TenantNodeDown only reports its down Nodes; fencing is opt-in", "", srcFence)
	}
}

func nodesLine(r snapshot.Tenant) drift.Line {
	subj := "tenant " + r.Name
	if len(r.Nodes) == 0 {
		return line(CheckTenantNodes, subj, drift.StatusWarn, "lists no Nodes: none can be tied to an infra VM, so the tenant proves nothing about any VMI",
			"check that the kubeconfig names the tenant cluster", srcNodes)
	}
	unmapped := r.UnmappedNodes()
	if len(unmapped) == 0 {
		return line(CheckTenantNodes, subj, drift.StatusOK, fmt.Sprintf("all %d Nodes are tied to an infra VM", len(r.Nodes)), "", srcNodes)
	}
	return line(CheckTenantNodes, subj, drift.StatusWarn,
		fmt.Sprintf("%d of %d Nodes cannot be tied to one infra VM, so the tenant's evidence about those VMs is unknown: %s", len(unmapped), len(r.Nodes), strings.Join(unmapped, "; ")),
		"give those Nodes providerID kubevirt://<vm> (Cluster API's KubeVirt provider does), or name the tenant's infra namespace in --tenant NAME=KUBECONFIG:NAMESPACE; --match-tenant-nodes-by-name opts into matching by name", srcNodes)
}

func driverLine(r snapshot.Tenant) drift.Line {
	subj := "tenant " + r.Name
	if r.DriverMissing {
		return line(CheckTenantDriver, subj, drift.StatusFail, "has no CSIDriver "+r.CSIDriver()+": its evidence is unknown",
			"install the KubeVirt CSI driver in the tenant, or name its driver with --tenant-driver", srcCSI)
	}
	return line(CheckTenantDriver, subj, drift.StatusOK, "CSIDriver "+r.CSIDriver()+" is present", "", srcCSI)
}

// driverRouteLine: which route the tenant's CSI driver hot-plugs through,
// from the infra cluster's hot-plugs of its volumes, against the gates.
func driverRouteLine(t Tenant, h snapshot.HotplugGates) drift.Line {
	subj := "tenant " + t.Read.Name
	version := "driver version unknown"
	switch {
	case t.DriverVersion != "" && t.VersionNote != "":
		version = "driver " + t.DriverVersion + " (" + t.VersionNote + ")"
	case t.DriverVersion != "":
		version = "driver " + t.DriverVersion
	case t.VersionNote != "":
		version += " (" + t.VersionNote + ")"
	}
	e := t.Route
	switch {
	case e.VMIOnly > 0 && h.Known && !h.VMIRoute(true):
		return line(CheckTenantRoute, subj, drift.StatusFail,
			fmt.Sprintf("%s; %d of its volumes are hot-plugged into VM-owned VMIs but missing from the VM spec (e.g. %s): the driver uses the VMI-level route, which virt-api now refuses for VM-owned VMIs (400 \"owned by a VM\")", version, e.VMIOnly, e.Example),
			"upgrade the tenant's KubeVirt CSI driver to one that hot-plugs through the VM (csi-driver#130); until then list HotplugVolumes in the KubeVirt CR", srcCSI)
	case e.VMIOnly > 0:
		return line(CheckTenantRoute, subj, drift.StatusWarn,
			fmt.Sprintf("%s; %d of its volumes are hot-plugged into VM-owned VMIs but missing from the VM spec (e.g. %s): the driver uses the VMI-level route, which needs the deprecated HotplugVolumes gate and breaks when HCO or KubeVirt drops it", version, e.VMIOnly, e.Example),
			"upgrade the tenant's KubeVirt CSI driver to one that hot-plugs through the VM (csi-driver#130) before the next KubeVirt/HCO upgrade", srcCSI)
	case e.InVMSpec > 0:
		return line(CheckTenantRoute, subj, drift.StatusOK,
			fmt.Sprintf("%s; its %d hot-plugged volumes are in the VM spec: the driver uses the VM-level route", version, e.InVMSpec), "", srcCSI)
	}
	return line(CheckTenantRoute, subj, drift.StatusWarn,
		version+"; none of its volumes is hot-plugged in scope, so the route its driver uses cannot be seen",
		"check again while a tenant pod uses a volume of the driver, or check that the driver includes csi-driver#130", srcCSI)
}

// forceDetachLine: the attach/detach controller's 6-minute force detach.
func forceDetachLine(k Kube) drift.Line {
	const subj = "attach/detach controller"
	if !k.ControllerManagerFound {
		return line(CheckForceDetach, subj, drift.StatusWarn, "whether it force-detaches after 6 minutes from an unhealthy node could not be read: "+k.ControllerManagerNote,
			"check kube-controller-manager's flags for --disable-force-detach-on-timeout=true (Kubernetes 1.30+)", srcForce)
	}
	if v, ok := flagValue(k.ControllerManagerArgs, "disable-force-detach-on-timeout"); ok && (v == "" || v == "true") {
		return line(CheckForceDetach, subj, drift.StatusOK, "kube-controller-manager runs with --disable-force-detach-on-timeout: volumes leave a dead node only once it is fenced (out-of-service taint)", "", srcForce)
	}
	return line(CheckForceDetach, subj, drift.StatusWarn,
		"kube-controller-manager force-detaches a volume 6 minutes (maxWaitForUnmountDuration) after its pod went away from an unhealthy node, mounted or not: a known corruption risk",
		"set --disable-force-detach-on-timeout=true on kube-controller-manager and fence dead nodes with the out-of-service taint", srcForce)
}

// flagValue finds --name or --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if a == "--"+name {
			return "", true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// outOfServiceLine: where the out-of-service taint is in use.
func outOfServiceLine(k Kube) drift.Line {
	const subj = "out-of-service taint"
	if !k.NodesRead {
		return line(CheckOutOfService, subj, drift.StatusWarn, "Nodes could not be listed: "+k.NodesError, "grant list on nodes (config/rbac)", srcOOS)
	}
	var live, fenced []string
	for _, n := range k.OutOfService {
		if n.Ready {
			live = append(live, n.Name)
		} else {
			fenced = append(fenced, n.Name)
		}
	}
	if len(live) > 0 {
		return line(CheckOutOfService, subj, drift.StatusWarn,
			"Ready nodes carry node.kubernetes.io/out-of-service: "+strings.Join(live, ", ")+"; Kubernetes force-detaches their volumes and deletes their pods while they run",
			"remove the taint from nodes that are back (kubectl taint nodes NODE node.kubernetes.io/out-of-service-)", srcOOS)
	}
	if len(fenced) > 0 {
		return line(CheckOutOfService, subj, drift.StatusOK, "in use on NotReady nodes "+strings.Join(fenced, ", ")+": their volumes may be detached (StaleVolumeAttachment's fencing evidence)", "", srcOOS)
	}
	return line(CheckOutOfService, subj, drift.StatusOK, "no node carries it; a dead node's volumes are released only once someone taints it (or tether's TenantNodeDown does, opt-in)", "", srcOOS)
}

// controllerLine: the controller's account against what its configuration
// enables.
func controllerLine(a ControllerAccess) drift.Line {
	subj := "controller " + a.Account
	if a.Err != "" {
		return line(CheckControllerRBAC, subj, drift.StatusWarn, "its rights could not be asked about: "+a.Err,
			"grant this account create on subjectaccessreviews.authorization.k8s.io, or run doctor as a cluster admin", srcRBAC)
	}
	if len(a.Missing) == 0 {
		return line(CheckControllerRBAC, subj, drift.StatusOK, fmt.Sprintf("holds all %d grants its configuration needs", a.Asked), "", srcRBAC)
	}
	var parts, fixes []string
	st := drift.StatusWarn
	for _, m := range a.Missing {
		parts = append(parts, fmt.Sprintf("%s: %s %s", m.Feature, m.Grant, m.Where))
		if !m.Optional {
			st = drift.StatusFail
		}
		if !slices.Contains(fixes, m.Fix) {
			fixes = append(fixes, m.Fix)
		}
	}
	why := fmt.Sprintf("lacks %d of %d grants its configuration needs (it refuses to start without the required ones): %s", len(a.Missing), a.Asked, strings.Join(parts, "; "))
	return line(CheckControllerRBAC, subj, st, why, strings.Join(fixes, "; "), srcRBAC)
}
