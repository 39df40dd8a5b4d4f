package check

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

type danglingCase struct {
	name  string
	items []any
	// policy changes the policy; by default the check is requested by name.
	policy func(*Policy)
	kind   string // VirtualMachine (default) or VirtualMachineInstance
	volume string // default v1
	want   *outcome
}

func notRequested(p *Policy) { p.Checks = nil }

func runDanglingCases(t *testing.T, cases []danglingCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.Checks = []string{DanglingVolumeReference}
			if tc.policy != nil {
				tc.policy(&p)
			}
			kind, vol := tc.kind, tc.volume
			if kind == "" {
				kind = kindVM
			}
			if vol == "" {
				vol = "v1"
			}
			s := f.Snapshot(tc.items...)
			fs := onlyKind(Run(s, p, now), DanglingVolumeReference, kind, "a", vol)
			assertOutcome(t, fs, tc.want)
			got, ok := CheckDangling(s, p, now, "default", kind, "a", vol)
			if ok != (len(fs) == 1) || (ok && (got.ID != fs[0].ID || got.Action != fs[0].Action)) {
				t.Errorf("CheckDangling = %+v, %v; Run = %+v", got, ok, fs)
			}
		})
	}
}

func onlyKind(fs []drift.Finding, check, kind, name, volume string) []drift.Finding {
	var out []drift.Finding
	for _, fd := range only(fs, check, name, volume) {
		if fd.Object.Kind == kind {
			out = append(out, fd)
		}
	}
	return out
}

// stoppedVM is VM "a", stopped, with a boot disk on PVC "root" and the given
// volumes; its boot PVC exists.
func stoppedVM(opts ...f.Option) []any {
	base := []f.Option{f.WithVolume("root", f.PVC("root"))}
	return []any{f.VM("a", append(base, opts...)...), f.PVC("root"), hotplugGate()}
}

func snapshotGates(enabled, disabled []string) snapshot.FeatureGates {
	return gatesWith(enabled, disabled)
}

func hotPVC(claim string) f.Option { return f.WithVolume("v1", f.PVC(claim), f.Hotpluggable()) }
func hotDV(dv string) f.Option     { return f.WithVolume("v1", f.DataVolume(dv), f.Hotpluggable()) }

func dvIn(phase cdiv1.DataVolumePhase, opts ...f.Option) *cdiv1.DataVolume {
	return f.DataVolume("d1", append([]f.Option{f.DVPhase(phase)}, opts...)...)
}

