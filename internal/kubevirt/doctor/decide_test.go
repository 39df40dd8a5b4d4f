package doctor

import (
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// The oracles below are KubeVirt's rules, read from its source, not from
// tether's code:
//
//   - featuregate (v1.9.0 active.go:139,316; inactive.go:165,230):
//     DeclarativeHotplugVolumes is Beta (on unless disabled), HotplugVolumes
//     Deprecated (on only when listed); in v1.7.0 both are Alpha (on only
//     when listed); IsEnabled: listed > disabled > Beta default.
//   - pkg/virt-api/rest/volumes.go (v1.7.0 = v1.9.0): every volume call
//     needs one of the two gates (400 "Enable DeclarativeHotplugVolumes or
//     HotplugVolumes feature gate to use this API."); a VMI-level call on a
//     VM-owned VMI also needs HotplugVolumes (400 "VMI ns/name is owned by
//     a VM"); removing a volume the object lacks answers 409 "Unable to
//     remove volume [x] because it does not exist"; an object that does not
//     exist answers 404 after the gate check.
//   - kubevirt/hyperconverged-cluster-operator#4381: HCO lists
//     DeclarativeHotplugVolumes and no longer HotplugVolumes.

func kv(version string, enabled []string, disabled ...string) snapshot.FeatureGates {
	return snapshot.FeatureGates{Known: true, KubeVirtVersion: version, Phase: "Deployed", Enabled: enabled, Disabled: disabled}
}

const (
	hp   = snapshot.HotplugVolumesGate
	decl = snapshot.DeclarativeHotplugVolumesGate
)

func find(t *testing.T, lines []drift.Line, check string) drift.Line {
	t.Helper()
	for _, l := range lines {
		if l.Check == check {
			return l
		}
	}
	t.Fatalf("no %s line in %+v", check, lines)
	return drift.Line{}
}

func TestGatesAndUpgrade(t *testing.T) {
	noHCO := HCO{Known: true}
	withHCO := HCO{Known: true, Present: true, Name: "kubevirt-hyperconverged/kubevirt-hyperconverged"}
	for _, tc := range []struct {
		name          string
		gates         snapshot.FeatureGates
		hco           HCO
		gatesStatus   drift.Status
		upgradeStatus drift.Status
		upgradeSays   string
	}{
		{"v1.9 nothing listed -> declarative by default, no known change", kv("v1.9.0", nil), noHCO, drift.StatusOK, drift.StatusOK, "no change"},
		{"v1.9 HotplugVolumes listed -> deprecated warning, later removal", kv("v1.9.0", []string{hp}), noHCO, drift.StatusWarn, drift.StatusWarn, "deprecated"},
		{"v1.9 HotplugVolumes listed under HCO -> HCO drops it, VMI route closes", kv("v1.9.0", []string{hp}), withHCO, drift.StatusWarn, drift.StatusWarn, "the VMI-level route for VM-owned VMIs closes"},
		{"v1.9 declarative disabled, nothing listed -> no route at all", kv("v1.9.0", nil, decl), noHCO, drift.StatusFail, drift.StatusOK, "no change"},
		{"v1.7 HotplugVolumes only -> upgrade keeps routes (HotplugVolumes still listed)", kv("v1.7.0", []string{hp}), noHCO, drift.StatusOK, drift.StatusOK, "stay as they are"},
		{"v1.7 HotplugVolumes only under HCO -> VMI route closes and declarative sync starts", kv("v1.7.0", []string{hp}), withHCO, drift.StatusOK, drift.StatusWarn, "starts removing hot-plugs"},
		{"v1.7 nothing -> no route now, upgrade opens the VM route", kv("v1.7.0", nil), noHCO, drift.StatusFail, drift.StatusWarn, "the VM-level route opens"},
		{"v1.7 declarative only -> same after upgrade", kv("v1.7.0", []string{decl}), noHCO, drift.StatusOK, drift.StatusOK, "stay as they are"},
		{"v1.7 both -> same after upgrade", kv("v1.7.0", []string{hp, decl}), noHCO, drift.StatusOK, drift.StatusOK, "stay as they are"},
		{"v1.7 declarative only, HCO unknown -> upgrade not provable", kv("v1.7.0", []string{decl}), HCO{Err: "forbidden"}, drift.StatusOK, drift.StatusWarn, "unknown"},
		{"KubeVirt object unreadable -> FAIL, upgrade unknown", snapshot.FeatureGates{}, noHCO, drift.StatusFail, drift.StatusWarn, "unknown"},
		{"no observed version yet -> WARN", snapshot.FeatureGates{Known: true}, noHCO, drift.StatusWarn, drift.StatusWarn, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := Decide(Facts{Gates: tc.gates, HCO: tc.hco, Kube: Kube{NodesRead: true}})
			g, u := find(t, lines, CheckGates), find(t, lines, CheckUpgrade)
			if g.Status != tc.gatesStatus {
				t.Errorf("gates: got %s, want %s: %s", g.Status, tc.gatesStatus, g.Why)
			}
			if u.Status != tc.upgradeStatus || !strings.Contains(u.Why, tc.upgradeSays) {
				t.Errorf("upgrade: got %s %q, want %s saying %q", u.Status, u.Why, tc.upgradeStatus, tc.upgradeSays)
			}
			for _, l := range []drift.Line{g, u} {
				if l.Status != drift.StatusOK && l.Fix == "" {
					t.Errorf("%s is %s without a fix", l.Check, l.Status)
				}
			}
		})
	}
}

