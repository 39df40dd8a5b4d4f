package check

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/tether-dev/tether/internal/drift"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

type podCase struct {
	name   string
	items  []any
	policy func(*Policy)
	want   *outcome
}

func deletePods(p *Policy) { p.DeleteAttachmentPods = true }

func runPodCases(t *testing.T, cases []podCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			if tc.policy != nil {
				tc.policy(&p)
			}
			fs := Run(f.Snapshot(tc.items...), p, now)
			assertOutcome(t, only(fs, OrphanAttachmentPod, "hp-volume-a", ""), tc.want)
		})
	}
}

func podSafe() *outcome { return safe(DeleteAttachmentPod) }

func podBlocked(r drift.BlockReason, evidence ...string) *outcome {
	return blocked(drift.SeverityWarning, DeleteAttachmentPod, r, evidence...)
}

// TestOrphanAttachmentPodReferenced: a pod any VMI references gives no finding.
func TestOrphanAttachmentPodReferenced(t *testing.T) {
	vmi := f.VMI("a", f.WithHotplug("v1"))
	runPodCases(t, []podCase{
		{"pod named by its vmi's volume status -> no finding",
			[]any{vmi, f.AttachmentPod("hp-volume-a", f.LaunchedBy(vmi), f.Claims("v1"))}, deletePods, noFinding()},
		{"pod owned by vmi and named by it -> no finding",
			[]any{vmi, f.AttachmentPod("hp-volume-a", f.OwnedBy(vmi), f.Claims("v1"))}, deletePods, noFinding()},
		{"pod named by a vmi status without uid -> no finding",
			[]any{f.VMI("b", f.WithHotplug("v9", f.AttachPod("hp-volume-a", ""))), f.AttachmentPod("hp-volume-a", f.Claims("x"))}, deletePods, noFinding()},
		{"pod named by another vmi's status -> no finding",
			[]any{vmi, f.VMI("b", f.WithHotplug("v9", f.AttachPod("hp-volume-a", f.UID("Pod", "default", "hp-volume-a")))),
				f.AttachmentPod("hp-volume-a", f.LaunchedBy(vmi), f.Claims("x"))}, deletePods, noFinding()},
		{"pod is a migration target attachment pod -> no finding",
			[]any{f.VMI("b", f.Migrating(), f.TargetAttachmentPod("hp-volume-a")), f.AttachmentPod("hp-volume-a", f.Claims("x"))}, deletePods, noFinding()},
		{"pod terminating -> no finding",
			[]any{f.AttachmentPod("hp-volume-a", f.Claims("v1"), f.Terminating(now))}, deletePods, noFinding()},
	})
}

// TestOrphanAttachmentPodOrphans: unreferenced pods, and what holds their deletion.
func TestOrphanAttachmentPodOrphans(t *testing.T) {
	vmi := f.VMI("a")
	other := f.VMI("b", f.WithHotplug("v1"))
	stale := f.VMI("a", f.WithHotplug("v1", f.AttachPod("hp-volume-a", "old-uid")))
	recreated := f.VMI("a", f.WithUID("new-uid"))
	young := f.CreatedAt(now.Add(-30 * time.Second))
	runPodCases(t, []podCase{
		{"owner vmi gone, old, deletion requested -> warning, safe DeleteAttachmentPod",
			[]any{f.AttachmentPod("hp-volume-a", f.OwnedBy(vmi), f.Claims("c1"))}, deletePods, podSafe()},
		{"owner vmi gone, deletion not requested -> warning, blocked NotRequested",
			[]any{f.AttachmentPod("hp-volume-a", f.OwnedBy(vmi), f.Claims("c1"))}, nil, podBlocked(drift.NotRequested, "does not exist")},
		{"owner vmi re-created with a new uid -> warning, safe",
			[]any{recreated, f.AttachmentPod("hp-volume-a", f.OwnedBy(vmi), f.Claims("c1"))}, deletePods, podSafe()},
		{"owner vmi exists and names another pod -> warning, safe",
			[]any{f.VMI("a", f.WithHotplug("v1", f.Claim("c2"), f.AttachPod("hp-volume-zzz"))), f.AttachmentPod("hp-volume-a", f.OwnedBy(vmi), f.Claims("c1"))}, deletePods, podSafe()},
		{"vmi names the pod with another uid -> warning, safe",
			[]any{stale, f.AttachmentPod("hp-volume-a", f.Claims("c9"))}, deletePods, &outcome{severity: drift.SeverityWarning, action: DeleteAttachmentPod, safe: true, evidence: []string{"old-uid"}}},
		{"launcher pod not active in any vmi -> warning, safe",
			[]any{f.AttachmentPod("hp-volume-a", f.LaunchedBy(vmi), f.Claims("c1"))}, deletePods, podSafe()},
		{"no owner at all -> warning, safe",
			[]any{f.AttachmentPod("hp-volume-a", f.Claims("c1"))}, deletePods, podSafe()},
		{"pod younger than the minimum age -> warning, blocked AttachmentPodTooYoung",
			[]any{f.AttachmentPod("hp-volume-a", f.Claims("c1"), young)}, deletePods, podBlocked(AttachmentPodTooYoung, "below the minimum 2m0s")},
		{"pod younger than a lowered minimum age -> warning, safe",
			[]any{f.AttachmentPod("hp-volume-a", f.Claims("c1"), young)}, func(p *Policy) { p.DeleteAttachmentPods, p.MinAttachmentPodAge = true, 10*time.Second }, podSafe()},
		{"pod without creation timestamp -> warning, blocked AttachmentPodTooYoung",
			[]any{f.AttachmentPod("hp-volume-a", f.Claims("c1"), f.CreatedAt(time.Time{}))}, deletePods, podBlocked(AttachmentPodTooYoung, "age is unknown")},
		{"another vmi still lists the pod's claim -> warning, blocked VolumeStillListed",
			[]any{other, f.AttachmentPod("hp-volume-a", f.Claims("v1"))}, deletePods, podBlocked(VolumeStillListed, `VMI default/b still lists volume "v1"`)},
		{"a vmi lists the claim, pod young, not requested -> warning, blocked VolumeStillListed",
			[]any{other, f.AttachmentPod("hp-volume-a", f.Claims("v1"), young)}, nil, podBlocked(VolumeStillListed, "below the minimum", "not requested")},
		{"owner vmi migrating -> warning, blocked VMIMigrating",
			[]any{f.VMI("a", f.Migrating()), f.AttachmentPod("hp-volume-a", f.OwnedBy(vmi), f.Claims("c1"))}, deletePods, podBlocked(VMIMigrating)},
		{"owner vmi terminating -> warning, blocked VMITerminating",
			[]any{f.VMI("a", f.Terminating(now)), f.AttachmentPod("hp-volume-a", f.OwnedBy(vmi), f.Claims("c1"))}, deletePods, podBlocked(VMITerminating)},
	})
}

