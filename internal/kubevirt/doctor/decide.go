package doctor

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// The public sources of the lines (docs/doctor.md lists them).
const (
	srcGates = "kubevirt/kubevirt pkg/virt-config/featuregate (v1.9.0: DeclarativeHotplugVolumes Beta, HotplugVolumes deprecated); kubevirt/hyperconverged-cluster-operator#4381"
	srcHCO   = "kubevirt/hyperconverged-cluster-operator#4381 (HCO enables only DeclarativeHotplugVolumes); cozystack/cozystack#4032; kubevirt/csi-driver#177"
	srcRoute = "kubevirt/kubevirt pkg/virt-api/rest/volumes.go (gate check, \"owned by a VM\", dryRun); kubevirt/csi-driver#177"
	srcCSI   = "kubevirt/csi-driver#130 (hot-plug through the VM), kubevirt/csi-driver#177, cozystack/cozystack#4032"
	srcNodes = "kubevirt/csi-driver (node ID <namespace>/<vm>), Cluster API provider KubeVirt (providerID kubevirt://<vm>)"
	srcForce = "kubernetes/kubernetes#120344 (--disable-force-detach-on-timeout, Kubernetes 1.30), kubernetes/kubernetes#120328"
	srcFence = "KEP-2268 non-graceful node shutdown; tether's opt-in config/rbac/tenant-fencer.yaml"
	srcOOS   = "KEP-2268 non-graceful node shutdown (node.kubernetes.io/out-of-service, GA in Kubernetes 1.28)"
	srcRBAC  = "tether config/rbac; kubernetes SubjectAccessReview"
)

// Check names (contract: the -o json "check" values).
const (
	CheckGates          = "kubevirt.gates"
	CheckUpgrade        = "kubevirt.upgrade"
	CheckUnpersisted    = "hotplug.unpersisted"
	CheckDrain          = "drain.hotplug"
	CheckRoute          = "kubevirt.route"
	CheckTenantAccess   = "tenant.access"
	CheckTenantNodes    = "tenant.nodes"
	CheckTenantDriver   = "tenant.csidriver"
	CheckTenantRoute    = "tenant.driver-route"
	CheckTenantFence    = "tenant.fence"
	CheckForceDetach    = "kube.force-detach"
	CheckOutOfService   = "kube.out-of-service"
	CheckControllerRBAC = "controller.rbac"
)

// fixGateFlag is how to change the KubeVirt CR's gates by hand.
const fixGateFlag = "kubectl edit kubevirt -n kubevirt (spec.configuration.developerConfiguration.featureGates / disabledFeatureGates); under HCO, set them on the HyperConverged CR instead"

// Decide turns facts into the doctor's lines, in a fixed order.
func Decide(f Facts) []drift.Line {
	h := f.Gates.Hotplug()
	var out []drift.Line
	out = append(out, gatesLine(f, h), upgradeLine(f, h), unpersistedLine(f, h))
	if f.Drain != nil {
		out = append(out, drainLine(*f.Drain))
	}
	for _, p := range f.Probes {
		out = append(out, routeLine(p, h, f.ScopeError))
	}
	fences := f.Controller != nil && f.Controller.Fences
	for _, t := range f.Tenants {
		out = append(out, tenantLines(t, h, fences)...)
	}
	out = append(out, forceDetachLine(f.Kube), outOfServiceLine(f.Kube))
	if f.Controller != nil {
		out = append(out, controllerLine(*f.Controller))
	}
	return out
}

func line(check, subject string, s drift.Status, why, fix, src string) drift.Line {
	return drift.Line{Check: check, Subject: subject, Status: s, Why: why, Fix: fix, Source: src}
}