// Messages virt-api answers (pkg/virt-api/rest/volumes.go).
const (
	ansDoesNotExist = "virtualmachineinstance.kubevirt.io \"a\" is in conflict: Unable to remove volume [" + ProbeVolume + "] because it does not exist"
	ansNotRunning   = "VMI is not running"
	ansNoGate       = "Enable DeclarativeHotplugVolumes or HotplugVolumes feature gate to use this API."
	ansOwned        = "VMI ns/a is owned by a VM"
)

func TestRouteLines(t *testing.T) {
	declOnly := kv("v1.9.0", nil)
	both := kv("v1.9.0", []string{hp})
	for _, tc := range []struct {
		name  string
		gates snapshot.FeatureGates
		probe Probe
		want  drift.Status
	}{
		{"VM route answers does-not-exist -> OK", declOnly, Probe{Route: RouteVM, Subject: "ns/a", Exists: true, Code: 409, Message: ansDoesNotExist}, drift.StatusOK},
		{"VMI route on a stopped VMI answers not running -> open, OK", both, Probe{Route: RouteVMIOwned, Subject: "ns/a", Exists: true, Code: 409, Message: ansNotRunning}, drift.StatusOK},
		{"VMI route on a VM-owned VMI under declarative only -> 400 owned, the fallbacks fail, WARN", declOnly, Probe{Route: RouteVMIOwned, Subject: "ns/a", Exists: true, Code: 400, Message: ansOwned}, drift.StatusWarn},
		{"400 owned although HotplugVolumes is on -> WARN", both, Probe{Route: RouteVMIOwned, Subject: "ns/a", Exists: true, Code: 400, Message: ansOwned}, drift.StatusWarn},
		{"400 owned on the VM route -> no answer virt-api gives, FAIL", declOnly, Probe{Route: RouteVM, Subject: "ns/a", Exists: true, Code: 400, Message: ansOwned}, drift.StatusFail},
		{"no gate -> 400, FAIL", kv("v1.9.0", nil, decl), Probe{Route: RouteVM, Subject: "ns/a", Exists: true, Code: 400, Message: ansNoGate}, drift.StatusFail},
		{"absent standalone VMI, virt-api's not found -> past the gate, OK", declOnly, Probe{Route: RouteVMIStandalone, Subject: "default/" + absentName, Code: 404, Message: `virtualmachineinstance.kubevirt.io "` + absentName + `" not found`}, drift.StatusOK},
		{"absent VM-owned VMI under declarative only -> owner check closed by the gates, WARN", declOnly, Probe{Route: RouteVMIOwned, Subject: "default/" + absentName, Code: 404, Message: `virtualmachineinstance.kubevirt.io "` + absentName + `" not found`}, drift.StatusWarn},
		{"absent VM-owned VMI with HotplugVolumes -> OK", both, Probe{Route: RouteVMIOwned, Subject: "default/" + absentName, Code: 404, Message: `virtualmachineinstance.kubevirt.io "` + absentName + `" not found`}, drift.StatusOK},
		{"404 of an unserved API -> FAIL, not taken for past the gate", declOnly, Probe{Route: RouteVM, Subject: "default/" + absentName, Code: 404, Message: "the server could not find the requested resource"}, drift.StatusFail},
		{"open although the gates say closed -> WARN", kv("v1.9.0", nil, decl), Probe{Route: RouteVM, Subject: "ns/a", Exists: true, Code: 409, Message: ansDoesNotExist}, drift.StatusWarn},
		{"forbidden -> FAIL", declOnly, Probe{Route: RouteVM, Subject: "ns/a", Exists: true, Code: 403, Message: "forbidden"}, drift.StatusFail},
		{"no answer -> FAIL", declOnly, Probe{Route: RouteVM, Subject: "ns/a", Exists: true, Err: "connection refused"}, drift.StatusFail},
		{"object gone while probed -> WARN", declOnly, Probe{Route: RouteVM, Subject: "ns/a", Exists: true, Code: 404, Message: `virtualmachine.kubevirt.io "a" not found`}, drift.StatusWarn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := routeLine(tc.probe, tc.gates.Hotplug(), "")
			if l.Status != tc.want {
				t.Errorf("got %s, want %s: %s", l.Status, tc.want, l.Why)
			}
			if l.Status != drift.StatusOK && l.Fix == "" {
				t.Errorf("%s without a fix: %s", l.Status, l.Why)
			}
		})
	}
}