// TestDanglingVMStopped: the VM direction for a stopped VM (no VMI).
func TestDanglingVMStopped(t *testing.T) {
	with := func(opts []any, more ...any) []any { return append(opts, more...) }
	runDanglingCases(t, []danglingCase{
		{name: "hot-plugged pvc present -> no finding", items: with(stoppedVM(hotPVC("c1")), f.PVC("c1")), want: noFinding()},
		{name: "hot-plugged pvc missing -> safe VMRemoveVolume", items: stoppedVM(hotPVC("c1")),
			want: &outcome{severity: drift.SeverityWarning, action: VMRemoveVolume, safe: true, evidence: []string{`VM default/a (uid `, `age 1h0m0s) spec volume "v1" uses PVC "c1" (hotpluggable)`, "PVC default/c1 does not exist"}}},
		{name: "hot-plugged pvc missing, not requested -> blocked NotRequested", items: stoppedVM(hotPVC("c1")), policy: notRequested,
			want: blocked(drift.SeverityWarning, VMRemoveVolume, drift.NotRequested)},
		// Kubernetes keeps an object with finalizers until the last one is
		// removed: a Terminating claim still exists. tether's own
		// protection keeps exactly this claim; removing the reference would
		// release it and finish the deletion (review F1).
		{name: "hot-plugged pvc being deleted, held by tether.dev/in-use -> blocked DeletionPostponed, no action",
			items: with(stoppedVM(hotPVC("c1")), f.PVC("c1", f.Terminating(now.Add(-5*60e9)), f.Finalizers("tether.dev/in-use"))),
			want:  blocked(drift.SeverityWarning, drift.None, DeletionPostponed, "PVC default/c1 (uid", "is being deleted", "5m0s ago", "deletion postponed by finalizers", "tether.dev/in-use")},
		{name: "hot-plugged pvc being deleted, held by pvc-protection and another -> blocked DeletionPostponed",
			items: with(stoppedVM(hotPVC("c1")), f.PVC("c1", f.Terminating(now), f.Finalizers("kubernetes.io/pvc-protection", "example.com/backup"))),
			want:  blocked(drift.SeverityWarning, drift.None, DeletionPostponed, "kubernetes.io/pvc-protection, example.com/backup")},
		{name: "pvc reference, pvc missing, its data volume being deleted -> blocked DeletionPostponed",
			items: with(stoppedVM(hotPVC("d1")), dvIn(cdiv1.Succeeded, f.Terminating(now), f.Finalizers("tether.dev/in-use"))),
			want:  blocked(drift.SeverityWarning, drift.None, DeletionPostponed, "PVC default/d1 does not exist", "DataVolume default/d1 still exists: its deletion is postponed", "tether.dev/in-use")},
		{name: "boot disk pvc missing -> report only, blocked VolumeNotHotpluggable", items: []any{f.VM("a", f.WithVolume("v1", f.PVC("c1")))},
			want: blocked(drift.SeverityWarning, drift.None, VolumeNotHotpluggable, "not hotpluggable")},
		{name: "data volume importing -> no finding (still provisioning)", items: with(stoppedVM(hotDV("d1")), dvIn(cdiv1.ImportInProgress)), want: noFinding()},
		{name: "data volume waiting for first consumer -> no finding", items: with(stoppedVM(hotDV("d1")), dvIn(cdiv1.WaitForFirstConsumer)), want: noFinding()},
		{name: "data volume phase unset -> no finding", items: with(stoppedVM(hotDV("d1")), dvIn("")), want: noFinding()},
		{name: "pvc reference, pvc missing, data volume of that name pending -> no finding", items: with(stoppedVM(hotPVC("d1")), dvIn(cdiv1.Pending)), want: noFinding()},
		{name: "pvc being deleted while its data volume re-provisions it -> no finding",
			items: with(stoppedVM(hotPVC("d1")), dvIn(cdiv1.ImportInProgress), f.PVC("d1", f.Terminating(now))), want: noFinding()},
		// A reference is removed only when no object of its name exists:
		// CDI retries a failed DataVolume and re-creates the claim of a
		// DataVolume that still exists.
		{name: "pvc reference, pvc missing, data volume of that name failed -> blocked StorageExists", items: with(stoppedVM(hotPVC("d1")), dvIn(cdiv1.Failed)),
			want: blocked(drift.SeverityWarning, VMRemoveVolume, StorageExists, "is in phase Failed", "DataVolume default/d1 (uid", "still exists")},
		{name: "data volume failed, its pvc exists -> blocked StorageExists", items: with(stoppedVM(hotDV("d1")), dvIn(cdiv1.Failed), f.PVC("d1")),
			want: blocked(drift.SeverityWarning, VMRemoveVolume, StorageExists, "DataVolume default/d1", "phase Failed", "PVC default/d1 (uid")},
		{name: "data volume being deleted -> blocked DeletionPostponed", items: with(stoppedVM(hotDV("d1")), dvIn(cdiv1.Succeeded, f.Terminating(now)), f.PVC("d1")),
			want: blocked(drift.SeverityWarning, drift.None, DeletionPostponed, "DataVolume default/d1", "is being deleted")},
		{name: "data volume missing, dataVolumeTemplate will create it -> no finding", items: stoppedVM(hotDV("d1"), f.WithDataVolumeTemplate("d1")), want: noFinding()},
		{name: "data volume missing, its pvc exists (garbage-collected) -> no finding", items: with(stoppedVM(hotDV("d1")), f.PVC("d1")), want: noFinding()},
		{name: "data volume and pvc missing -> safe", items: stoppedVM(hotDV("d1")),
			want: &outcome{severity: drift.SeverityWarning, action: VMRemoveVolume, safe: true, evidence: []string{"nor a dataVolumeTemplate"}}},
		{name: "data volume succeeded, pvc missing -> blocked StorageExists", items: with(stoppedVM(hotDV("d1")), dvIn(cdiv1.Succeeded)),
			want: blocked(drift.SeverityWarning, VMRemoveVolume, StorageExists, "is Succeeded but its PVC")},
		{name: "pvc reference, data volume succeeded, pvc missing -> blocked StorageExists", items: with(stoppedVM(hotPVC("d1")), dvIn(cdiv1.Succeeded)),
			want: blocked(drift.SeverityWarning, VMRemoveVolume, StorageExists, "is Succeeded but its PVC")},
		{name: "vm terminating -> blocked VMTerminating", items: stoppedVM(hotPVC("c1"), f.Terminating(now)), want: blocked(drift.SeverityWarning, VMRemoveVolume, VMTerminating)},
		{name: "removal already pending -> blocked RemovalPending", items: stoppedVM(hotPVC("c1"), f.PendingRemove("v1")), want: blocked(drift.SeverityWarning, VMRemoveVolume, RemovalPending)},
		{name: "addition pending -> blocked AdditionPending", items: stoppedVM(hotPVC("c1"), f.PendingAdd("v1", f.PVC("c1"))), want: blocked(drift.SeverityWarning, VMRemoveVolume, AdditionPending, "pending addvolume")},
		{name: "both hot-plug gates off -> blocked HotplugGateDisabled",
			items: []any{f.VM("a", hotPVC("c1")), snapshotGates(nil, []string{snapshot.DeclarativeHotplugVolumesGate})}, want: blocked(drift.SeverityWarning, VMRemoveVolume, HotplugGateDisabled)},
		{name: "gates unknown -> safe (the dry run decides)", items: []any{f.VM("a", hotPVC("c1")), f.GatesUnknown()}, want: safe(VMRemoveVolume)},
		{name: "namespace out of scope -> no finding", items: stoppedVM(hotPVC("c1")), policy: func(p *Policy) { p.Scope.Namespaces = []string{"other"} }, want: noFinding()},
		{name: "volume prefix out of scope -> no finding", items: stoppedVM(hotPVC("c1")), policy: func(p *Policy) { p.Scope.VolumePrefix = "pvc-" }, want: noFinding()},
		{name: "template labels not selected -> no finding", items: stoppedVM(hotPVC("c1")), policy: func(p *Policy) { p.Scope.Selector = labels.SelectorFromSet(labels.Set{"x": "y"}) }, want: noFinding()},
	})
}