// gatesLine: the effective hot-plug gates, as virt-api and virt-controller
// evaluate them.
func gatesLine(f Facts, h snapshot.HotplugGates) drift.Line {
	const subj = "KubeVirt hot-plug gates"
	switch {
	case !f.Gates.Known:
		why := "the KubeVirt object could not be read"
		if f.GatesError != "" {
			why += ": " + f.GatesError
		}
		return line(CheckGates, subj, drift.StatusFail, why+"; every hot-plug repair is held (HotplugGateUnknown)",
			"check that KubeVirt is installed and that this account may list kubevirts.kubevirt.io (config/rbac)", srcGates)
	case !h.Known:
		return line(CheckGates, subj, drift.StatusWarn, h.Basis+"; the gates cannot be evaluated, so every hot-plug repair is held",
			"wait until virt-operator reports status.observedKubeVirtVersion on the KubeVirt object", srcGates)
	case !h.HotplugVolumes && !h.Declarative:
		return line(CheckGates, subj, drift.StatusFail, h.Basis+": virt-api refuses every volume call (400), so no hot-plug can be added or removed",
			"enable DeclarativeHotplugVolumes (remove it from disabledFeatureGates, or list it in featureGates): "+fixGateFlag, srcGates)
	case h.HotplugVolumes && deprecatedHotplug(f.Gates):
		return line(CheckGates, subj, drift.StatusWarn, h.Basis+": HotplugVolumes is deprecated since KubeVirt v1.9.0 and HCO no longer enables it; the VMI-level route for VM-owned VMIs lives only as long as it is listed",
			"move hot-plug users to the VM-level route (kubevirt/csi-driver with #130), then drop HotplugVolumes: "+fixGateFlag, srcGates)
	}
	return line(CheckGates, subj, drift.StatusOK, h.Basis+"; "+routesSummary(h), "", srcGates)
}

// deprecatedHotplug says whether g's release has HotplugVolumes deprecated.
func deprecatedHotplug(g snapshot.FeatureGates) bool {
	v, err := snapshot.ParseKubeVirtVersion(g.KubeVirtVersion)
	return err == nil && (snapshot.KubeVirtVersion{Major: v.Major, Minor: v.Minor}).AtLeast(snapshot.KubeVirtVersion{Major: 1, Minor: 9})
}

// routes is what a gate state opens.
type routes struct {
	vm, vmiOwned, vmiStandalone, declarativeSync bool
}

func routesOf(h snapshot.HotplugGates) routes {
	return routes{
		vm:              h.Known && (h.HotplugVolumes || h.Declarative),
		vmiOwned:        h.VMIRoute(true),
		vmiStandalone:   h.VMIRoute(false),
		declarativeSync: h.DeclarativeSync(),
	}
}

func routesSummary(h snapshot.HotplugGates) string {
	r := routesOf(h)
	s := fmt.Sprintf("VM-level route %s, VMI-level route %s for VM-owned VMIs and %s for standalone VMIs", openClosed(r.vm), openClosed(r.vmiOwned), openClosed(r.vmiStandalone))
	if r.declarativeSync {
		s += "; virt-controller removes hot-plugs of VM-owned VMIs that the VM spec lacks (declarative hot-plug)"
	}
	return s
}

func openClosed(b bool) string {
	if b {
		return "open"
	}
	return "closed"
}

// nextRelease is the KubeVirt release whose gate changes the doctor knows.
var nextRelease = snapshot.KubeVirtVersion{Major: 1, Minor: 9}

