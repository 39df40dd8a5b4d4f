package check

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// kubeVirtAt is a deployed KubeVirt of version v with the cluster's
// default eviction strategy es ("" for none).
func kubeVirtAt(v, es string) snapshot.FeatureGates {
	return snapshot.FeatureGates{Known: true, KubeVirtVersion: v, Phase: "Deployed", EvictionStrategy: es}
}

// The registrations of virt-api-validator a test world may have.
var (
	guardUnread     = snapshot.EvictionGuard{Err: "forbidden"}
	guardAbsent     = snapshot.EvictionGuard{Read: true}
	guardNoWebhook  = snapshot.EvictionGuard{Read: true, Found: true}
	guardRegistered = snapshot.EvictionGuard{Read: true, Found: true, Webhook: snapshot.HotplugEvictionWebhook, FailurePolicy: "Fail"}
	guardIgnore     = snapshot.EvictionGuard{Read: true, Found: true, Webhook: snapshot.HotplugEvictionWebhook, FailurePolicy: "Ignore"}
)

// drainVMI is a running VMI on f.Node with hot-plug pvc-1, Ready through
// attachment pod hp-volume-<name>, and that pod, launched by the VMI's
// launcher, on the same node.
func drainVMI(name string, opts ...f.Option) (*kubevirtv1.VirtualMachineInstance, *corev1.Pod) {
	vmi := f.VMI(name, append([]f.Option{f.WithHotplug("pvc-1")}, opts...)...)
	return vmi, f.AttachmentPod("hp-volume-"+name, f.Claims("pvc-1"), f.LaunchedBy(vmi))
}