// TestDanglingVMRunning: a VM with a VMI acts only on a provably unused reference.
func TestDanglingVMRunning(t *testing.T) {
	vm := f.VM("a", f.Running(), hotPVC("c1"))
	attached := f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", f.Claim("c1")))
	unused := f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", f.Claim("c1"), f.AttachPod(""), f.VolumePhase(kubevirtv1.VolumePending)))
	podA := f.AttachmentPod("hp-volume-a", f.Claims("c1"))
	gates := hotplugGate()
	runDanglingCases(t, []danglingCase{
		{name: "pvc being deleted, vmi has it attached -> blocked DeletionPostponed", items: []any{vm, attached, podA, f.PVC("c1", f.Terminating(now), f.Finalizers("kubernetes.io/pvc-protection")), gates},
			want: blocked(drift.SeverityWarning, drift.None, DeletionPostponed, "PVC default/c1 still exists", "kubernetes.io/pvc-protection")},
		{name: "pvc being deleted, vmi provably unused -> blocked DeletionPostponed", items: []any{vm, unused, f.PVC("c1", f.Terminating(now), f.Finalizers("tether.dev/in-use")), gates},
			want: blocked(drift.SeverityWarning, drift.None, DeletionPostponed)},
		{name: "pvc missing, vmi status Ready with its pod (hot-plug claim missing: critical) -> blocked VMRunning", items: []any{vm, attached, podA, gates},
			want: blocked(drift.SeverityCritical, VMRemoveVolume, VMRunning)},
		{name: "pvc missing, vmi status pending without pod, no pod mounts it (hot-plug claim missing: critical) -> safe VMRemoveVolume (provably unused)", items: []any{vm, unused, gates},
			want: criticalSafe(VMRemoveVolume)},
		{name: "pvc missing, status pending, a pod still mounts the claim (hot-plug claim missing: critical) -> blocked VMRunning", items: []any{vm, unused, f.AttachmentPod("hp-volume-old", f.Claims("c1")), gates},
			want: blocked(drift.SeverityCritical, VMRemoveVolume, VMRunning, "hp-volume-old")},
		{name: "pvc missing, unused, vmi migrating (hot-plug claim missing: critical) -> blocked VMIMigrating",
			items: []any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", f.Claim("c1"), f.AttachPod(""), f.VolumePhase(kubevirtv1.VolumePending)), f.Migrating()), gates},
			want:  blocked(drift.SeverityCritical, VMRemoveVolume, VMIMigrating)},
		{name: "pvc missing, unused, vmi terminating -> blocked VMITerminating",
			items: []any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", f.Claim("c1"), f.AttachPod(""), f.VolumePhase(kubevirtv1.VolumePending)), f.Terminating(now)), gates},
			want:  blocked(drift.SeverityWarning, VMRemoveVolume, VMITerminating)},
		{name: "pvc missing, vmi has no status for it yet, no pod -> safe", items: []any{vm, f.VMI("a", f.OwnedBy(vm)), gates}, want: safe(VMRemoveVolume)},
		{name: "no finding on the vmi for a volume the vm spec lists", items: []any{vm, attached, podA, gates}, kind: kindVMI, want: noFinding()},
	})
}