// upgradeLine: what the next KubeVirt upgrade (to v1.9, where
// DeclarativeHotplugVolumes turns Beta) and, under HCO, the next HCO
// upgrade (which lists DeclarativeHotplugVolumes and no longer
// HotplugVolumes) change about the routes.
func upgradeLine(f Facts, now snapshot.HotplugGates) drift.Line {
	const subj = "next KubeVirt/HCO upgrade"
	if !now.Known {
		return line(CheckUpgrade, subj, drift.StatusWarn, "the current gates are unknown, so what an upgrade changes cannot be said",
			"fix the kubevirt.gates line first", srcHCO)
	}
	next, steps := foreseen(f)
	note := ""
	if !f.HCO.Known {
		note = "; whether HCO manages KubeVirt is unknown (" + f.HCO.Err + ")"
	}
	st := drift.StatusOK
	if !f.HCO.Known {
		st = drift.StatusWarn
	}
	if len(steps) == 0 {
		if now.HotplugVolumes {
			return line(CheckUpgrade, subj, drift.StatusWarn, "no gate change of the next release is known, but HotplugVolumes is deprecated: a later KubeVirt removes it, and with it the VMI-level route for VM-owned VMIs"+note,
				"move hot-plug users (the KubeVirt CSI driver) to the VM-level route before that upgrade", srcGates)
		}
		return line(CheckUpgrade, subj, st, "no change of the hot-plug routes is known for the next upgrade"+note, fixIfWarn(st, "grant list on hyperconvergeds.hco.kubevirt.io, or check by hand whether HCO manages KubeVirt"), srcHCO)
	}
	after := next.Hotplug()
	changes := routeChanges(routesOf(now), routesOf(after))
	why := "after " + strings.Join(steps, " and ") + ": "
	if after.HotplugVolumes && !deprecatedHotplug(f.Gates) {
		note = "; HotplugVolumes is deprecated there and keeps working only while listed" + note
	}
	if len(changes) == 0 {
		return line(CheckUpgrade, subj, st, why+"the hot-plug routes stay as they are"+note, fixIfWarn(st, "check by hand whether HCO manages KubeVirt"), srcHCO)
	}
	return line(CheckUpgrade, subj, drift.StatusWarn, why+strings.Join(changes, "; ")+note,
		"before upgrading, move hot-plug users to the VM-level route (kubevirt/csi-driver with #130) and let VMI-only hot-plugs of VM-owned VMIs go (or restart those VMs); to keep the VMI route for now, keep HotplugVolumes listed (under HCO: its kubevirt.kubevirt.io/jsonpatch annotation)", srcHCO)
}

// foreseen is the KubeVirt CR's gates after the next upgrade, and the
// steps that lead there: KubeVirt v1.9 for an older release, and under
// HCO its next release, which lists DeclarativeHotplugVolumes (and takes
// it off the disabled list) and no longer lists HotplugVolumes
// (hyperconverged-cluster-operator#4381).
func foreseen(f Facts) (snapshot.FeatureGates, []string) {
	next := f.Gates
	var steps []string
	if !deprecatedHotplug(f.Gates) {
		next.KubeVirtVersion = nextRelease.String()
		steps = append(steps, "KubeVirt "+nextRelease.String())
	}
	if f.HCO.Present {
		next.Enabled = slices.DeleteFunc(slices.Clone(next.Enabled), func(g string) bool { return g == snapshot.HotplugVolumesGate })
		if !slices.Contains(next.Enabled, snapshot.DeclarativeHotplugVolumesGate) {
			next.Enabled = append(next.Enabled, snapshot.DeclarativeHotplugVolumesGate)
		}
		next.Disabled = slices.DeleteFunc(slices.Clone(next.Disabled), func(g string) bool { return g == snapshot.DeclarativeHotplugVolumesGate })
		steps = append(steps, "HCO "+f.HCO.Name+" listing only DeclarativeHotplugVolumes")
	}
	return next, steps
}

func fixIfWarn(s drift.Status, fix string) string {
	if s == drift.StatusOK {
		return ""
	}
	return fix
}

