package check

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// DrainEvictsHotplug: a running VMI whose hot-plugs reach its guest through
// an attachment pod on its node that a drain of that node may evict before
// the VMI has left it (kubevirt/kubevirt#13523): nothing guards the
// attachment pod against eviction, so the guest loses the disks.
const DrainEvictsHotplug = "DrainEvictsHotplug"

// The holds of DrainEvictsHotplug: why nothing refuses the eviction.
const (
	// KubeVirtLacksEvictionGuard: the KubeVirt release has no guard of
	// attachment pods (before v1.6.1, and v1.7.0 on its own line).
	KubeVirtLacksEvictionGuard drift.BlockReason = "KubeVirtLacksEvictionGuard"
	// EvictionGuardNotRegistered: the release has the guard, but
	// virt-api-validator does not send attachment pods' evictions to it.
	EvictionGuardNotRegistered drift.BlockReason = "EvictionGuardNotRegistered"
	// EvictionGuardFailsOpen: the guard is registered with failure policy
	// Ignore: an eviction while virt-api does not answer passes.
	EvictionGuardFailsOpen drift.BlockReason = "EvictionGuardFailsOpen"
	// EvictionGuardUnknown: neither the release nor the registration could
	// be read.
	EvictionGuardUnknown drift.BlockReason = "EvictionGuardUnknown"
)

// guardSince are the first releases whose virt-api refuses the eviction
// of an attachment pod of a VMI that runs: v1.7.0 (kubevirt/kubevirt#15093,
// commit 48e2ce2) and v1.6.1 (its backport, #15356). A pre-release of
// v1.7.0 has it too (v1.7.0-alpha.0 and later).
var (
	guardSince    = snapshot.KubeVirtVersion{Major: 1, Minor: 7}
	guardBackport = snapshot.KubeVirtVersion{Major: 1, Minor: 6, Patch: 1}
)

// GuardState is whether a drain's eviction of an attachment pod of a
// running VMI is refused.
type GuardState int

// Guard states.
const (
	// GuardUnknown: neither the release nor the registration tells.
	GuardUnknown GuardState = iota
	// GuardInEffect: virt-api refuses it (while it answers: KubeVirt
	// registers the webhook with failure policy Fail).
	GuardInEffect
	// GuardFailsOpen: virt-api refuses it while it answers; when it does
	// not, the API server lets the eviction through.
	GuardFailsOpen
	// GuardMissing: nothing refuses it.
	GuardMissing
)

// Guard is KubeVirt's guard of attachment pods against eviction, as far as
// the KubeVirt CR's version and virt-api-validator tell.
type Guard struct {
	State GuardState
	// Reason is the finding's hold for every state but GuardInEffect.
	Reason drift.BlockReason
	// Basis says what the decision rests on (for evidence and the
	// doctor).
	Basis string
}