func tenant(name string, mod ...func(*Tenant)) Tenant {
	t := Tenant{Read: snapshot.Tenant{Name: name, Namespace: "infra", Reachable: true,
		Nodes: []snapshot.TenantNode{{Name: "w1", ProviderID: "kubevirt://vm1"}}}}
	for _, m := range mod {
		m(&t)
	}
	return t
}

func TestTenantLines(t *testing.T) {
	hpOn, declOnly := kv("v1.9.0", []string{hp}).Hotplug(), kv("v1.9.0", nil).Hotplug()
	vmiOnly := func(t *Tenant) { t.Route = RouteEvidence{VMIOnly: 2, Example: "volume pvc-a of VMI infra/vm1"} }
	inSpec := func(t *Tenant) { t.Route = RouteEvidence{InVMSpec: 3} }
	mayFence := func(t *Tenant) { t.Fence = &FenceAccess{} }
	noFence := func(t *Tenant) { t.Fence = &FenceAccess{Missing: []string{"patch nodes", "update nodes"}} }
	fenceErr := func(t *Tenant) { t.Fence = &FenceAccess{Err: "connection refused"} }
	for _, tc := range []struct {
		name   string
		t      Tenant
		gates  snapshot.HotplugGates
		fences bool
		want   map[string]drift.Status
	}{
		{"forbidden -> access FAIL, nothing else", tenant("g", noFence, func(t *Tenant) { t.Read.Reachable, t.Read.Error = false, "nodes is forbidden: User cannot list" }), declOnly, true,
			map[string]drift.Status{CheckTenantAccess: drift.StatusFail}},
		{"fencer rights, controller fences -> fence OK", tenant("g", inSpec, mayFence), declOnly, true,
			map[string]drift.Status{CheckTenantFence: drift.StatusOK}},
		{"no fencer rights, nothing fences -> fence OK (opt-in)", tenant("g", inSpec, noFence), declOnly, false,
			map[string]drift.Status{CheckTenantFence: drift.StatusOK}},
		{"no fencer rights, controller fences -> fence WARN", tenant("g", inSpec, noFence), declOnly, true,
			map[string]drift.Status{CheckTenantFence: drift.StatusWarn}},
		{"the question failed -> fence WARN", tenant("g", inSpec, fenceErr), declOnly, false,
			map[string]drift.Status{CheckTenantFence: drift.StatusWarn}},
		{"mapped, driver present, VM-level hot-plugs -> all OK", tenant("g", inSpec), declOnly, false,
			map[string]drift.Status{CheckTenantAccess: drift.StatusOK, CheckTenantNodes: drift.StatusOK, CheckTenantDriver: drift.StatusOK, CheckTenantRoute: drift.StatusOK}},
		{"a node naming no VM -> nodes WARN", tenant("g", inSpec, func(t *Tenant) { t.Read.Nodes = append(t.Read.Nodes, snapshot.TenantNode{Name: "w2"}) }), declOnly, false,
			map[string]drift.Status{CheckTenantNodes: drift.StatusWarn}},
		{"no CSIDriver -> FAIL and no route line", tenant("g", func(t *Tenant) { t.Read.DriverMissing = true }), declOnly, false,
			map[string]drift.Status{CheckTenantDriver: drift.StatusFail}},
		{"VMI-only hot-plugs while the VMI route is closed for VM-owned VMIs -> FAIL", tenant("g", vmiOnly), declOnly, false,
			map[string]drift.Status{CheckTenantRoute: drift.StatusFail}},
		{"VMI-only hot-plugs under HotplugVolumes -> WARN", tenant("g", vmiOnly), hpOn, false,
			map[string]drift.Status{CheckTenantRoute: drift.StatusWarn}},
		{"no hot-plug to read -> WARN", tenant("g"), declOnly, false,
			map[string]drift.Status{CheckTenantRoute: drift.StatusWarn}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := tenantLines(tc.t, tc.gates, tc.fences)
			got := map[string]drift.Status{}
			for _, l := range lines {
				got[l.Check] = l.Status
				if l.Status != drift.StatusOK && l.Fix == "" {
					t.Errorf("%s %s without a fix", l.Check, l.Status)
				}
			}
			for c, want := range tc.want {
				if got[c] != want {
					t.Errorf("%s: got %q, want %s (%+v)", c, got[c], want, lines)
				}
			}
			if !tc.t.Read.Reachable && len(lines) != 1 {
				t.Errorf("an unreachable tenant: want its access line alone, got %+v", lines)
			}
			if tc.t.Read.DriverMissing {
				if _, ok := got[CheckTenantRoute]; ok {
					t.Error("a route line for a tenant without the driver")
				}
			}
		})
	}
}