// routeChanges describes what differs between two route states.
func routeChanges(a, b routes) []string {
	var out []string
	change := func(was, will bool, what string) {
		switch {
		case was && !will:
			out = append(out, what+" closes (virt-api answers 400)")
		case !was && will:
			out = append(out, what+" opens")
		}
	}
	change(a.vm, b.vm, "the VM-level route")
	change(a.vmiOwned, b.vmiOwned, "the VMI-level route for VM-owned VMIs")
	change(a.vmiStandalone, b.vmiStandalone, "the VMI-level route for standalone VMIs")
	if !a.declarativeSync && b.declarativeSync {
		out = append(out, "virt-controller starts removing hot-plugs of VM-owned VMIs that the VM spec lacks (VMI-only hot-plugs, such as those of a CSI driver using the VMI-level route, are detached)")
	}
	if a.declarativeSync && !b.declarativeSync {
		out = append(out, "virt-controller stops removing hot-plugs the VM spec lacks")
	}
	return out
}

// answer is what a probe's answer shows.
type answer int

const (
	answerOpen       answer = iota // validation reached the volume
	answerGatePassed               // 404 for a name that does not exist: past the gate check
	answerNoGate                   // 400: neither hot-plug gate
	answerOwnedByVM                // 400: VMI-level call on a VM-owned VMI without HotplugVolumes
	answerForbidden
	answerUnauthorized
	answerGone // 404 for an object that existed a moment ago
	answerOther
)

// Messages of virt-api (pkg/virt-api/rest/volumes.go, subresource.go;
// identical in v1.7.0 and v1.9.0).
const (
	msgDoesNotExist = "because it does not exist"
	msgNotRunning   = "VMI is not running"
	msgGateOff      = "feature gate to use this API"
	msgOwnedByVM    = "is owned by a VM"
)

func classify(p Probe) answer {
	switch {
	case p.Code == 409 && (strings.Contains(p.Message, msgDoesNotExist) || strings.Contains(p.Message, msgNotRunning)):
		return answerOpen
	case p.Code == 404 && !p.Exists && strings.Contains(p.Message, fmt.Sprintf("%q not found", path.Base(p.Subject))):
		// virt-api's own "not found" of the object (the API server's
		// 404 for an unserved API names no object).
		return answerGatePassed
	case p.Code == 404 && p.Exists && strings.Contains(p.Message, fmt.Sprintf("%q not found", path.Base(p.Subject))):
		return answerGone
	case p.Code == 400 && strings.Contains(p.Message, msgGateOff):
		return answerNoGate
	case p.Code == 400 && strings.Contains(p.Message, msgOwnedByVM) && p.Route == RouteVMIOwned:
		// Only the VMI-level route on a VM-owned VMI answers so.
		return answerOwnedByVM
	case p.Code == 403:
		return answerForbidden
	case p.Code == 401:
		return answerUnauthorized
	}
	return answerOther
}

