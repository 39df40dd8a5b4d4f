package check

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
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

// Every row of the fixes table cites an upstream change, names the
// component, and either names releases that parse (ascending) or says
// "unverified".
func TestFixesTable(t *testing.T) {
	change := regexp.MustCompile(`^kubevirt/kubevirt#[0-9]+$`)
	seen := map[string]bool{}
	for _, fx := range Fixes() {
		if seen[fx.Mode] || fx.Mode == "" || fx.What == "" || fx.Component == "" {
			t.Errorf("row %+v: empty or repeated mode, what or component", fx)
		}
		seen[fx.Mode] = true
		if !change.MatchString(fx.Change) {
			t.Errorf("row %s cites %q, not an upstream change kubevirt/kubevirt#N", fx.Mode, fx.Change)
		}
		if len(fx.Releases) == 0 && !strings.HasPrefix(fx.Verified, "unverified") {
			t.Errorf("row %s names no release and does not say unverified", fx.Mode)
		}
		if len(fx.Releases) > 0 && (fx.Verified == "" || strings.HasPrefix(fx.Verified, "unverified")) {
			t.Errorf("row %s names releases but not how they were verified", fx.Mode)
		}
		var prev snapshot.KubeVirtVersion
		for i, r := range fx.Releases {
			v, err := snapshot.ParseKubeVirtVersion(r)
			if err != nil || v.Pre != "" || (i > 0 && !v.AtLeast(prev)) {
				t.Errorf("row %s: release %q does not parse, is a pre-release or is out of order", fx.Mode, r)
			}
			prev = v
		}
	}
	for _, m := range []string{FixReplugDetaching, FixDyingAttachPod, FixRemountAfterUnplug, FixMigrationMountLeak, FixHotplugPodEvicted} {
		if !seen[m] {
			t.Errorf("mode %s has no row", m)
		}
	}
}

// The verdict compares the running version with the releases: a backport
// counts only on its own line; a pre-release is older than its release.
func TestFixVerdict(t *testing.T) {
	fx := fixFor(FixReplugDetaching) // v1.8.2, v1.9.0
	for _, c := range []struct{ running, want string }{
		{"v1.7.4", "lacks upstream fix kubevirt/kubevirt#17139 (virt-controller, first in v1.8.2, v1.9.0): upgrade to v1.9.0"},
		{"v1.8.1", "upgrade to v1.8.2"},
		{"v1.8.2", "carries upstream fix"},
		{"v1.9.0-rc.0", "upgrade to v1.9.0"},
		{"v1.9.0", "carries upstream fix"},
		{"v1.10.3", "carries upstream fix"},
		{"", "the running KubeVirt version is unknown"},
	} {
		got := fx.verdict(snapshot.FeatureGates{Known: true, KubeVirtVersion: c.running})
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want it to contain %q", c.running, got, c.want)
		}
	}
	if got := fixFor(FixRemountAfterUnplug).verdict(snapshot.FeatureGates{Known: true, KubeVirtVersion: "v1.9.0"}); !strings.Contains(got, "no KubeVirt release carrying it is verified") {
		t.Errorf("unreleased fix: %q", got)
	}
}

// stuckCase is one row of the StuckHotplugPhase decision table. why cites
// the KubeVirt source the expected outcome follows from.
type stuckCase struct {
	name, why string
	items     []any
	sev       drift.Severity // "" for no finding
	evidence  []string
}

func hpPod(name string, opts ...f.Option) *corev1.Pod {
	return f.AttachmentPod(name, append([]f.Option{f.Labels(snapshot.AttachmentPodLabel, snapshot.AttachmentPodLabelValue)}, opts...)...)
}

func kvAt(version string) snapshot.FeatureGates {
	return snapshot.FeatureGates{Known: true, KubeVirtVersion: version, Phase: "Deployed"}
}