// The oracle, from KubeVirt's source: virt-api's pod-eviction admitter
// refuses the eviction of an attachment pod whose launcher runs and whose
// VMI exists (pod-eviction-admitter.go:92-93,100-125 at v1.7.0 and v1.9.0),
// once virt-api-validator's webhook hotplug-pod-eviction-interceptor sends
// it there (webhooks.go:369-399 at v1.9.0); both came with commit 48e2ce2
// (kubevirt/kubevirt#15093, first in v1.7.0-alpha.0) and its v1.6 backport
// (#15356, first in v1.6.1). No disruption budget selects attachment pods.
// Without that guard a drain's eviction of the pod goes through, and the
// guest loses its Ready hot-plugs (kubevirt/kubevirt#13523, on v1.2).
func TestDrainEvictsHotplug(t *testing.T) {
	type world struct {
		gates snapshot.FeatureGates
		guard snapshot.EvictionGuard
		items func() []any
	}
	plain := func(opts ...f.Option) func() []any {
		return func() []any { vmi, pod := drainVMI("vm-a", opts...); return []any{vmi, pod} }
	}
	terminating := metav1.NewTime(now.Add(-time.Minute))
	cases := []struct {
		name string
		w    world
		want *outcome
	}{
		{"v1.5.0, virt-api-validator read without the guard -> warning KubeVirtLacksEvictionGuard", world{kubeVirtAt("v1.5.0", ""), guardNoWebhook, plain()},
			blocked(drift.SeverityWarning, drift.None, KubeVirtLacksEvictionGuard, "runs on node "+f.Node, "attachment pod hp-volume-vm-a on node "+f.Node+" serves hot-plug(s) pvc-1", "predates virt-api's guard", "eviction strategy none")},
		{"v1.2.2, virt-api-validator unread -> warning KubeVirtLacksEvictionGuard (the version decides)", world{kubeVirtAt("v1.2.2", ""), guardUnread, plain()},
			blocked(drift.SeverityWarning, drift.None, KubeVirtLacksEvictionGuard, "could not be read (forbidden)")},
		{"v1.6.0, unread -> warning (the backport came in v1.6.1)", world{kubeVirtAt("v1.6.0", ""), guardUnread, plain()},
			blocked(drift.SeverityWarning, drift.None, KubeVirtLacksEvictionGuard)},
		{"v1.6.1, unread -> no finding (the backport)", world{kubeVirtAt("v1.6.1", ""), guardUnread, plain()}, noFinding()},
		{"v1.7.0-rc.0, unread -> no finding (the pre-releases of v1.7.0 have it)", world{kubeVirtAt("v1.7.0-rc.0", ""), guardUnread, plain()}, noFinding()},
		{"v1.9.0, guard registered (Fail) -> no finding (KubeVirt refuses the eviction)", world{kubeVirtAt("v1.9.0", ""), guardRegistered, plain()}, noFinding()},
		{"v1.7.0, unread -> no finding (virt-operator registers it)", world{kubeVirtAt("v1.7.0", ""), guardUnread, plain()}, noFinding()},
		{"v1.9.0, virt-api-validator without the guard's webhook -> warning EvictionGuardNotRegistered", world{kubeVirtAt("v1.9.0", ""), guardNoWebhook, plain()},
			blocked(drift.SeverityWarning, drift.None, EvictionGuardNotRegistered, "has no webhook that sends attachment pods' evictions to virt-api")},
		// Every virt-api has virt-api-validator and virt-operator restores it:
		// its absence says no more than an unread one (the emulator's world).
		{"v1.9.0, no virt-api-validator at all -> no finding (the release decides)", world{kubeVirtAt("v1.9.0", ""), guardAbsent, plain()}, noFinding()},
		{"v1.5.0, no virt-api-validator at all -> warning KubeVirtLacksEvictionGuard", world{kubeVirtAt("v1.5.0", ""), guardAbsent, plain()},
			blocked(drift.SeverityWarning, drift.None, KubeVirtLacksEvictionGuard, "there is no ValidatingWebhookConfiguration virt-api-validator")},
		{"v1.9.0, guard registered with Ignore -> info EvictionGuardFailsOpen", world{kubeVirtAt("v1.9.0", ""), guardIgnore, plain()},
			blocked(drift.SeverityInfo, drift.None, EvictionGuardFailsOpen, "failure policy Ignore")},
		{"v1.5.0 but the guard's webhook registered (a backport) -> no finding", world{kubeVirtAt("v1.5.0", ""), guardRegistered, plain()}, noFinding()},
		{"KubeVirt object unreadable, virt-api-validator unread -> info EvictionGuardUnknown", world{f.GatesUnknown(), guardUnread, plain()},
			blocked(drift.SeverityInfo, drift.None, EvictionGuardUnknown)},
		{"KubeVirt object unreadable, no guard registered -> warning EvictionGuardNotRegistered", world{f.GatesUnknown(), guardNoWebhook, plain()},
			blocked(drift.SeverityWarning, drift.None, EvictionGuardNotRegistered, "eviction strategy ?")},
		{"LiveMigrate, migratable -> warning, the launcher migrates while the pod went at once", world{kubeVirtAt("v1.5.0", ""), guardNoWebhook, plain(f.Eviction(kubevirtv1.EvictionStrategyLiveMigrate), f.Migratable(corev1.ConditionTrue))},
			blocked(drift.SeverityWarning, drift.None, KubeVirtLacksEvictionGuard, "eviction strategy LiveMigrate, from the VMI's spec; LiveMigratable True", "the VMI migrates")},
		{"cluster default LiveMigrate, not migratable -> warning, the drain waits for ever", world{kubeVirtAt("v1.5.0", "LiveMigrate"), guardNoWebhook, plain(f.Migratable(corev1.ConditionFalse, "DisksNotLiveMigratable", "cannot migrate a local disk"))},
			blocked(drift.SeverityWarning, drift.None, KubeVirtLacksEvictionGuard, "from the cluster's default", "LiveMigratable False (DisksNotLiveMigratable: cannot migrate a local disk)", "refused for good")},
		{"External -> warning, marked for evacuation", world{kubeVirtAt("v1.5.0", ""), guardNoWebhook, plain(f.Eviction(kubevirtv1.EvictionStrategyExternal))},
			blocked(drift.SeverityWarning, drift.None, KubeVirtLacksEvictionGuard, "marked for evacuation")},
		{"hot-plug not Ready yet -> no finding (the guest does not have it)", world{kubeVirtAt("v1.5.0", ""), guardNoWebhook, func() []any {
			vmi := f.VMI("vm-a", f.WithHotplug("pvc-1", f.VolumePhase(kubevirtv1.HotplugVolumeAttachedToNode)))
			return []any{vmi, f.AttachmentPod("hp-volume-vm-a", f.LaunchedBy(vmi))}
		}}, noFinding()},
		{"hot-plug being unplugged -> no finding", world{kubeVirtAt("v1.5.0", ""), guardNoWebhook, func() []any {
			vmi := f.VMI("vm-a", f.WithHotplug("pvc-1", f.VolumePhase(kubevirtv1.HotplugVolumeDetaching)))
			return []any{vmi, f.AttachmentPod("hp-volume-vm-a", f.LaunchedBy(vmi))}
		}}, noFinding()},
		{"attachment pod on another node (a migration target's) -> no finding", world{kubeVirtAt("v1.5.0", ""), guardNoWebhook, func() []any {
			vmi := f.VMI("vm-a", f.WithHotplug("pvc-1"))
			pod := f.AttachmentPod("hp-volume-vm-a", f.LaunchedBy(vmi))
			pod.Spec.NodeName = "node-b"
			return []any{vmi, pod}
		}}, noFinding()},
		{"attachment pod being deleted -> no finding", world{kubeVirtAt("v1.5.0", ""), guardNoWebhook, func() []any {
			vmi, pod := drainVMI("vm-a")
			pod.DeletionTimestamp = &terminating
			return []any{vmi, pod}
		}}, noFinding()},
		{"attachment pod finished -> no finding", world{kubeVirtAt("v1.5.0", ""), guardNoWebhook, func() []any {
			vmi, pod := drainVMI("vm-a")
			pod.Status.Phase = corev1.PodSucceeded
			return []any{vmi, pod}
		}}, noFinding()},
		{"attachment pod not in the snapshot -> no finding", world{kubeVirtAt("v1.5.0", ""), guardNoWebhook, func() []any { vmi, _ := drainVMI("vm-a"); return []any{vmi} }}, noFinding()},
		{"VMI not running -> no finding", world{kubeVirtAt("v1.5.0", ""), guardNoWebhook, plain(f.Phase(kubevirtv1.Scheduled))}, noFinding()},
		{"VMI being deleted -> no finding", world{kubeVirtAt("v1.5.0", ""), guardNoWebhook, plain(f.Terminating(now.Add(-time.Minute)))}, noFinding()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := f.Snapshot(append(c.w.items(), c.w.gates, c.w.guard)...)
			assertOutcome(t, only(Run(s, DefaultPolicy(), now), DrainEvictsHotplug, "vm-a", ""), c.want)
		})
	}
}