func TestKubeLines(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    Kube
		want map[string]drift.Status
	}{
		{"flag set -> OK", Kube{ControllerManagerFound: true, ControllerManagerArgs: []string{"kube-controller-manager", "--disable-force-detach-on-timeout=true"}, NodesRead: true},
			map[string]drift.Status{CheckForceDetach: drift.StatusOK, CheckOutOfService: drift.StatusOK}},
		{"bare flag -> OK", Kube{ControllerManagerFound: true, ControllerManagerArgs: []string{"--disable-force-detach-on-timeout"}, NodesRead: true},
			map[string]drift.Status{CheckForceDetach: drift.StatusOK}},
		{"flag false -> WARN", Kube{ControllerManagerFound: true, ControllerManagerArgs: []string{"--disable-force-detach-on-timeout=false"}, NodesRead: true},
			map[string]drift.Status{CheckForceDetach: drift.StatusWarn}},
		{"flag absent (the default) -> WARN", Kube{ControllerManagerFound: true, NodesRead: true},
			map[string]drift.Status{CheckForceDetach: drift.StatusWarn}},
		{"no controller-manager pod -> WARN, never OK", Kube{ControllerManagerNote: "none", NodesRead: true},
			map[string]drift.Status{CheckForceDetach: drift.StatusWarn}},
		{"taint on a Ready node -> WARN", Kube{NodesRead: true, OutOfService: []TaintedNode{{Name: "n1", Ready: true}}},
			map[string]drift.Status{CheckOutOfService: drift.StatusWarn}},
		{"taint on a NotReady node -> OK", Kube{NodesRead: true, OutOfService: []TaintedNode{{Name: "n1"}}},
			map[string]drift.Status{CheckOutOfService: drift.StatusOK}},
		{"nodes unreadable -> WARN", Kube{NodesError: "forbidden"},
			map[string]drift.Status{CheckOutOfService: drift.StatusWarn}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]drift.Status{}
			for _, l := range []drift.Line{forceDetachLine(tc.k), outOfServiceLine(tc.k)} {
				got[l.Check] = l.Status
			}
			for c, want := range tc.want {
				if got[c] != want {
					t.Errorf("%s: got %s, want %s", c, got[c], want)
				}
			}
		})
	}
}

func TestControllerLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    ControllerAccess
		want drift.Status
	}{
		{"all granted -> OK", ControllerAccess{Account: "sa", Asked: 12}, drift.StatusOK},
		{"an optional grant missing -> WARN", ControllerAccess{Account: "sa", Asked: 12, Missing: []MissingGrant{{Feature: "storage remediation", Grant: "delete pods", Fix: "apply x", Optional: true}}}, drift.StatusWarn},
		{"a required grant missing -> FAIL", ControllerAccess{Account: "sa", Asked: 12, Missing: []MissingGrant{{Feature: "protection", Grant: "patch persistentvolumeclaims", Fix: "apply y"}}}, drift.StatusFail},
		{"cannot ask -> WARN", ControllerAccess{Account: "sa", Err: "forbidden"}, drift.StatusWarn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if l := controllerLine(tc.a); l.Status != tc.want {
				t.Errorf("got %s, want %s: %s", l.Status, tc.want, l.Why)
			}
		})
	}
}

// The hot-plugs a gate change unplugs: named one by one; WARN while
// HotplugVolumes keeps them, FAIL when the declarative sync is in effect
// or the next known upgrade (HCO's, or KubeVirt v1.9 from an older release
// under HCO) brings it; OK when there are none.
func TestUnpersistedLine(t *testing.T) {
	noHCO := HCO{Known: true}
	withHCO := HCO{Known: true, Present: true, Name: "kubevirt-hyperconverged/kubevirt-hyperconverged"}
	two := []Unpersisted{
		{VMI: "ns/vm-a", Volume: "pvc-1", Claim: "claim pvc-1", Who: "made by tenant \"t1\"'s CSI driver"},
		{VMI: "ns/vm-b", Volume: "dv-2", Claim: "DataVolume dv-2", Who: "most likely a hand-made `virtctl addvolume` without --persist"},
	}
	for _, tc := range []struct {
		name   string
		gates  snapshot.FeatureGates
		hco    HCO
		hps    []Unpersisted
		scope  string
		status drift.Status
		says   []string
	}{
		{"none -> OK", kv("v1.9.0", []string{hp}), noHCO, nil, "", drift.StatusOK, []string{"unplugs nothing"}},
		{"v1.9 HotplugVolumes listed, no HCO -> WARN naming each", kv("v1.9.0", []string{hp}), noHCO, two, "", drift.StatusWarn,
			[]string{"VMI ns/vm-a volume pvc-1 (claim pvc-1; made by tenant", "VMI ns/vm-b volume dv-2 (DataVolume dv-2", "deprecated"}},
		{"v1.9 HotplugVolumes listed under HCO -> FAIL: HCO's next release drops it", kv("v1.9.0", []string{hp}), withHCO, two, "", drift.StatusFail, []string{"after HCO", "unplugs 2 hot-plug(s)"}},
		{"v1.7 HotplugVolumes only under HCO -> FAIL: the upgrade brings the sync", kv("v1.7.0", []string{hp}), withHCO, two, "", drift.StatusFail, []string{"after KubeVirt v1.9"}},
		{"v1.7 HotplugVolumes only, no HCO -> WARN (the upgrade keeps HotplugVolumes listed)", kv("v1.7.0", []string{hp}), noHCO, two, "", drift.StatusWarn, nil},
		{"v1.9 defaults: the sync in effect -> FAIL, being taken now", kv("v1.9.0", nil), noHCO, two, "", drift.StatusFail, []string{"is in effect", "is taking 2"}},
		{"VMs unreadable -> WARN, cannot be said", kv("v1.9.0", []string{hp}), noHCO, nil, "forbidden", drift.StatusWarn, []string{"cannot be said"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := find(t, Decide(Facts{Gates: tc.gates, HCO: tc.hco, Unpersisted: tc.hps, ScopeError: tc.scope, Kube: Kube{NodesRead: true}}), CheckUnpersisted)
			if l.Status != tc.status {
				t.Errorf("got %s, want %s: %s", l.Status, tc.status, l.Why)
			}
			for _, s := range tc.says {
				if !strings.Contains(l.Why, s) {
					t.Errorf("why %q does not say %q", l.Why, s)
				}
			}
		})
	}
	many := make([]Unpersisted, 12)
	for i := range many {
		many[i] = Unpersisted{VMI: "ns/vm", Volume: "v", Claim: "claim c", Who: "w"}
	}
	if l := find(t, Decide(Facts{Gates: kv("v1.9.0", []string{hp}), HCO: noHCO, Unpersisted: many}), CheckUnpersisted); !strings.Contains(l.Why, "and 2 more") {
		t.Errorf("twelve hot-plugs: %s", l.Why)
	}
}