func TestStuckHotplugPhaseDecisions(t *testing.T) {
	replug := f.VMI("vm-a", f.Running(), f.OnNode("node-1"), f.WithHotplug("v1", f.VolumePhase(kubevirtv1.HotplugVolumeDetaching), f.AttachPod("hp-volume-new")))
	unplugged := f.VMI("vm-a", f.Running(), f.OnNode("node-1"), f.WithHotplug("v1", f.StatusOnly(), f.AttachPod("hp-volume-old")))
	kept := f.VMI("vm-a", f.Running(), f.OnNode("node-1"), f.WithHotplug("v1", f.AttachPod("hp-volume-old")))
	attaching := f.VMI("vm-a", f.Running(), f.OnNode("node-1"), f.WithHotplug("v1", f.VolumePhase(kubevirtv1.HotplugVolumeAttachedToNode), f.AttachPod("hp-volume-new")))
	old := f.CreatedAt(f.Epoch().Add(20 * time.Minute))   // 40m before now
	young := f.CreatedAt(f.Epoch().Add(55 * time.Minute)) // 5m before now
	for _, c := range []stuckCase{
		{name: "re-plugged volume Detaching for 40m on v1.8.1 -> warning, upgrade to v1.8.2",
			why:   "kubevirt #17139 (pkg/virt-controller/watch/vmi/storage.go): before it, a re-plug with a live old pod keeps HotplugVolumeDetaching",
			items: []any{replug, hpPod("hp-volume-new", old), kvAt("v1.8.1")}, sev: drift.SeverityWarning,
			evidence: []string{"expected to act next: virt-controller", "upgrade to v1.8.2", "Detaching since at least the creation of its attachment pod hp-volume-new (age 40m0s)"}},
		{name: "re-plugged volume Detaching on v1.9.0 -> warning, the fix is carried",
			why:   "v1.9.0 carries #17139 (git tag --contains 3f39290dcb)",
			items: []any{replug, hpPod("hp-volume-new", old), kvAt("v1.9.0")}, sev: drift.SeverityWarning,
			evidence: []string{"carries upstream fix kubevirt/kubevirt#17139"}},
		{name: "re-plugged volume Detaching for 5m -> nothing (within the grace)",
			why:   "a normal attach leaves Detaching within one virt-controller sync",
			items: []any{replug, hpPod("hp-volume-new", young), kvAt("v1.8.1")}},
		{name: "re-plugged volume Detaching on its old pod, deleted 5m ago, created 40m ago -> nothing (within the grace)",
			why:   "Detaching began when virt-controller deleted the old pod (v1.7.0 vmi.go:335-337); its creation dates the plug before the unplug",
			items: []any{replug, hpPod("hp-volume-new", old, f.Terminating(f.Epoch().Add(55*time.Minute))), kvAt("v1.7.0")}},
		{name: "re-plugged volume Detaching on its old pod, deleted 40m ago, held by a finalizer, v1.7.0 -> warning, upgrade to v1.9.0",
			why:   "kubevirt #16159 keeps the terminating pod as the current one before v1.7.1; #17139 resets the inherited Detaching from v1.8.2, v1.9.0",
			items: []any{replug, hpPod("hp-volume-new", old, f.Finalizers("example.com/hold"), f.Terminating(f.Epoch().Add(20*time.Minute))), kvAt("v1.7.0")}, sev: drift.SeverityWarning,
			evidence: []string{"still names attachment pod hp-volume-new, which the unplug deleted", "kubevirt/kubevirt#16159", "kept by finalizers example.com/hold",
				"for 40m0s", "upgrade KubeVirt to v1.9.0"}},
		{name: "re-plugged volume Detaching, attachment pod not listed -> info, duration unknown",
			why:   "VolumeStatus has no timestamp (kubevirt.io/api core/v1/types.go:417-438)",
			items: []any{replug, kvAt("v1.8.1")}, sev: drift.SeverityInfo,
			evidence: []string{"cannot be known"}},
		{name: "unplugged volume still Ready, its pod terminating for 40m -> warning, virt-handler on node-1, no verified release",
			why:   "kubevirt #18044 (pkg/virt-handler/hotplug-disk/mount.go): before it, mountFromPod re-mounts status volumes absent from the spec",
			items: []any{unplugged, hpPod("hp-volume-old", f.Terminating(f.Epoch().Add(20*time.Minute))), kvAt("v1.9.0")}, sev: drift.SeverityWarning,
			evidence: []string{"expected to act next: virt-handler on node node-1", "no KubeVirt release carrying it is verified"}},
		{name: "unplugged volume still Ready, pod not terminating -> info, duration unknown",
			why:   "nothing in the API dates the unplug",
			items: []any{unplugged, hpPod("hp-volume-old", old), kvAt("v1.9.0")}, sev: drift.SeverityInfo},
		{name: "unplugged volume Detaching -> nothing (a detach in progress)",
			why:   "Detaching is the phase of a volume leaving (types.go:509-510)",
			items: []any{f.VMI("vm-a", f.Running(), f.WithHotplug("v1", f.StatusOnly(), f.VolumePhase(kubevirtv1.HotplugVolumeDetaching)))}},
		{name: "wanted volume Ready, its pod terminating for 40m on v1.7.0 -> warning, upgrade to v1.7.1",
			why:   "kubevirt #16159 (pkg/virt-controller/watch/vmi/volume-hotplug.go:56-62): before it, a pod marked for deletion stays the current one",
			items: []any{kept, hpPod("hp-volume-old", f.Terminating(f.Epoch().Add(20*time.Minute))), kvAt("v1.7.0")}, sev: drift.SeverityWarning,
			evidence: []string{"upgrade to v1.7.1"}},
		{name: "wanted volume Ready, pod running -> nothing",
			why:   "Ready is the phase of an attached volume (types.go:507-508)",
			items: []any{kept, hpPod("hp-volume-old", old)}},
		{name: "wanted volume AttachedToNode, its pod running for 40m -> warning, virt-handler on node-1 must mount, no upstream change",
			why:   "virt-controller writes AttachedToNode once the attachment pod runs (volume-hotplug.go); virt-handler's next sync mounts it and writes MountedToPod (pkg/virt-handler/vm.go updateHotplugVolumeStatus)",
			items: []any{attaching, hpPod("hp-volume-new", f.RunningSince(f.Epoch().Add(20*time.Minute))), kvAt("v1.9.0")}, sev: drift.SeverityWarning,
			evidence: []string{"stays AttachedToNode", "expected to act next: virt-handler on node node-1", "no upstream KubeVirt change is known", "has been running since", "for 40m0s", "virt-handler on node node-1 (`kubectl get pods"}},
		{name: "wanted volume AttachedToNode, its pod running for 5m -> nothing (within the grace)",
			why:   "a mount follows the pod's start within one virt-handler sync",
			items: []any{attaching, hpPod("hp-volume-new", f.RunningSince(f.Epoch().Add(55*time.Minute))), kvAt("v1.9.0")}},
		{name: "wanted volume AttachedToNode, its pod's containers not reported running -> nothing",
			why:   "until the pod runs virt-handler has nothing to mount; no time to judge by",
			items: []any{attaching, hpPod("hp-volume-new", old), kvAt("v1.9.0")}},
		{name: "wanted volume AttachedToNode, its pod running but not named by UID (not ready) -> nothing",
			why: "virt-controller writes the pod's UID once its container is ready (storage.go:160-165); virt-handler mounts from that UID (hotplug-disk/mount.go:361-365): until then it has nothing to mount",
			items: []any{f.VMI("vm-a", f.Running(), f.OnNode("node-1"), f.WithHotplug("v1", f.VolumePhase(kubevirtv1.HotplugVolumeAttachedToNode), f.AttachPod("hp-volume-new", ""))),
				hpPod("hp-volume-new", f.RunningSince(f.Epoch())), kvAt("v1.9.0")}},
		{name: "wanted volume AttachedToNode, its pod not listed -> nothing",
			why:   "without the pod nothing dates the phase nor says the pod runs",
			items: []any{attaching, kvAt("v1.9.0")}},
		{name: "wanted volume AttachedToNode, a newer pod of that name -> nothing",
			why: "the status names the pod by UID too; another pod of the name says nothing of this one",
			items: []any{f.VMI("vm-a", f.Running(), f.OnNode("node-1"), f.WithHotplug("v1", f.VolumePhase(kubevirtv1.HotplugVolumeAttachedToNode), f.AttachPod("hp-volume-new", "uid-of-an-older-pod"))),
				hpPod("hp-volume-new", f.RunningSince(f.Epoch())), kvAt("v1.9.0")}},
		{name: "migrating VMI -> nothing (mid-lifecycle)",
			why:   "during a migration the target attachment pods and statuses change on their own",
			items: []any{f.VMI("vm-a", f.Running(), f.Migrating(), f.WithHotplug("v1", f.StatusOnly())), kvAt("v1.9.0")}},
		{name: "VMI not running -> nothing",
			why:   "virt-handler mounts hot-plugs only into a running launcher",
			items: []any{f.VMI("vm-a", f.Phase(kubevirtv1.Scheduled), f.WithHotplug("v1", f.StatusOnly())), kvAt("v1.9.0")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := FindStuckHotplugPhases(NewInput(f.Snapshot(c.items...), DefaultPolicy(), now))
			assertReportOnly(t, c.sev, c.evidence, fs, c.why)
		})
	}
}