// routeLine: virt-api's real answer to a dry-run removevolume.
func routeLine(p Probe, h snapshot.HotplugGates, scopeErr string) drift.Line {
	r := routesOf(h)
	predicted := map[Route]bool{RouteVM: r.vm, RouteVMIOwned: r.vmiOwned, RouteVMIStandalone: r.vmiStandalone}[p.Route]
	subj := string(p.Route)
	said := probeSaid(p, scopeErr)
	mismatch := func(open bool) string {
		if h.Known && open != predicted {
			return fmt.Sprintf("; this differs from the gates (%s): virt-api may not have read the KubeVirt CR yet", h.Basis)
		}
		return ""
	}
	rbac := "grant update on subresources.kubevirt.io " + resourceOf(p.Route) + " (config/rbac)"
	switch classify(p) {
	case answerOpen:
		st := drift.StatusOK
		if mismatch(true) != "" {
			st = drift.StatusWarn
		}
		return line(CheckRoute, subj, st, said+": the route is open (validation reached the volume)"+mismatch(true), fixIfWarn(st, "run doctor again in a minute; if it persists, compare the KubeVirt CR with virt-api's log"), srcRoute)
	case answerGatePassed:
		what := "the route passes virt-api's gate check"
		st := drift.StatusOK
		switch {
		case p.Route == RouteVMIOwned && !predicted:
			what += "; its VM-owner check could not be tried without a VM-owned VMI, and by the gates it refuses them (400 \"owned by a VM\"): " + ownedClosed
			st = drift.StatusWarn
		case p.Route == RouteVMIOwned:
			what += "; its VM-owner check could not be tried without a VM-owned VMI, and by the gates it lets them through"
		case mismatch(true) != "":
			st = drift.StatusWarn
		}
		fix := fixIfWarn(st, "see the kubevirt.gates line")
		if p.Route == RouteVMIOwned && !predicted {
			fix = fixOwnedClosed
		}
		return line(CheckRoute, subj, st, said+": "+what+mismatch(true), fix, srcRoute)
	case answerOwnedByVM:
		return line(CheckRoute, subj, drift.StatusWarn, said+": "+ownedClosed+mismatch(false), fixOwnedClosed, srcRoute)
	case answerNoGate:
		return line(CheckRoute, subj, drift.StatusFail, said+": neither hot-plug gate is on for virt-api, so no hot-plug can be changed through this route"+mismatch(false),
			"enable DeclarativeHotplugVolumes: "+fixGateFlag, srcRoute)
	case answerForbidden:
		return line(CheckRoute, subj, drift.StatusFail, said+": this account may not call the route, so tether's repairs through it are refused", rbac, srcRoute)
	case answerUnauthorized:
		return line(CheckRoute, subj, drift.StatusFail, said+": virt-api's own authorization refused this account", rbac+"; check virt-api's client CA (extension-apiserver-authentication)", srcRoute)
	case answerGone:
		return line(CheckRoute, subj, drift.StatusWarn, said+": the object went away while probed; nothing is proved", "run doctor again", srcRoute)
	}
	return line(CheckRoute, subj, drift.StatusFail, said+": not an answer virt-api gives to a valid request; the route cannot be relied on",
		"check the APIService v1.subresources.kubevirt.io (kubectl get apiservice v1.subresources.kubevirt.io) and virt-api's log", srcRoute)
}

// probeSaid says what was asked and what virt-api answered.
func probeSaid(p Probe, scopeErr string) string {
	asked := "asked " + p.Subject
	switch {
	case !p.Exists && scopeErr != "":
		asked = "the VMs and VMIs in scope could not be listed (" + scopeErr + "), asked a name that does not exist (" + p.Subject + ")"
	case !p.Exists:
		asked = "no such object in scope, asked a name that does not exist (" + p.Subject + ")"
	}
	if p.Code == 0 {
		return fmt.Sprintf("dry-run removevolume (%s) got no answer: %s", asked, p.Err)
	}
	return fmt.Sprintf("dry-run removevolume (%s) answered %d %q", asked, p.Code, p.Message)
}

func resourceOf(r Route) string {
	if r == RouteVM {
		return "virtualmachines/removevolume"
	}
	return "virtualmachineinstances/removevolume"
}

// ownedClosed says what breaks while the VMI-level route refuses VM-owned
// VMIs (declarative hot-plug on, HotplugVolumes off): the fallbacks that
// remove a hot-plug through the VMI when the VM cannot be used
// (cozystack/cozystack#4032).
const ownedClosed = "the VMI-level route refuses VM-owned VMIs without HotplugVolumes, so the fallbacks through it fail: the KubeVirt CSI driver's detach while the VM is already gone (control-plane teardown), any driver that still hot-plugs through the VMI (without csi-driver#130), and tether's removal of a hot-plug from a VMI whose VM is gone (held HotplugGateDisabled); virt-controller's declarative sync removes VMI-only hot-plugs of VMIs whose VM still exists"

// fixOwnedClosed is the choice an operator has.
const fixOwnedClosed = "to keep the fallbacks, list HotplugVolumes in the KubeVirt CR (deprecated since v1.9.0; under HCO through its kubevirt.kubevirt.io/jsonpatch annotation); otherwise make sure every tenant's driver hot-plugs through the VM (tenant.driver-route lines) and stop VMIs whose VM is gone to release their hot-plugs"

