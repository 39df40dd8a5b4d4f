package check

import (
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/protect/inuse"

	f "github.com/tether-dev/tether/internal/testing/fixture"
)

func deletingPVC(ago time.Duration, finalizers ...string) any {
	return f.PVC("data", f.ClaimRef("", "pv-1"), f.Finalizers(finalizers...), f.Terminating(now.Add(-ago)))
}

func TestBlockedDeletion(t *testing.T) {
	pvcProt := snapshot.PVCProtectionFinalizer
	cases := []struct {
		name   string
		items  []any
		object string
		want   *outcome
	}{
		{name: "PVC held by a finished pod -> names the pod and how to release it",
			items:  []any{deletingPVC(time.Hour, pvcProt), user("job", f.Finished(now.Add(-2*time.Hour)))},
			object: "data",
			want:   blocked(drift.SeverityInfo, drift.None, HeldByUsers, "pod job (phase Succeeded, finished) on node node-1 still references the claim")},
		{name: "PVC held by a running pod -> names the pod",
			items:  []any{deletingPVC(time.Hour, pvcProt), user("app")},
			object: "data",
			want:   blocked(drift.SeverityInfo, drift.None, HeldByUsers, "pod app (phase Running) on node node-1 uses the claim")},
		{name: "PVC referenced only by an unscheduled pod -> nobody holds it, the controller should release it",
			items:  []any{deletingPVC(time.Hour, pvcProt), user("pending", f.BoundTo(""))},
			object: "data",
			want:   blocked(drift.SeverityWarning, drift.None, FinalizerNotReleased, "no scheduled pod references the claim")},
		{name: "PVC deleted moments ago -> no finding",
			items:  []any{deletingPVC(10*time.Second, pvcProt), user("app")},
			object: "data", want: noFinding()},
		{name: "PVC with only an unknown finalizer -> no finding",
			items:  []any{deletingPVC(time.Hour)},
			object: "data", want: noFinding()},
		{name: "PVC held by tether.dev/in-use -> names the VMs, in the protection controller's words",
			items:  []any{deletingPVC(time.Hour, inuse.Finalizer), f.VM("vm-a", f.WithVolume("data", f.PVC("data")))},
			object: "data",
			want: blocked(drift.SeverityInfo, drift.None, HeldByUsers,
				inuse.PostponedMessage(inuse.Ref{Kind: inuse.KindPVC, Namespace: "default", Name: "data"}, []string{"vm-a"}))},
		{name: "PV held by pv-protection while its claim exists -> names the claim",
			items: []any{f.PVC("data", f.ClaimRef("", "pv-1")),
				dataPV(f.Finalizers(snapshot.PVProtectionFinalizer), f.Terminating(now.Add(-time.Hour)))},
			object: "pv-1",
			want:   blocked(drift.SeverityInfo, drift.None, HeldByUsers, "bound to claim default/data")},
		{name: "PV held by the attacher finalizer while attached -> names the VolumeAttachment",
			items:  []any{dataPV(f.Finalizers(snapshot.AttacherFinalizer(f.CSIDriverName)), f.Terminating(now.Add(-time.Hour))), va1("node-1")},
			object: "pv-1",
			want:   blocked(drift.SeverityInfo, drift.None, HeldByUsers, "VolumeAttachment va-1 to node node-1")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := FindBlockedDeletions(NewInput(f.Snapshot(tc.items...), DefaultPolicy(), now))
			assertOutcome(t, only(fs, BlockedDeletion, tc.object, ""), tc.want)
		})
	}
}

// A PV is in a namespace scope when the claim it is bound to is.
func TestBlockedDeletion_PVInNamespaceScope(t *testing.T) {
	items := []any{f.PVC("data", f.ClaimRef("", "pv-1")),
		dataPV(f.Finalizers(snapshot.PVProtectionFinalizer), f.Terminating(now.Add(-time.Hour)))}
	for _, c := range []struct {
		ns   string
		want bool
	}{{"default", true}, {"elsewhere", false}} {
		p := DefaultPolicy()
		p.Scope.Namespaces = []string{c.ns}
		got := only(FindBlockedDeletions(NewInput(f.Snapshot(items...), p, now)), BlockedDeletion, "pv-1", "") != nil
		if got != c.want {
			t.Errorf("scope %s: reported=%v, want %v", c.ns, got, c.want)
		}
	}
}