func assertReportOnly(t *testing.T, sev drift.Severity, evidence []string, fs []drift.Finding, why string) {
	t.Helper()
	if sev == "" {
		if len(fs) != 0 {
			t.Fatalf("want no finding (%s), got %+v", why, fs)
		}
		return
	}
	if len(fs) != 1 {
		t.Fatalf("want 1 finding (%s), got %+v", why, fs)
	}
	fd := fs[0]
	assertWellFormed(t, fd)
	if fd.Severity != sev || fd.Action.Type != drift.None || fd.Action.Safe {
		t.Errorf("severity %s, action %+v; want %s, None, not safe (%s)", fd.Severity, fd.Action, sev, why)
	}
	all := strings.Join(append(fd.Evidence, fd.Message, fd.Action.Remedy), "\n")
	for _, e := range evidence {
		if !strings.Contains(all, e) {
			t.Errorf("finding lacks %q (%s):\n%s", e, why, all)
		}
	}
	if strings.Contains(fd.Action.Remedy, "kubectl delete pod") {
		t.Errorf("remedy deletes a pod: %s", fd.Action.Remedy)
	}
}

func TestSharedClaimConflictDecisions(t *testing.T) {
	rwo := f.PVC("data") // ReadWriteOnce
	rwx := f.PVC("data")
	rwx.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	vmA := f.VM("vm-a", f.WithVolume("d", rwo))
	vmB := f.VM("vm-b", f.WithVolume("d", rwo))
	vmiA := f.VMI("vm-a", f.OwnedBy(vmA), f.Running(), f.OnNode("node-1"), f.WithVolume("d", rwo))
	shared := f.VM("vm-b", f.WithVolume("d", rwo))
	yes := true
	shared.Spec.Template.Spec.Domain.Devices.Disks[0].Shareable = &yes
	pending := f.VM("vm-b", f.PendingAdd("hot", rwo))
	for _, c := range []stuckCase{
		{name: "RWO claim in two VMs, one running -> warning, holder and waiter named",
			why:   "ReadWriteOnce: mounted read-write by a single node (kubernetes.io/docs/concepts/storage/persistent-volumes/#access-modes)",
			items: []any{rwo, vmA, vmB, vmiA}, sev: drift.SeverityWarning,
			evidence: []string{"held by VM vm-a: VMI vm-a is Running on node node-1", "waited for by VM vm-b"}},
		{name: "RWO claim in two stopped VMs -> warning, only one can run",
			why:   "same access-mode rule; neither holds it yet",
			items: []any{rwo, vmA, vmB}, sev: drift.SeverityWarning, evidence: []string{"none runs now"}},
		{name: "RWX claim in two VMs -> nothing",
			why:   "ReadWriteMany: mounted read-write by many nodes (same page)",
			items: []any{rwx, vmA, vmB, vmiA}},
		{name: "RWO claim whose disk is shareable -> nothing",
			why:   "KubeVirt disks.shareable lets VMs share a disk (user-guide storage/disks_and_volumes, shareable disks)",
			items: []any{rwo, vmA, shared}},
		{name: "RWO claim in one VM and its own VMI -> nothing",
			why:   "a VM and its VMI are one user",
			items: []any{rwo, vmA, vmiA}},
		{name: "RWO claim in a VM and another VM's pending addvolume -> warning",
			why:   "virt-controller applies status.volumeRequests to the VM spec (pkg/virt-controller/watch/vm/vm.go)",
			items: []any{rwo, vmA, pending, vmiA}, sev: drift.SeverityWarning, evidence: []string{"addvolume request hot"}},
		{name: "claim not listed -> nothing",
			why:   "no PVC, no access modes to judge",
			items: []any{vmA, vmB}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := FindSharedClaimConflicts(NewInput(f.Snapshot(c.items...), DefaultPolicy(), now))
			assertReportOnly(t, c.sev, c.evidence, fs, c.why)
		})
	}
}