// TestDanglingVMI: references only the VMI has (VMI-only hot-plugs,
// standalone VMIs, VMs re-created under another UID).
func TestDanglingVMI(t *testing.T) {
	vm := f.VM("a", f.Running())
	pending := []f.HotplugOption{f.AttachPod(""), f.VolumePhase(kubevirtv1.VolumePending)}
	vmiOnly := func(opts ...f.Option) *kubevirtv1.VirtualMachineInstance {
		return f.VMI("a", append([]f.Option{f.OwnedBy(vm), f.WithHotplug("v1", pending...)}, opts...)...)
	}
	gates := hotplugGate()
	runDanglingCases(t, []danglingCase{
		{name: "vmi-only hot-plug, pvc missing, unused (hot-plug claim missing: critical) -> safe VMIRemoveVolume", items: []any{vm, vmiOnly(), gates}, kind: kindVMI, want: criticalSafe(VMIRemoveVolume)},
		{name: "vmi-only hot-plug, not requested (hot-plug claim missing: critical) -> blocked NotRequested", items: []any{vm, vmiOnly(), gates}, kind: kindVMI, policy: notRequested,
			want: blocked(drift.SeverityCritical, VMIRemoveVolume, drift.NotRequested)},
		{name: "vmi-only hot-plug, HotplugVolumes gate off (hot-plug claim missing: critical) -> blocked HotplugGateDisabled", items: []any{vm, vmiOnly(), f.Gates()}, kind: kindVMI,
			want: blocked(drift.SeverityCritical, VMIRemoveVolume, HotplugGateDisabled)},
		{name: "vmi-only hot-plug, gates unknown (hot-plug claim missing: critical) -> blocked HotplugGateUnknown", items: []any{vm, vmiOnly(), f.GatesUnknown()}, kind: kindVMI,
			want: blocked(drift.SeverityCritical, VMIRemoveVolume, HotplugGateUnknown)},
		{name: "vmi-only hot-plug, pvc missing, status Ready with pod (hot-plug claim missing: critical) -> blocked VolumeInUse",
			items: []any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), f.AttachmentPod("hp-volume-a", f.Claims("v1")), gates}, kind: kindVMI,
			want: blocked(drift.SeverityCritical, VMIRemoveVolume, VolumeInUse, `status shows volume "v1" attached`)},
		{name: "vmi-only hot-plug, vmi not running -> blocked VMINotRunning", items: []any{vm, vmiOnly(f.Phase(kubevirtv1.Scheduling)), gates}, kind: kindVMI,
			want: blocked(drift.SeverityWarning, VMIRemoveVolume, VMINotRunning)},
		{name: "vmi-only hot-plug, vmi migrating (hot-plug claim missing: critical) -> blocked VMIMigrating", items: []any{vm, vmiOnly(f.Migrating()), gates}, kind: kindVMI,
			want: blocked(drift.SeverityCritical, VMIRemoveVolume, VMIMigrating)},
		{name: "vmi-only hot-plug, vmi terminating -> blocked VMITerminating", items: []any{vm, vmiOnly(f.Terminating(now)), gates}, kind: kindVMI,
			want: blocked(drift.SeverityWarning, VMIRemoveVolume, VMITerminating)},
		{name: "vmi-only hot-plug, detaching (hot-plug claim missing: critical) -> blocked DetachInProgress",
			items: []any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", f.AttachPod(""), f.VolumePhase(kubevirtv1.HotplugVolumeDetaching))), gates}, kind: kindVMI,
			want: blocked(drift.SeverityCritical, VMIRemoveVolume, DetachInProgress)},
		{name: "status-only entry, claim missing -> report only, DetachInProgress",
			items: []any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", f.StatusOnly())), gates}, kind: kindVMI,
			want: blocked(drift.SeverityWarning, drift.None, DetachInProgress, "no longer lists")},
		{name: "vmi-only hot-plug of a provisioning data volume -> no finding",
			items: []any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", append(pending, f.FromDataVolume("d1"))...)), dvIn(cdiv1.CloneInProgress), gates}, kind: kindVMI,
			want: noFinding()},
		{name: "vmi hot-plug of a data volume that a vm's dataVolumeTemplate will create -> no finding",
			items: []any{f.VM("b", f.WithDataVolumeTemplate("d1")), f.VMI("a", f.WithHotplug("v1", append(pending, f.FromDataVolume("d1"))...)), gates}, kind: kindVMI,
			want: noFinding()},
		{name: "standalone vmi, boot disk pvc missing -> report only, VolumeNotHotpluggable",
			items: []any{f.VMI("a", f.WithVolume("v1", f.PVC("c1"))), gates}, kind: kindVMI,
			want: blocked(drift.SeverityWarning, drift.None, VolumeNotHotpluggable, "not hotpluggable")},
		{name: "standalone vmi hot-plug, pvc missing, unused (hot-plug claim missing: critical) -> safe (no gate needed)", items: []any{f.VMI("a", f.WithHotplug("v1", pending...)), f.Gates()}, kind: kindVMI,
			want: criticalSafe(VMIRemoveVolume)},
		{name: "vm re-created with a new uid: the old vmi's volume is the vmi's (hot-plug claim missing: critical) -> reported on the vmi",
			items: []any{f.VM("a", f.Running(), hotPVC("v1"), f.WithUID("new-uid")), f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", pending...)), gates}, kind: kindVMI,
			want: criticalSafe(VMIRemoveVolume)},
	})
}