// srcUnpersisted: where the declarative sync's rule comes from.
const srcUnpersisted = "kubevirt/kubevirt pkg/storage/hotplug/hotplug.go (v1.9.0: the declarative sync drops hotpluggable VMI volumes the VM spec lacks); kubevirt/kubevirt#13847; kubevirt/hyperconverged-cluster-operator#4381"

// maxUnpersisted caps how many hot-plugs the line names one by one.
const maxUnpersisted = 10

// unpersistedLine names every hot-plug of a running VM-owned VMI that its
// VM spec lacks: the declarative hot-plug sync removes them from the
// guests. FAIL when it is in effect now or the next known upgrade brings
// it; WARN while the gates keep them (HotplugVolumes is deprecated, so a
// later release takes them); OK when there are none.
func unpersistedLine(f Facts, now snapshot.HotplugGates) drift.Line {
	const subj = "hot-plugs the VM specs lack"
	if f.ScopeError != "" {
		return line(CheckUnpersisted, subj, drift.StatusWarn, "the VMs and VMIs could not be listed ("+f.ScopeError+"): which hot-plugs a gate change unplugs cannot be said",
			"grant list on virtualmachines and virtualmachineinstances (config/rbac)", srcUnpersisted)
	}
	if len(f.Unpersisted) == 0 {
		return line(CheckUnpersisted, subj, drift.StatusOK, "no running VM-owned VMI has a hot-plug its VM spec lacks: a gate change unplugs nothing", "", srcUnpersisted)
	}
	names := make([]string, 0, min(len(f.Unpersisted), maxUnpersisted))
	for i, u := range f.Unpersisted {
		if i == maxUnpersisted {
			names = append(names, fmt.Sprintf("and %d more (tether audit --checks UnpersistedHotplug)", len(f.Unpersisted)-maxUnpersisted))
			break
		}
		names = append(names, fmt.Sprintf("VMI %s volume %s (%s; %s)", u.VMI, u.Volume, u.Claim, u.Who))
	}
	list := strings.Join(names, "; ")
	const fix = "keep each one the guest needs by putting it in its VM spec as the VMI has it (tether audit --checks UnpersistedHotplug prints the patch), or move the tenant's CSI driver to the VM route (kubevirt/csi-driver with #130); until then keep HotplugVolumes listed: "
	next, steps := foreseen(f)
	switch {
	case now.DeclarativeSync():
		return line(CheckUnpersisted, subj, drift.StatusFail, fmt.Sprintf("the declarative hot-plug sync is in effect (%s): virt-controller is taking %d hot-plug(s) from running guests, unless their VMs' updateVolumesStrategy is Migration: %s", now.Basis, len(f.Unpersisted), list),
			fix+fixGateFlag, srcUnpersisted)
	case len(steps) > 0 && next.Hotplug().DeclarativeSync():
		return line(CheckUnpersisted, subj, drift.StatusFail, fmt.Sprintf("after %s the declarative hot-plug sync is in effect and unplugs %d hot-plug(s) from running guests: %s", strings.Join(steps, " and "), len(f.Unpersisted), list),
			"before upgrading, "+fix+fixGateFlag, srcUnpersisted)
	}
	return line(CheckUnpersisted, subj, drift.StatusWarn, fmt.Sprintf("kept only while HotplugVolumes is on (it is deprecated in KubeVirt v1.9): once it goes, the declarative hot-plug sync unplugs %d hot-plug(s) from running guests: %s", len(f.Unpersisted), list),
		fix+fixGateFlag, srcUnpersisted)
}

const srcDrain = "kubevirt/kubevirt#13523 (a drain evicts the attachment pod before the migration); kubevirt/kubevirt#15093 (v1.6.1, v1.7.0: virt-api refuses it, pkg/virt-api/webhooks/validating-webhook/admitters/pod-eviction-admitter.go)"

