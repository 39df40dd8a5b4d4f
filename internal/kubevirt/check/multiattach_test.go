package check

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// waiting is a pod on node-2 that wants claim data.
func waiting(opts ...f.Option) any {
	return user("new", append([]f.Option{f.BoundTo("node-2"), f.CreatedAt(now.Add(-5 * time.Minute))}, opts...)...)
}

func TestMultiAttachConflict(t *testing.T) {
	cases := []struct {
		name  string
		items []any
		want  *outcome
	}{
		{name: "volume attached to a NotReady node with a pod there -> reported with the holder",
			items: storageWorld(node("node-1", notReady()), node("node-2"), stuck("old"), waiting(), va1("node-1")),
			want:  blocked(drift.SeverityWarning, drift.None, VolumeHeldElsewhere, "held by node node-1 (Ready=Unknown)", "used there by pod(s) old", "waits for claim data (PV pv-1")},
		{name: "volume attached to a gone node -> reported",
			items: storageWorld(node("node-2"), waiting(), va1("node-1")),
			want:  blocked(drift.SeverityWarning, drift.None, VolumeHeldElsewhere, "held by node node-1 (does not exist)", "no pod on it uses the volume")},
		{name: "volume attached where the pod runs -> no finding",
			items: storageWorld(node("node-2"), waiting(), f.VolumeAttachment("va-2", "node-2", "pv-1", f.Driver(f.CSIDriverName), f.Attached())),
			want:  noFinding()},
		{name: "ReadWriteMany volume -> no finding",
			items: []any{dataPVC(), dataPV(f.AccessModes(corev1.ReadWriteMany)), node("node-2"), waiting(), va1("node-1")},
			want:  noFinding()},
		{name: "pod younger than the grace -> no finding",
			items: storageWorld(node("node-2"), user("new", f.BoundTo("node-2"), f.CreatedAt(now.Add(-10*time.Second))), va1("node-1")),
			want:  noFinding()},
		{name: "driver needs no attach -> no finding",
			items: storageWorld(node("node-2"), waiting(), va1("node-1"), f.CSIDriver(f.CSIDriverName, false)),
			want:  noFinding()},
		{name: "unscheduled pod -> no finding",
			items: storageWorld(node("node-1"), user("new", f.BoundTo("")), va1("node-1")),
			want:  noFinding()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := FindMultiAttachConflicts(NewInput(f.Snapshot(tc.items...), DefaultPolicy(), now))
			assertOutcome(t, only(fs, MultiAttachConflict, "new", "data"), tc.want)
		})
	}
}

// Pods of other namespaces are counted, never named: not in the message,
// the evidence or the remedy.
func TestMultiAttachConflict_namespacePrivacy(t *testing.T) {
	secret := f.UserPod("secret-db", f.InNamespace("team-b"), f.Claims("data"))
	pvcB := f.PVC("data", f.InNamespace("team-b"), f.ClaimRef("", "pv-1"))
	pvB := dataPV(f.ClaimRef("team-b", "data"))
	waitingA := f.UserPod("new", f.InNamespace("team-a"), f.Claims("data"), f.BoundTo("node-2"), f.CreatedAt(now.Add(-5*time.Minute)))
	pvcA := f.PVC("data", f.InNamespace("team-a"), f.ClaimRef("", "pv-1"))
	s := f.Snapshot(pvB, pvcA, pvcB, node("node-1"), node("node-2"), secret, waitingA, va1("node-1"))
	fs := FindMultiAttachConflicts(NewInput(s, DefaultPolicy(), now))
	fs = only(fs, MultiAttachConflict, "new", "data")
	if len(fs) != 1 {
		t.Fatalf("want one finding, got %+v", fs)
	}
	text := fs[0].Message + strings.Join(fs[0].Evidence, "\n") + fs[0].Action.Remedy
	if strings.Contains(text, "secret-db") || strings.Contains(text, "team-b") {
		t.Errorf("a pod of another namespace is named:\n%s", text)
	}
	if !containsLine(fs[0].Evidence, "used there by 1 pod(s) in other namespaces") {
		t.Errorf("the other namespace's pod is not counted:\n%s", strings.Join(fs[0].Evidence, "\n"))
	}
}