// TestOrphanAttachmentPodScope: the scope applies to pods too.
func TestOrphanAttachmentPodScope(t *testing.T) {
	vmi := f.VMI("a", f.Labels("cluster", "c1"))
	sel := func(p *Policy) {
		p.DeleteAttachmentPods = true
		p.Scope.Selector = labels.SelectorFromSet(labels.Set{"cluster": "c1"})
	}
	runPodCases(t, []podCase{
		{"namespace out of scope -> no finding",
			[]any{f.AttachmentPod("hp-volume-a", f.Claims("c1"))}, func(p *Policy) { p.Scope.Namespaces = []string{"other"} }, noFinding()},
		{"selector set, owner vmi unknown -> no finding",
			[]any{f.AttachmentPod("hp-volume-a", f.Claims("c1"))}, sel, noFinding()},
		{"selector set, owner vmi gone (same name, other uid) -> no finding",
			[]any{vmi, f.AttachmentPod("hp-volume-a", f.OwnedBy(f.VMI("a", f.WithUID("gone"))), f.Claims("c1"))}, sel, noFinding()},
		{"selector set, owner vmi labels match and it names another pod -> warning, safe",
			[]any{vmi, f.AttachmentPod("hp-volume-a", f.OwnedBy(vmi), f.Claims("c1"))}, sel, podSafe()},
		{"selector set, launcher-owned pod of a matching vmi that does not name it -> warning, safe",
			[]any{vmi, f.AttachmentPod("hp-volume-a", f.LaunchedBy(vmi), f.Claims("c1"))}, sel, podSafe()},
		{"selector set, owner vmi labels differ -> no finding",
			[]any{f.VMI("a", f.Labels("cluster", "c2")), f.AttachmentPod("hp-volume-a", f.LaunchedBy(f.VMI("a", f.Labels("cluster", "c2"))), f.Claims("c1"))}, sel, noFinding()},
		{"volume prefix does not match -> no finding",
			[]any{f.AttachmentPod("hp-volume-a", f.Claims("c1"))}, func(p *Policy) { p.Scope.VolumePrefix = "pvc-" }, noFinding()},
		{"volume prefix matches every volume -> warning",
			[]any{f.AttachmentPod("hp-volume-a", f.Claims("pvc-1", "pvc-2"))}, func(p *Policy) { p.Scope.VolumePrefix = "pvc-" }, podBlocked(drift.NotRequested)},
		{"volume prefix matches only some volumes -> no finding",
			[]any{f.AttachmentPod("hp-volume-a", f.Claims("pvc-1", "c2"))}, func(p *Policy) { p.Scope.VolumePrefix = "pvc-" }, noFinding()},
	})
}

func TestCheckAttachmentPodMatchesRun(t *testing.T) {
	s := f.Snapshot(f.AttachmentPod("hp-volume-a", f.Claims("c1")), f.AttachmentPod("hp-volume-b", f.Claims("c2"), f.Terminating(now)))
	p := DefaultPolicy()
	fs := Run(s, p, now)
	got, ok := CheckAttachmentPod(s, p, now, "default", "hp-volume-a")
	if !ok || len(fs) != 1 || got.ID != fs[0].ID {
		t.Fatalf("CheckAttachmentPod = %+v, %v; Run = %+v", got, ok, fs)
	}
	for _, name := range []string{"hp-volume-b", "hp-volume-c"} {
		if _, ok := CheckAttachmentPod(s, p, now, "default", name); ok {
			t.Errorf("CheckAttachmentPod(%s) must give no finding", name)
		}
	}
}

// A pod for a volume that the VMI spec lists but its status does not yet name
// (virt-controller created the pod, then could not write the status) must
// never be deleted.
func TestAttachmentPod_specVolumeNotYetInStatus_blocked(t *testing.T) {
	vm := f.VM("v", f.Running())
	vmi := f.VMI("v", f.OwnedBy(vm), f.WithVolume("x", f.PVC("x"), f.Hotpluggable()))
	pod := f.AttachmentPod("hp-volume-new", f.LaunchedBy(vmi), f.Claims("x"), f.CreatedAt(now.Add(-time.Hour)))
	p := DefaultPolicy()
	p.DeleteAttachmentPods = true
	fd, ok := CheckAttachmentPod(f.Snapshot(vm, vmi, pod, hotplugGate()), p, now, "default", "hp-volume-new")
	if ok && (fd.Action.Safe || fd.Action.BlockedBy != VolumeStillListed) {
		t.Fatalf("want no finding or blocked by %s, got %+v", VolumeStillListed, fd.Action)
	}
}