// interrupted returns a VM left by an interrupted volume migration from
// claim src to claim dst of volume "d", as vm.go:1637-1645 leaves it.
func interrupted(name, specClaim string, status corev1.ConditionStatus, migrated bool) *kubevirtv1.VirtualMachine {
	vm := f.VM(name, f.WithVolume("d", f.PVC(specClaim)))
	mig := kubevirtv1.UpdateVolumesStrategyMigration
	vm.Spec.UpdateVolumesStrategy = &mig
	if migrated {
		vm.Status.VolumeUpdateState = &kubevirtv1.VolumeUpdateState{VolumeMigrationState: &kubevirtv1.VolumeMigrationState{
			MigratedVolumes: []kubevirtv1.StorageMigratedVolumeInfo{{VolumeName: "d",
				SourcePVCInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: "src"}, DestinationPVCInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: "dst"}}}}}
	}
	vm.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineManualRecoveryRequired, Status: status,
		LastTransitionTime: metav1.NewTime(f.Epoch()), Reason: "VMI was removed or was final during the volume migration"}}
	return vm
}

func TestInterruptedVolumeMigrationDecisions(t *testing.T) {
	for _, c := range []stuckCase{
		{name: "ManualRecoveryRequired, spec on the destination -> critical, patch back to the source",
			why:   "vm.go:1268-1270 refuses to start; vm.go:1614-1634 clears the condition once the spec names the sources again",
			items: []any{interrupted("vm-a", "dst", corev1.ConditionTrue, true), f.PVC("src"), f.PVC("dst")}, sev: drift.SeverityCritical,
			evidence: []string{"source claim src (exists) holds the consistent data", `"value":"src"`, "/spec/template/spec/volumes/0/persistentVolumeClaim/claimName", "virtctl start vm-a"}},
		{name: "ManualRecoveryRequired, source claim gone -> critical, restore from backup",
			why:   "subresource.go:61: the sources are the consistent copies",
			items: []any{interrupted("vm-a", "dst", corev1.ConditionTrue, true), f.PVC("dst")}, sev: drift.SeverityCritical,
			evidence: []string{"source claim src (missing)", "restore the volume from a backup"}},
		{name: "ManualRecoveryRequired, no migrated volumes recorded -> critical, the condition cannot clear itself",
			why:   "vm.go:1606 returns early without volumeMigrationState",
			items: []any{interrupted("vm-a", "dst", corev1.ConditionTrue, false)}, sev: drift.SeverityCritical,
			evidence: []string{"lists no migrated volumes", "cannot clear ManualRecoveryRequired itself"}},
		{name: "ManualRecoveryRequired False -> nothing",
			why:   "lifecycle.go:63 refuses start only with the condition True",
			items: []any{interrupted("vm-a", "dst", corev1.ConditionFalse, true)}},
		{name: "migration recorded, no condition -> nothing (still running or already recovered)",
			why:   "vm.go:1637-1645 sets the condition only once the VMI is gone or final",
			items: []any{f.VM("vm-a")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := FindInterruptedVolumeMigrations(NewInput(f.Snapshot(c.items...), DefaultPolicy(), now))
			assertReportOnly(t, c.sev, c.evidence, fs, c.why)
		})
	}
}