// EvictionGuardOf decides the guard from the KubeVirt CR (its observed
// version) and what was read of virt-api-validator:
//   - the guard's webhook registered (snapshot.GuardWebhookOf): in effect,
//     or failing open under failure policy Ignore; virt-operator writes
//     that webhook from the build whose virt-api has the admitter, so it
//     is trusted over the version string (a distribution's backport);
//   - virt-api-validator read without it: missing, whatever the release
//     (nothing sends the eviction to virt-api);
//   - not read, or absent altogether (every virt-api has it and
//     virt-operator restores it): the release decides: v1.7.0 and later or v1.6.1 and later
//     in effect (virt-operator registers it and puts it back), older
//     missing, unknown version unknown.
func EvictionGuardOf(g snapshot.FeatureGates, e snapshot.EvictionGuard) Guard {
	v, err := snapshot.ParseKubeVirtVersion(g.KubeVirtVersion)
	known := g.Known && err == nil
	has := known && hasGuard(v)
	release := "the KubeVirt version is unknown"
	switch {
	case !g.Known:
		release = "the KubeVirt object could not be read"
	case known && has:
		release = fmt.Sprintf("KubeVirt %s has virt-api's guard of attachment pods (kubevirt/kubevirt#15093, v1.6.1 and v1.7.0 on)", v)
	case known:
		release = fmt.Sprintf("KubeVirt %s predates virt-api's guard of attachment pods (kubevirt/kubevirt#15093: v1.6.1, v1.7.0)", v)
	case g.KubeVirtVersion != "":
		release = fmt.Sprintf("the KubeVirt version %q cannot be read", g.KubeVirtVersion)
	}
	switch {
	case e.Read && e.Webhook != "" && e.FailurePolicy != "Ignore":
		return Guard{State: GuardInEffect, Basis: fmt.Sprintf("%s; %s registers webhook %s (failure policy %s): virt-api refuses the eviction of an attachment pod whose launcher runs", release, snapshot.VirtAPIValidatorName, e.Webhook, e.FailurePolicy)}
	case e.Read && e.Webhook != "":
		return Guard{State: GuardFailsOpen, Reason: EvictionGuardFailsOpen, Basis: fmt.Sprintf("%s; %s registers webhook %s with failure policy Ignore: while virt-api does not answer, the API server lets the eviction through", release, snapshot.VirtAPIValidatorName, e.Webhook)}
	case e.Read && e.Found:
		where := fmt.Sprintf("%s has no webhook that sends attachment pods' evictions to virt-api (%s)", snapshot.VirtAPIValidatorName, snapshot.HotplugEvictionWebhook)
		reason := EvictionGuardNotRegistered
		if known && !has {
			reason = KubeVirtLacksEvictionGuard
		}
		return Guard{State: GuardMissing, Reason: reason, Basis: release + "; " + where + ": nothing refuses the eviction"}
	}
	// Read and absent is no better evidence than unread: every virt-api
	// has this configuration (all of KubeVirt's validating webhooks), and
	// virt-operator puts it back; a cluster without it runs no standard
	// virt-api, and its release is the only evidence left.
	unread := fmt.Sprintf("%s could not be read", snapshot.VirtAPIValidatorName)
	if e.Read {
		unread = fmt.Sprintf("there is no ValidatingWebhookConfiguration %s", snapshot.VirtAPIValidatorName)
	}
	if e.Err != "" {
		unread += " (" + e.Err + ")"
	}
	switch {
	case known && has:
		return Guard{State: GuardInEffect, Basis: release + "; " + unread + ", and virt-operator registers the guard's webhook"}
	case known:
		return Guard{State: GuardMissing, Reason: KubeVirtLacksEvictionGuard, Basis: release + "; " + unread + ": a distribution that backported the guard would show it there"}
	}
	return Guard{State: GuardUnknown, Reason: EvictionGuardUnknown, Basis: release + "; " + unread}
}

// hasGuard: the release line of v has the guard.
func hasGuard(v snapshot.KubeVirtVersion) bool {
	if (snapshot.KubeVirtVersion{Major: v.Major, Minor: v.Minor}).AtLeast(guardSince) {
		return true
	}
	return v.Major == guardBackport.Major && v.Minor == guardBackport.Minor && v.Patch >= guardBackport.Patch
}

// DrainRisk is a running VMI whose Ready hot-plugs go through attachment
// pods on its node: what a drain of that node evicts unless KubeVirt's
// guard refuses it.
type DrainRisk struct {
	VMI  *snapshot.VMI
	Node string
	// Pods are the attachment pods on the node, each with the Ready
	// hot-plugs it serves, in the VMI's volume status order.
	Pods []RiskPod
	// Strategy is the eviction strategy in effect ("" for none), From
	// where it comes from.
	Strategy, From string
	// Migratable is the LiveMigratable condition's status ("" when the
	// VMI has none), Why its reason and message.
	Migratable corev1.ConditionStatus
	Why        string
}

// RiskPod is an attachment pod and the hot-plugs it serves.
type RiskPod struct {
	Name    string
	Volumes []string
}

// Volumes returns every hot-plug of r, in order.
func (r DrainRisk) Volumes() []string {
	var out []string
	for _, p := range r.Pods {
		out = append(out, p.Volumes...)
	}
	return out
}

// PodNames returns r's attachment pods.
func (r DrainRisk) PodNames() []string {
	out := make([]string, len(r.Pods))
	for i, p := range r.Pods {
		out[i] = p.Name
	}
	return out
}