// drainLine names the running VMIs on the node that a drain of it takes
// hot-plugs from, before the operator runs `kubectl drain`: OK when there
// are none, or KubeVirt's guard refuses their attachment pods' eviction
// (the drain then waits until each VMI has migrated); FAIL when nothing
// refuses it; WARN when the guard fails open, cannot be told, or what the
// node holds cannot be read.
func drainLine(d Drain) drift.Line {
	subj := "drain of node " + d.Node
	switch {
	case d.Err != "":
		return line(CheckDrain, subj, drift.StatusWarn, "the VMIs and attachment pods could not be read ("+d.Err+"): which disks a drain takes cannot be said",
			"grant list on virtualmachineinstances and pods (config/rbac)", srcDrain)
	case d.NodeErr != "":
		return line(CheckDrain, subj, drift.StatusWarn, "the Node could not be read ("+d.NodeErr+"): whether it exists cannot be said", "grant get on nodes", srcDrain)
	case !d.NodeFound:
		return line(CheckDrain, subj, drift.StatusWarn, "there is no Node "+d.Node, "name a node of `kubectl get nodes`", srcDrain)
	}
	guard := check.EvictionGuardOf(d.Gates, d.Guard)
	if len(d.VMIs) == 0 {
		return line(CheckDrain, subj, drift.StatusOK, "no running VMI on "+d.Node+" has a hot-plug in its guest through an attachment pod there: a drain takes no hot-plug from a guest", "", srcDrain)
	}
	names := make([]string, 0, min(len(d.VMIs), maxUnpersisted))
	migrate := make([]string, 0, min(len(d.VMIs), maxUnpersisted))
	for i, v := range d.VMIs {
		if i == maxUnpersisted {
			names = append(names, fmt.Sprintf("and %d more (tether audit --checks DrainEvictsHotplug)", len(d.VMIs)-maxUnpersisted))
			break
		}
		strategy, migratable := v.Strategy, v.Migratable
		if strategy == "" {
			strategy = "none"
		}
		if migratable == "" {
			migratable = "unknown"
		}
		names = append(names, fmt.Sprintf("VMI %s hot-plug(s) %s through %s (eviction strategy %s, migratable %s)", v.VMI, v.Volumes, v.Pods, strategy, migratable))
		ns, name, _ := strings.Cut(v.VMI, "/")
		migrate = append(migrate, fmt.Sprintf("virtctl migrate %s -n %s", name, ns))
	}
	list := strings.Join(names, "; ")
	if guard.State == check.GuardInEffect {
		return line(CheckDrain, subj, drift.StatusOK, fmt.Sprintf("%d running VMI(s) have hot-plugs through attachment pods on %s, and KubeVirt refuses their eviction (%s): the drain waits until each VMI has left the node: %s", len(d.VMIs), d.Node, guard.Basis, list), "", srcDrain)
	}
	fix := fmt.Sprintf("before `kubectl drain %s`, move each VMI first (%s) and wait until its status.nodeName is another node; a VMI that cannot migrate must be stopped, or its hot-plugs unplugged; or drain in two steps: `kubectl drain %s --ignore-daemonsets --delete-emptydir-data --pod-selector='kubevirt.io!=hotplug-disk'`, then `kubectl drain %s` once the VMIs have left; for good: KubeVirt v1.7.0 or later (v1.6.1 on v1.6), or tether's opt-in guard (chart protection.webhook.attachmentPodEvictions)",
		d.Node, strings.Join(migrate, "; "), d.Node, d.Node)
	why := fmt.Sprintf("a drain of %s may evict the attachment pods of %d running VMI(s) before they have left, and their guests lose the disks (%s): %s", d.Node, len(d.VMIs), guard.Basis, list)
	if guard.State == check.GuardMissing {
		return line(CheckDrain, subj, drift.StatusFail, why, fix, srcDrain)
	}
	return line(CheckDrain, subj, drift.StatusWarn, why, fix, srcDrain)
}