// reportItems is a world in which each report-only check finds something
// (for the tests over every check).
func reportItems() []any {
	data := f.PVC("shared-data")
	vmA, vmB := f.VM("vm-s", f.WithVolume("d", data)), f.VM("vm-t", f.WithVolume("d", data))
	return []any{data, vmA, vmB,
		f.VMI("vm-s", f.OwnedBy(vmA), f.Running(), f.OnNode("node-1"), f.WithVolume("d", data), f.WithHotplug("v-stuck", f.StatusOnly(), f.AttachPod("hp-volume-stuck"))),
		hpPod("hp-volume-stuck", f.Terminating(f.Epoch())),
		interrupted("vm-m", "dst", corev1.ConditionTrue, true), f.PVC("src"), f.PVC("dst")}
}

// The report-only checks against oracles that encode KubeVirt's and
// Kubernetes' rules (each stated where it is read), over generated worlds.
// The oracles read the API objects directly and never call the checks.
func TestReportChecksKeepInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 1))
	worlds := 20000
	if testing.Short() {
		worlds = 3000
	}
	seen := map[string]int{}
	for i := 0; i < worlds; i++ {
		b := make([]byte, 32+r.IntN(160))
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		g := &gen{b: b}
		s, p, at := g.reportWorld()
		snap := snapshot.New(s)
		p.Checks = []string{StuckHotplugPhase, SharedClaimConflict, InterruptedVolumeMigration}
		for _, fd := range Run(snap, p, at) {
			seen[fd.Check]++
			if fd.Action.Type != drift.None || fd.Action.Safe {
				t.Fatalf("world %x: %s proposes %+v; report-only checks never act", b, fd.Check, fd.Action)
			}
			assertWellFormed(t, fd)
			var why string
			switch fd.Check {
			case StuckHotplugPhase:
				why = kvStuckWrong(&s, p, at, fd)
			case SharedClaimConflict:
				why = k8sSharedWrong(&s, fd)
			case InterruptedVolumeMigration:
				why = kvRecoveryWrong(&s, fd)
			}
			if why != "" {
				t.Fatalf("world %x: %s finding %s/%s %s: %s\n%+v", b, fd.Check, fd.Object.Kind, fd.Object.Name, fd.Volume, why, fd)
			}
		}
		// Completeness: a VM KubeVirt refuses to start (lifecycle.go:63, the
		// condition True) is always reported.
		for _, vm := range s.VMs {
			if vm.DeletionTimestamp == nil && kvRecoveryRequired(&vm) {
				if !slices.ContainsFunc(Run(snap, Policy{Checks: []string{InterruptedVolumeMigration}}, at), func(fd drift.Finding) bool { return fd.Object.Name == vm.Name }) {
					t.Fatalf("world %x: VM %s needs manual recovery and was not reported", b, vm.Name)
				}
			}
		}
	}
	for _, c := range []string{StuckHotplugPhase, SharedClaimConflict, InterruptedVolumeMigration} {
		if seen[c] == 0 {
			t.Errorf("no generated world made a %s finding", c)
		}
	}
	t.Logf("findings over %d worlds: %v", worlds, seen)
}