// FindDrainRisks lists, for every VMI in scope that runs on a node (phase
// Running, not being deleted), its hot-plugs in phase Ready (in the guest)
// whose volume status names an attachment pod that is on that node, not
// being deleted and not finished. Those are what a drain of the node
// evicts with the launcher: the pod holds the volume on the node for the
// guest, and KubeVirt's disruption budgets select launcher pods only (by
// kubevirt.io/created-by, which attachment pods lack:
// pkg/virt-controller/services/template.go:1092-1105 at v1.9.0). A hot-plug
// not yet Ready, or being unplugged, is not counted: the guest does not
// have it, or is losing it anyway.
func FindDrainRisks(in Input) []DrainRisk {
	in = in.ready()
	var out []DrainRisk
	for i := range in.Snapshot.VMIs {
		vmi := &in.Snapshot.VMIs[i]
		if !named(vmi) || vmi.Status.Phase != kubevirtv1.Running || IsTerminating(vmi) || vmi.Status.NodeName == "" ||
			!in.scope.namespace(vmi.Namespace) || !in.scope.labels(vmi.Labels) {
			continue
		}
		r := DrainRisk{VMI: vmi, Node: vmi.Status.NodeName}
		for j := range vmi.Status.VolumeStatus {
			vs := &vmi.Status.VolumeStatus[j]
			hp := vs.HotplugVolume
			if hp == nil || hp.AttachPodName == "" || vs.Phase != kubevirtv1.VolumeReady || !in.scope.volume(vs.Name) {
				continue
			}
			pod := in.Index.AttachmentPod(vmi.Namespace, hp.AttachPodName)
			if pod == nil || pod.Spec.NodeName != r.Node || IsTerminating(pod) || podFinished(pod) {
				continue
			}
			at := slices.IndexFunc(r.Pods, func(p RiskPod) bool { return p.Name == pod.Name })
			if at < 0 {
				r.Pods = append(r.Pods, RiskPod{Name: pod.Name})
				at = len(r.Pods) - 1
			}
			r.Pods[at].Volumes = append(r.Pods[at].Volumes, vs.Name)
		}
		if len(r.Pods) == 0 {
			continue
		}
		r.Strategy, r.From = evictionStrategy(in.Snapshot.FeatureGates, vmi)
		for _, c := range vmi.Status.Conditions {
			if c.Type == kubevirtv1.VirtualMachineInstanceIsMigratable {
				r.Migratable, r.Why = c.Status, strings.TrimSpace(strings.Trim(c.Reason+": "+c.Message, ": "))
			}
		}
		out = append(out, r)
	}
	return out
}

func podFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// evictionStrategy is the strategy in effect for vmi, as virt-api's
// eviction admitter takes it: the VMI's own, else the cluster's default
// (pkg/util/migrations VMIEvictionStrategy at v1.9.0); "" for none, "?"
// when the cluster's default could not be read.
func evictionStrategy(g snapshot.FeatureGates, vmi *snapshot.VMI) (strategy, from string) {
	switch {
	case vmi.Spec.EvictionStrategy != nil:
		return string(*vmi.Spec.EvictionStrategy), "the VMI's spec"
	case !g.Known:
		return "?", "the VMI sets none, and the KubeVirt object's default could not be read"
	case g.EvictionStrategy != "":
		return g.EvictionStrategy, "the cluster's default (KubeVirt spec.configuration.evictionStrategy)"
	}
	return "", "neither the VMI nor the KubeVirt object sets one"
}

// FindDrainEvictsHotplug reports each DrainRisk that KubeVirt's guard does
// not cover (EvictionGuardOf): warning where nothing refuses the eviction,
// info where the guard fails open or cannot be told. A VMI the guard
// covers has no finding: KubeVirt refuses the eviction itself, and the
// drain waits until the VMI has migrated (`tether doctor --node` says so).
// It never acts.
func FindDrainEvictsHotplug(in Input) []drift.Finding {
	in = in.ready()
	guard := EvictionGuardOf(in.Snapshot.FeatureGates, in.Snapshot.EvictionGuard)
	if guard.State == GuardInEffect {
		return nil
	}
	var out []drift.Finding
	for _, r := range FindDrainRisks(in) {
		out = append(out, drainFinding(guard, r))
	}
	return out
}