// TestDanglingAttachmentPod: the reverse direction, a hot-plug volume status
// whose attachment pod is gone while the claim is there.
func TestDanglingAttachmentPod(t *testing.T) {
	vm := f.VM("a", f.Running())
	vmi := f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"))
	pvc, gates := f.PVC("v1"), hotplugGate()
	reportOnly := blocked(drift.SeverityInfo, drift.None, ClaimExists, "hp-volume-a", "does not exist", "PVC default/v1 exists")
	runDanglingCases(t, []danglingCase{
		{name: "claim and pod present -> no finding", items: []any{vm, vmi, pvc, f.AttachmentPod("hp-volume-a", f.Claims("v1")), gates}, kind: kindVMI, want: noFinding()},
		{name: "claim present, pod missing -> info, report only (ClaimExists)", items: []any{vm, vmi, pvc, gates}, kind: kindVMI, want: reportOnly},
		{name: "claim present, a pod of that name with another uid -> info, a different pod",
			items: []any{vm, vmi, pvc, f.AttachmentPod("hp-volume-a", f.Claims("v1"), f.WithUID("other-uid")), gates}, kind: kindVMI,
			want: blocked(drift.SeverityInfo, drift.None, ClaimExists, "exists with uid other-uid", "it is a different pod")},
		{name: "claim present, pod being replaced (terminating) -> no finding",
			items: []any{vm, vmi, pvc, f.AttachmentPod("hp-volume-a", f.Claims("v1"), f.Terminating(now)), gates}, kind: kindVMI, want: noFinding()},
		{name: "claim present, pod missing, vmi migrating -> no finding", items: []any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"), f.Migrating()), pvc, gates}, kind: kindVMI, want: noFinding()},
		{name: "claim present, pod missing, vmi not running -> no finding", items: []any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"), f.Phase(kubevirtv1.Succeeded)), pvc, gates}, kind: kindVMI, want: noFinding()},
		{name: "claim present, pod missing, volume still pending -> no finding",
			items: []any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", f.VolumePhase(kubevirtv1.VolumePending))), pvc, gates}, kind: kindVMI, want: noFinding()},
		{name: "claim present, pod missing, volume detaching -> no finding",
			items: []any{vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", f.VolumePhase(kubevirtv1.HotplugVolumeDetaching))), pvc, gates}, kind: kindVMI, want: noFinding()},
		{name: "claim present, pod missing, volume in the vm spec -> still reported on the vmi",
			items: []any{f.VM("a", f.Running(), hotPVC("v1")), f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")), pvc, gates}, kind: kindVMI, want: reportOnly},
		{name: "claim missing and pod missing (hot-plug claim missing: critical) -> one finding with both facts",
			items: []any{vm, vmi, gates}, kind: kindVMI,
			want: blocked(drift.SeverityCritical, VMIRemoveVolume, VolumeInUse, "PVC default/v1 does not exist", "hp-volume-a (uid")},
	})
}

func TestCheckDanglingSubjects(t *testing.T) {
	items := stoppedVM(hotPVC("c1"))
	s := f.Snapshot(items...)
	p := DefaultPolicy()
	for _, tc := range [][4]string{
		{"default", kindVM, "b", "v1"}, {"other", kindVM, "a", "v1"}, {"default", kindVM, "a", "nope"},
		{"default", kindVMI, "a", "v1"}, {"default", "Pod", "a", "v1"}, {"default", kindVM, "a", "root"},
	} {
		if _, ok := CheckDangling(s, p, now, tc[0], tc[1], tc[2], tc[3]); ok {
			t.Errorf("CheckDangling(%v) found something", tc)
		}
	}
	fd, ok := CheckDangling(s, p, now, "default", kindVM, "a", "v1")
	if !ok || fd.Object.UID != f.UID("VirtualMachine", "default", "a") {
		t.Fatalf("CheckDangling = %+v, %v", fd, ok)
	}
	// A VM re-created under the same name is another subject: the act
	// step compares UIDs and refuses.
	again, ok := CheckDangling(f.Snapshot(stoppedVM(hotPVC("c1"), f.WithUID("new"))...), p, now, "default", kindVM, "a", "v1")
	if !ok || again.Object.UID == fd.Object.UID || again.ID == fd.ID {
		t.Errorf("a re-created VM must give a finding with its own uid and id: %+v", again)
	}
	// The PVC re-created between plan and apply: nothing dangles any more.
	if _, ok := CheckDangling(f.Snapshot(append(items, f.PVC("c1", f.WithUID("fresh")))...), p, now, "default", kindVM, "a", "v1"); ok {
		t.Errorf("a re-created PVC must end the finding")
	}
}

func TestDanglingRemediesNameCommands(t *testing.T) {
	vm := f.VM("a", f.Running())
	s := f.Snapshot(
		f.VM("a", f.WithVolume("boot", f.PVC("gone-boot")), hotPVC("c1")),
		f.VMI("b", f.OwnedBy(vm), f.WithHotplug("v2"), f.WithHotplug("v3", f.StatusOnly())),
		f.VMI("c", f.WithHotplug("v4", f.Claim("here"))), f.PVC("here"),
	)
	var fs []drift.Finding
	for _, fd := range Run(s, DefaultPolicy(), now) {
		if fd.Check == DanglingVolumeReference {
			fs = append(fs, fd)
		}
	}
	if len(fs) < 5 {
		t.Fatalf("want at least 5 findings, got %d", len(fs))
	}
	for _, fd := range fs {
		assertWellFormed(t, fd)
		if !strings.Contains(fd.Action.Remedy, "kubectl") && !strings.Contains(fd.Action.Remedy, "virtctl") {
			t.Errorf("%s %s: remedy names no command: %q", fd.Object.Name, fd.Volume, fd.Action.Remedy)
		}
		if fd.Action.Safe {
			t.Errorf("%s %s: safe without the check being requested", fd.Object.Name, fd.Volume)
		}
	}
}

// TestDanglingPostponedRemedy: the finding on a claim whose deletion is
// postponed says why nothing is done and what the operator can do.
func TestDanglingPostponedRemedy(t *testing.T) {
	p := DefaultPolicy()
	p.Checks = []string{DanglingVolumeReference}
	items := append(stoppedVM(hotPVC("c1")), f.PVC("c1", f.Terminating(now), f.Finalizers("tether.dev/in-use")))
	fs := onlyKind(Run(f.Snapshot(items...), p, now), DanglingVolumeReference, kindVM, "a", "v1")
	if len(fs) != 1 {
		t.Fatalf("want one finding, got %+v", fs)
	}
	got := fs[0]
	for _, want := range []string{"cannot be undone", "persistentVolumeReclaimPolicy", "Retain", "virtctl removevolume a -n default --volume-name=v1 --persist", "never removes a reference to storage that still exists"} {
		if !strings.Contains(got.Action.Remedy, want) {
			t.Errorf("remedy lacks %q:\n%s", want, got.Action.Remedy)
		}
	}
	if !strings.Contains(got.Message, "postponed") || strings.Contains(got.Message, "dangling reference") {
		t.Errorf("message = %q", got.Message)
	}
}

// criticalSafe: a safe action on a reference that freezes its VMI's
// hot-plug work (pkg/virt-controller/watch/vmi/volume-hotplug.go:192-195).
func criticalSafe(a drift.ActionType) *outcome {
	return &outcome{severity: drift.SeverityCritical, action: a, safe: true, evidence: []string{"stops every hot-plug attach and detach of that VMI"}}
}

// A hot-plug reference whose PVC is missing on a launched VMI stops every
// hot-plug attach and detach of that VMI in virt-controller
// (pkg/virt-controller/watch/vmi/volume-hotplug.go:192-195;
// pkg/storage/types/pvc.go:223-251): it ranks above a cold-plug dangling
// reference of a stopped VM, which stops nothing until the VM starts.
func TestDangling_hotplugClaimMissingFreezesTheVMI(t *testing.T) {
	p := DefaultPolicy()
	p.Checks = []string{DanglingVolumeReference}
	cold := FindDanglingVolumeReferences(NewInput(f.Snapshot(stoppedVM(f.WithVolume("v1", f.PVC("c1")))...), p, now))
	vm := f.VM("a", f.Running())
	pending := []f.HotplugOption{f.AttachPod(""), f.VolumePhase(kubevirtv1.VolumePending)}
	hot := FindDanglingVolumeReferences(NewInput(f.Snapshot(vm, f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1", pending...)), hotplugGate()), p, now))
	notLaunched := FindDanglingVolumeReferences(NewInput(f.Snapshot(vm, f.VMI("a", f.OwnedBy(vm), f.Phase(kubevirtv1.Pending), f.WithHotplug("v1", pending...)), hotplugGate()), p, now))
	if len(cold) != 1 || len(hot) != 1 || len(notLaunched) != 1 {
		t.Fatalf("want one finding each, got %d, %d, %d", len(cold), len(hot), len(notLaunched))
	}
	if cold[0].Severity != drift.SeverityWarning || hot[0].Severity != drift.SeverityCritical || hot[0].Severity.Rank() <= cold[0].Severity.Rank() {
		t.Fatalf("severity: cold-plug %s, hot-plug %s; want warning < critical", cold[0].Severity, hot[0].Severity)
	}
	if !strings.Contains(hot[0].Message, "stops every hot-plug attach and detach of that VMI") {
		t.Errorf("message = %q", hot[0].Message)
	}
	if notLaunched[0].Severity != drift.SeverityWarning {
		t.Errorf("a VMI without a launched pod: %s, want warning", notLaunched[0].Severity)
	}
}