// kvRecoveryRequired: KubeVirt refuses to start a VM whose
// ManualRecoveryRequired condition is True (virt-api
// pkg/virt-api/rest/lifecycle.go:63-65, v1.9.0).
func kvRecoveryRequired(vm *snapshot.VM) bool {
	for _, c := range vm.Status.Conditions {
		if c.Type == "ManualRecoveryRequired" && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func kvRecoveryWrong(s *snapshot.Snapshot, fd drift.Finding) string {
	vm := findVM(s, fd.Namespace, fd.Object.Name)
	switch {
	case vm == nil:
		return "no such VM"
	case !kvRecoveryRequired(vm):
		return "KubeVirt does not refuse to start it (no ManualRecoveryRequired=True)"
	case fd.Severity != drift.SeverityCritical:
		return "a VM that cannot start is critical"
	}
	// The sources are the consistent copies (subresource.go:61): every
	// patch operation in the remedy points a migrated volume at its own
	// source claim.
	m := regexp.MustCompile(`-p '(\[[^']*\])'`).FindStringSubmatch(fd.Action.Remedy)
	if m == nil {
		return ""
	}
	var ops []struct{ Path, Value string }
	if err := json.Unmarshal([]byte(m[1]), &ops); err != nil {
		return "the remedy's patch is not JSON: " + err.Error()
	}
	for _, op := range ops {
		var i int
		if _, err := fmt.Sscanf(op.Path, "/spec/template/spec/volumes/%d/", &i); err != nil || i >= len(vm.Spec.Template.Spec.Volumes) {
			return "the patch names no volume of the VM: " + op.Path
		}
		name, src := vm.Spec.Template.Spec.Volumes[i].Name, ""
		for _, mv := range vm.Status.VolumeUpdateState.VolumeMigrationState.MigratedVolumes {
			if mv.VolumeName == name && mv.SourcePVCInfo != nil {
				src = mv.SourcePVCInfo.ClaimName
			}
		}
		if op.Value != src {
			return fmt.Sprintf("the patch points volume %s at %q, not at its source claim %q", name, op.Value, src)
		}
	}
	return ""
}

// k8sSharedWrong: a claim only one node may use has neither ReadWriteMany
// nor ReadOnlyMany (kubernetes.io/docs/concepts/storage/persistent-volumes,
// "Access Modes"); KubeVirt lets a disk marked shareable be used by several
// VMs. A finding needs such a claim, no shareable use, and two users.
func k8sSharedWrong(s *snapshot.Snapshot, fd drift.Finding) string {
	var pvc *corev1.PersistentVolumeClaim
	for i := range s.PVCs {
		if s.PVCs[i].Namespace == fd.Namespace && s.PVCs[i].Name == fd.Volume {
			pvc = &s.PVCs[i]
		}
	}
	if pvc == nil {
		return "no such claim"
	}
	modes := pvc.Status.AccessModes
	if len(modes) == 0 {
		modes = pvc.Spec.AccessModes
	}
	if len(modes) == 0 || slices.Contains(modes, corev1.ReadWriteMany) || slices.Contains(modes, corev1.ReadOnlyMany) {
		return "the claim may be used from several nodes, or its modes are unknown"
	}
	users := map[string]bool{}
	uses := func(vols []kubevirtv1.Volume, disks []kubevirtv1.Disk) (bool, bool) {
		used, shareable := false, false
		for _, v := range vols {
			c := ""
			if v.PersistentVolumeClaim != nil {
				c = v.PersistentVolumeClaim.ClaimName
			} else if v.DataVolume != nil {
				c = v.DataVolume.Name // CDI names the PVC after the DataVolume
			}
			if c != fd.Volume {
				continue
			}
			used = true
			for _, d := range disks {
				if d.Name == v.Name && d.Shareable != nil && *d.Shareable {
					shareable = true
				}
			}
		}
		return used, shareable
	}
	for _, vm := range s.VMs {
		if vm.Namespace != fd.Namespace || vm.DeletionTimestamp != nil || vm.Spec.Template == nil {
			continue
		}
		used, sh := uses(vm.Spec.Template.Spec.Volumes, vm.Spec.Template.Spec.Domain.Devices.Disks)
		for _, r := range vm.Status.VolumeRequests {
			if o := r.AddVolumeOptions; o != nil && o.VolumeSource != nil && o.VolumeSource.PersistentVolumeClaim != nil && o.VolumeSource.PersistentVolumeClaim.ClaimName == fd.Volume {
				used = true
			}
		}
		if sh {
			return "a VM marks the disk shareable"
		}
		if used {
			users["vm/"+vm.Name] = true
		}
	}
	for _, vmi := range s.VMIs {
		if vmi.Namespace != fd.Namespace || vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed {
			continue
		}
		used, sh := uses(vmi.Spec.Volumes, vmi.Spec.Domain.Devices.Disks)
		if sh {
			return "a VMI marks the disk shareable"
		}
		if used {
			users["vm/"+vmi.Name] = true // the generated VMIs are their VMs'
		}
	}
	if len(users) < 2 {
		return "fewer than two VMs use the claim"
	}
	return ""
}

// kvStuckWrong encodes when a hot-plug volume status is not stuck
// (kubevirt.io/api core/v1/types.go:495-512, v1.9.0, and the fixes the
// phases are read against): a VMI that does not run, or migrates, or is
// being deleted is mid-lifecycle; a volume in the spec in an attaching or
// attached phase whose attachment pod is not being deleted is fine; a
// volume gone from the spec in a detaching phase is leaving. A warning
// needs a timestamp at least the grace old; and the remedy never deletes
// the attachment pods of a live VMI (kubevirt #16711, #18862).
func kvStuckWrong(s *snapshot.Snapshot, p Policy, at time.Time, fd drift.Finding) string {
	vmi := findVMI(s, fd.Namespace, fd.Object.Name)
	if vmi == nil {
		return "no such VMI"
	}
	if vmi.Status.Phase != kubevirtv1.Running || vmi.DeletionTimestamp != nil || (vmi.Status.MigrationState != nil && !vmi.Status.MigrationState.Completed && !vmi.Status.MigrationState.Failed) {
		return "the VMI is not running steadily"
	}
	var vs *snapshot.VolumeStatus
	for i := range vmi.Status.VolumeStatus {
		if vmi.Status.VolumeStatus[i].Name == fd.Volume {
			vs = &vmi.Status.VolumeStatus[i]
		}
	}
	if vs == nil || vs.HotplugVolume == nil {
		return "no hot-plug status of that volume"
	}
	inSpec := slices.ContainsFunc(vmi.Spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == fd.Volume })
	var pod *corev1.Pod
	for i := range s.AttachmentPods {
		q := &s.AttachmentPods[i]
		if q.Namespace == vmi.Namespace && q.Name == vs.HotplugVolume.AttachPodName && q.UID == vs.HotplugVolume.AttachPodUID {
			pod = q
		}
	}
	dying := pod != nil && pod.DeletionTimestamp != nil
	var since time.Time
	switch {
	case inSpec && vs.Phase == "Detaching":
		// Detaching starts in the pass that deletes the old pod (v1.7.0
		// vmi.go:335-337); a pod not being deleted was made by the re-plug.
		if dying {
			since = pod.DeletionTimestamp.Time
		} else if pod != nil && !pod.CreationTimestamp.IsZero() {
			since = pod.CreationTimestamp.Time
		}
	case inSpec && dying && vs.Phase != "Detaching" && vs.Phase != "UnMountedFromPod":
		since = pod.DeletionTimestamp.Time
	case !inSpec && (vs.Phase == "Ready" || vs.Phase == "MountedToPod"):
		if dying {
			since = pod.DeletionTimestamp.Time
		}
	default:
		return "the phase is a normal one for a volume " + map[bool]string{true: "in the spec", false: "leaving the spec"}[inSpec]
	}
	grace := p.StuckPhaseGrace
	if grace == 0 {
		grace = DefaultStuckPhaseGrace
	}
	switch {
	case since.IsZero() && fd.Severity != drift.SeverityInfo:
		return "a warning without a time to measure"
	case !since.IsZero() && at.Sub(since) < grace:
		return "reported within the grace"
	case strings.Contains(fd.Action.Remedy, "kubectl delete pod"):
		return "the remedy deletes an attachment pod of a live VMI"
	}
	return ""
}