// The drain of one node: OK with nothing to take or KubeVirt's guard in
// effect, FAIL naming each VMI and the commands to run first when nothing
// refuses the eviction (KubeVirt before v1.6.1/v1.7.0, or the guard's
// webhook missing), WARN when the guard fails open or nothing can be read;
// no line without --node.
func TestDrainLine(t *testing.T) {
	one := []DrainVMI{{VMI: "ns/vm-a", Pods: "hp-volume-abc", Volumes: "pvc-1, pvc-2", Strategy: "LiveMigrate", Migratable: "True"}}
	registered := snapshot.EvictionGuard{Read: true, Found: true, Webhook: snapshot.HotplugEvictionWebhook, FailurePolicy: "Fail"}
	absent := snapshot.EvictionGuard{Read: true, Found: true}
	for _, tc := range []struct {
		name   string
		d      Drain
		status drift.Status
		says   []string
		fix    []string
	}{
		{"nothing on the node -> OK", Drain{Node: "n1", NodeFound: true, Gates: kv("v1.5.0", nil), Guard: absent}, drift.StatusOK, []string{"takes no hot-plug"}, nil},
		{"v1.9 with the guard registered -> OK, the drain waits", Drain{Node: "n1", NodeFound: true, Gates: kv("v1.9.0", nil), Guard: registered, VMIs: one}, drift.StatusOK,
			[]string{"KubeVirt refuses their eviction", "hotplug-pod-eviction-interceptor.kubevirt.io", "VMI ns/vm-a"}, nil},
		{"v1.5 -> FAIL naming the VMI and what to run", Drain{Node: "n1", NodeFound: true, Gates: kv("v1.5.0", nil), Guard: absent, VMIs: one}, drift.StatusFail,
			[]string{"VMI ns/vm-a hot-plug(s) pvc-1, pvc-2 through hp-volume-abc (eviction strategy LiveMigrate, migratable True)", "predates"},
			[]string{"virtctl migrate vm-a -n ns", "kubectl drain n1", "--pod-selector='kubevirt.io!=hotplug-disk'"}},
		{"v1.9 without the guard's webhook -> FAIL", Drain{Node: "n1", NodeFound: true, Gates: kv("v1.9.0", nil), Guard: absent, VMIs: one}, drift.StatusFail, []string{"has no webhook"}, nil},
		{"guard with failure policy Ignore -> WARN", Drain{Node: "n1", NodeFound: true, Gates: kv("v1.9.0", nil), VMIs: one,
			Guard: snapshot.EvictionGuard{Read: true, Found: true, Webhook: snapshot.HotplugEvictionWebhook, FailurePolicy: "Ignore"}}, drift.StatusWarn, []string{"failure policy Ignore"}, nil},
		{"no such node -> WARN", Drain{Node: "n9", Gates: kv("v1.9.0", nil), Guard: registered}, drift.StatusWarn, []string{"there is no Node n9"}, nil},
		{"pods unreadable -> WARN, cannot be said", Drain{Node: "n1", NodeFound: true, Err: "forbidden"}, drift.StatusWarn, []string{"cannot be said"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.d
			l := find(t, Decide(Facts{Gates: kv("v1.9.0", nil), HCO: HCO{Known: true}, Kube: Kube{NodesRead: true}, Drain: &d}), CheckDrain)
			if l.Status != tc.status {
				t.Errorf("got %s, want %s: %s", l.Status, tc.status, l.Why)
			}
			for _, s := range tc.says {
				if !strings.Contains(l.Why, s) {
					t.Errorf("why %q does not say %q", l.Why, s)
				}
			}
			for _, s := range tc.fix {
				if !strings.Contains(l.Fix, s) {
					t.Errorf("fix %q does not say %q", l.Fix, s)
				}
			}
		})
	}
	for _, l := range Decide(Facts{Gates: kv("v1.9.0", nil), HCO: HCO{Known: true}}) {
		if l.Check == CheckDrain {
			t.Errorf("a drain line without --node: %+v", l)
		}
	}
}