func drainFinding(guard Guard, r DrainRisk) drift.Finding {
	vmi := r.VMI
	vols, pods := r.Volumes(), r.PodNames()
	f := drift.Finding{
		Check:     DrainEvictsHotplug,
		Namespace: vmi.Namespace,
		Object:    drift.ObjectRef{Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID},
		Volume:    strings.Join(vols, ","),
		Severity:  drift.SeverityWarning,
	}
	f.ID = f.DerivedID()
	if guard.State != GuardMissing {
		f.Severity = drift.SeverityInfo
	}
	what := "nothing refuses"
	switch guard.State {
	case GuardFailsOpen:
		what = "while virt-api does not answer, nothing refuses"
	case GuardUnknown:
		what = "whether KubeVirt refuses cannot be told, and without its guard nothing refuses"
	}
	f.Message = fmt.Sprintf("a drain of node %s may evict attachment pod %s of VMI %s/%s before the VMI has left the node (%s the eviction): the guest loses hot-plug(s) %s",
		r.Node, strings.Join(pods, ", "), vmi.Namespace, vmi.Name, what, strings.Join(vols, ", "))
	f.Evidence = []string{fmt.Sprintf("VMI %s/%s runs on node %s", vmi.Namespace, vmi.Name, r.Node)}
	for _, p := range r.Pods {
		f.Evidence = append(f.Evidence, fmt.Sprintf("attachment pod %s on node %s serves hot-plug(s) %s, Ready in the guest", p.Name, r.Node, strings.Join(p.Volumes, ", ")))
	}
	f.Evidence = append(f.Evidence, "no disruption budget covers attachment pods (KubeVirt's select launcher pods by kubevirt.io/created-by)",
		strategyFact(r), launcherFact(r))
	f.Action = drift.Action{Type: drift.None, Remedy: DrainRemedy(r)}
	f.Block(guard.Reason, "guard: "+guard.Basis)
	return f
}

func strategyFact(r DrainRisk) string {
	s := r.Strategy
	if s == "" {
		s = "none"
	}
	m := "no LiveMigratable condition"
	if r.Migratable != "" {
		m = "LiveMigratable " + string(r.Migratable)
		if r.Why != "" {
			m += " (" + r.Why + ")"
		}
	}
	return fmt.Sprintf("eviction strategy %s, from %s; %s", s, r.From, m)
}

// launcherFact says what the same drain does to the VMI's launcher, as
// virt-api's eviction admitter decides it
// (pod-eviction-admitter.go:127-183 at v1.9.0).
func launcherFact(r DrainRisk) string {
	migratable := r.Migratable == corev1.ConditionTrue
	switch kubevirtv1.EvictionStrategy(r.Strategy) {
	case kubevirtv1.EvictionStrategyLiveMigrate:
		if !migratable {
			return "the launcher's eviction is refused for good (not live-migratable): the drain waits for ever, while the guest has already lost the disk"
		}
		return "the launcher's eviction is refused and the VMI migrates: the drain retries it, while the attachment pod's eviction went through at once"
	case kubevirtv1.EvictionStrategyLiveMigrateIfPossible:
		if migratable {
			return "the launcher's eviction is refused and the VMI migrates: the drain retries it, while the attachment pod's eviction went through at once"
		}
		return "the launcher is evicted too (not live-migratable): the guest is shut down, and may lose the disk before it has flushed it"
	case kubevirtv1.EvictionStrategyExternal:
		return "the launcher's eviction is refused and the VMI is marked for evacuation by an external controller, while the attachment pod's eviction went through at once"
	case "?":
		return "what the drain does to the launcher depends on the cluster's eviction strategy, which could not be read"
	}
	return "the launcher is evicted too (no eviction strategy): the guest is shut down, and may lose the disk before it has flushed it"
}

// DrainRemedy is what to do before draining r's node: move the VMI first,
// or take the hot-plugs out, or drain without the attachment pods.
func DrainRemedy(r DrainRisk) string {
	ns, name := r.VMI.Namespace, r.VMI.Name
	move := fmt.Sprintf("before `kubectl drain %s`, move the VMI: `virtctl migrate %s -n %s`, and wait until `kubectl get vmi %s -n %s -o jsonpath='{.status.nodeName}'` names another node", r.Node, name, ns, name, ns)
	if r.Migratable == corev1.ConditionFalse {
		move = fmt.Sprintf("VMI %s/%s is not live-migratable: before `kubectl drain %s`, stop it (`virtctl stop`), or unplug its hot-plugs from the guest first (`virtctl removevolume %s -n %s --volume-name=NAME`, --persist for a VM's)", ns, name, r.Node, name, ns)
	}
	return move + fmt.Sprintf("; or drain in two steps: `kubectl drain %s --ignore-daemonsets --delete-emptydir-data --pod-selector='kubevirt.io!=hotplug-disk'` (the launchers migrate, the attachment pods stay), then `kubectl drain %s` once the VMIs have left; "+
		"for good: KubeVirt v1.7.0 or later (v1.6.1 on the v1.6 line) refuses these evictions itself (kubevirt/kubevirt#15093), with virt-api-validator's webhook %s registered; or tether's opt-in guard (chart protection.webhook.attachmentPodEvictions)",
		r.Node, r.Node, snapshot.HotplugEvictionWebhook)
}