// Two hot-plugs through one pod, and a second pod after a flip-flop: one
// finding names every pod and volume; the remedy says what to run first.
func TestDrainEvictsHotplugNamesEveryPodAndTheWayOut(t *testing.T) {
	vmi := f.VMI("vm-a", f.WithHotplug("pvc-1"), f.WithHotplug("pvc-2"), f.WithHotplug("pvc-3", f.AttachPod("hp-volume-second")))
	pods := []any{f.AttachmentPod("hp-volume-vm-a", f.LaunchedBy(vmi)), f.AttachmentPod("hp-volume-second", f.LaunchedBy(vmi))}
	fs := only(Run(f.Snapshot(append(pods, vmi, kubeVirtAt("v1.5.0", ""), guardNoWebhook)...), DefaultPolicy(), now), DrainEvictsHotplug, "vm-a", "")
	if len(fs) != 1 {
		t.Fatalf("want one finding, got %+v", fs)
	}
	fd := fs[0]
	if fd.Volume != "pvc-1,pvc-2,pvc-3" || !strings.Contains(fd.Message, "hp-volume-vm-a, hp-volume-second") || !strings.Contains(fd.Message, "node "+f.Node) {
		t.Errorf("volume %q, message %q", fd.Volume, fd.Message)
	}
	for _, want := range []string{"virtctl migrate vm-a -n " + f.Namespace, "kubectl drain " + f.Node, "--pod-selector='kubevirt.io!=hotplug-disk'", "v1.7.0"} {
		if !strings.Contains(fd.Action.Remedy, want) {
			t.Errorf("remedy lacks %q: %s", want, fd.Action.Remedy)
		}
	}
	// Not migratable: the remedy does not send the operator to a
	// migration that cannot happen.
	stuck := f.VMI("vm-b", f.WithHotplug("pvc-1"), f.Migratable(corev1.ConditionFalse))
	fs = only(Run(f.Snapshot(stuck, f.AttachmentPod("hp-volume-vm-b", f.LaunchedBy(stuck)), kubeVirtAt("v1.5.0", ""), guardNoWebhook), DefaultPolicy(), now), DrainEvictsHotplug, "vm-b", "")
	if len(fs) != 1 || strings.Contains(fs[0].Action.Remedy, "virtctl migrate") || !strings.Contains(fs[0].Action.Remedy, "not live-migratable") {
		t.Errorf("not migratable: %+v", fs)
	}
}

func TestGuardWebhookOf(t *testing.T) {
	cases := []struct {
		name string
		hook snapshot.GuardHook
		want bool
	}{
		{"KubeVirt's hot-plug interceptor -> guard", snapshot.GuardHook{Name: snapshot.HotplugEvictionWebhook, Rules: []string{"* pods/eviction"}, Path: snapshot.PodEvictionPath, Conditions: 1}, true},
		{"KubeVirt's launcher interceptor (only virt-launcher names) -> not", snapshot.GuardHook{Name: "virt-launcher-eviction-interceptor.kubevirt.io", Rules: []string{"* pods/eviction"}, Path: snapshot.PodEvictionPath, Conditions: 1}, false},
		{"an eviction webhook to the admitter without conditions -> guard", snapshot.GuardHook{Name: "x", Rules: []string{"CREATE pods/eviction"}, Path: snapshot.PodEvictionPath}, true},
		{"another path -> not", snapshot.GuardHook{Name: snapshot.HotplugEvictionWebhook, Rules: []string{"* pods/eviction"}, Path: "/virtualmachines-validate"}, false},
		{"rule for pods, not evictions -> not", snapshot.GuardHook{Name: snapshot.HotplugEvictionWebhook, Rules: []string{"CREATE pods"}, Path: snapshot.PodEvictionPath}, false},
		{"rule for DELETE only -> not", snapshot.GuardHook{Name: snapshot.HotplugEvictionWebhook, Rules: []string{"DELETE pods/eviction"}, Path: snapshot.PodEvictionPath}, false},
	}
	for _, c := range cases {
		if got := snapshot.GuardWebhookOf(c.hook); got != c.want {
			t.Errorf("%s: got %v", c.name, got)
		}
	}
}

// FuzzEvictionGuardOf: the guard's decision never panics, always says
// what it rests on, holds a finding by a reason exactly when it is not in
// effect, and never reports a release that has the guard, with it
// registered or unread, as unguarded (no false positive).
func FuzzEvictionGuardOf(fz *testing.F) {
	fz.Add("v1.9.0", true, true, true, "Fail", true)
	fz.Add("v1.5.0", false, false, false, "", true)
	fz.Add("v1.6.1-rc.1", true, false, false, "", true)
	fz.Add("garbage", true, true, true, "Ignore", false)
	fz.Fuzz(func(t *testing.T, version string, read, found, registered bool, policy string, known bool) {
		g := snapshot.FeatureGates{Known: known, KubeVirtVersion: version, Phase: "Deployed"}
		e := snapshot.EvictionGuard{Read: read, Found: found}
		if registered {
			e.Webhook, e.FailurePolicy = snapshot.HotplugEvictionWebhook, policy
		}
		if !read {
			e = snapshot.EvictionGuard{Err: "unread"}
		}
		got := EvictionGuardOf(g, e)
		if got.Basis == "" || (got.State == GuardInEffect) != (got.Reason == "") {
			t.Fatalf("%+v for %+v %+v", got, g, e)
		}
		v, err := snapshot.ParseKubeVirtVersion(version)
		has := known && err == nil && (v.Major > 1 || (v.Major == 1 && (v.Minor >= 7 || (v.Minor == 6 && v.Patch >= 1))))
		if has && (!read || !found || (registered && policy != "Ignore")) && got.State != GuardInEffect {
			t.Fatalf("release %s with the guard (read %v, registered %v, policy %q) decided %+v", version, read, registered, policy, got)
		}
		if read && registered && policy != "Ignore" && got.State != GuardInEffect {
			t.Fatalf("registered guard not in effect: %+v", got)
		}
		if read && found && !registered && got.State != GuardMissing {
			t.Fatalf("virt-api-validator without the guard's webhook, yet %+v", got)
		}
	})
}
