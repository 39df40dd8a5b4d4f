package gonenodes

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fakeclient"
)

const recordNS = "tether-system"

func goneRecord(node string, created, since, lastSeen time.Time, mod ...func(*v1alpha1.Finding)) *v1alpha1.Finding {
	rec := &v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: recordNS, Name: "stalevolumeattachment-id1", CreationTimestamp: metav1.NewTime(created),
			ManagedFields:   []metav1.ManagedFieldsEntry{fakeclient.StatusBy(v1alpha1.FieldManager)},
			OwnerReferences: []metav1.OwnerReference{{Kind: check.KindVolumeAttachment, Name: "va-1", UID: "va-uid"}},
		},
		Spec: v1alpha1.FindingSpec{ID: "id1", Check: check.StaleVolumeAttachment, Node: node},
		Status: v1alpha1.FindingStatus{
			Phase: v1alpha1.PhaseBlocked, NodeGoneSince: &metav1.Time{Time: since}, LastObserved: &metav1.Time{Time: lastSeen},
		},
	}
	for _, m := range mod {
		m(rec)
	}
	return rec
}

func TestGoneNodes_seed(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	vas := []storagev1.VolumeAttachment{{ObjectMeta: metav1.ObjectMeta{Name: "va-1", UID: "va-uid"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1"}}}
	cases := []struct {
		name string
		recs []*v1alpha1.Finding
		want map[string]time.Time
		// ignored is a substring of why the record was not used, if it
		// had to be reported.
		ignored string
	}{
		{"watched missing for 49m, last a minute ago -> credited 49m back from now",
			[]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(50*time.Minute), ago(time.Minute))},
			map[string]time.Time{"n1": ago(49 * time.Minute)}, ""},
		{"two records of one node -> the longer watch",
			[]*v1alpha1.Finding{
				goneRecord("n1", ago(time.Hour), ago(20*time.Minute), ago(time.Minute)),
				goneRecord("n1", ago(time.Hour), ago(40*time.Minute), ago(time.Minute)),
			},
			map[string]time.Time{"n1": ago(39 * time.Minute)}, ""},
		{"a time before the record existed (hand-edited) -> counted from its creation",
			[]*v1alpha1.Finding{goneRecord("n1", ago(10*time.Minute), ago(24*time.Hour), ago(time.Minute))},
			map[string]time.Time{"n1": ago(9 * time.Minute)}, ""},
		{"nodeGoneSince in the future -> not used, reported",
			[]*v1alpha1.Finding{goneRecord("n1", ago(10*time.Minute), now.Add(time.Hour), ago(time.Minute))},
			map[string]time.Time{}, "nodeGoneSince"},
		// Review F6: a forged lastObserved in the future would pass the
		// blind-gap test and credit hours of absence.
		{"lastObserved in the future (forged) -> not used, reported",
			[]*v1alpha1.Finding{goneRecord("n1", ago(10*time.Minute), ago(10*time.Minute), now.Add(time.Hour))},
			map[string]time.Time{}, "lastObserved"},
		{"firstObserved in the future -> not used, reported",
			[]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(50*time.Minute), ago(time.Minute), func(f *v1alpha1.Finding) { f.Status.FirstObserved = &metav1.Time{Time: now.Add(time.Minute)} })},
			map[string]time.Time{}, "firstObserved"},
		{"in a tenant's namespace (where namespace users may write records) -> not used, reported",
			[]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(50*time.Minute), ago(time.Minute), func(f *v1alpha1.Finding) { f.Namespace = "team-a" })},
			map[string]time.Time{}, "not in the controller's namespace"},
		{"status edited by another field manager -> not used, reported",
			[]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(50*time.Minute), ago(time.Minute), func(f *v1alpha1.Finding) {
				f.ManagedFields = append(f.ManagedFields, fakeclient.StatusBy("kubectl-edit"))
			})},
			map[string]time.Time{}, "kubectl-edit"},
		{"last observed longer ago than the blind gap -> not used (the node may have come back)",
			[]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(50*time.Minute), ago(findingrecord.MaxBlindGap+time.Second))},
			map[string]time.Time{}, ""},
		{"never observed -> not used",
			[]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(50*time.Minute), now, func(f *v1alpha1.Finding) { f.Status.LastObserved = nil })},
			map[string]time.Time{}, ""},
		{"a resolved record -> not used",
			[]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(50*time.Minute), ago(time.Minute), func(f *v1alpha1.Finding) { f.Status.Phase = v1alpha1.PhaseResolved })},
			map[string]time.Time{}, ""},
		{"another check's record -> not used",
			[]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(50*time.Minute), ago(time.Minute), func(f *v1alpha1.Finding) { f.Spec.Check = check.MultiAttachConflict })},
			map[string]time.Time{}, ""},
		{"no node named -> not used",
			[]*v1alpha1.Finding{goneRecord("", ago(time.Hour), ago(50*time.Minute), ago(time.Minute))},
			map[string]time.Time{}, ""},
		{"no nodeGoneSince (the node existed) -> not used",
			[]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(50*time.Minute), ago(time.Minute), func(f *v1alpha1.Finding) { f.Status.NodeGoneSince = nil })},
			map[string]time.Time{}, ""},
		{"not named as the controller names it (hand-made) -> not used",
			[]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(50*time.Minute), ago(time.Minute), func(f *v1alpha1.Finding) { f.Name = "mine" })},
			map[string]time.Time{}, "not named"},
		{"not owned by a live VolumeAttachment -> not used",
			[]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(50*time.Minute), ago(time.Minute), func(f *v1alpha1.Finding) { f.OwnerReferences[0].UID = "other" })},
			map[string]time.Time{}, "not owned"},
		{"its VolumeAttachment is on another node -> not used",
			[]*v1alpha1.Finding{goneRecord("n2", ago(time.Hour), ago(50*time.Minute), ago(time.Minute))},
			map[string]time.Time{}, "not owned"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var g Nodes
			ignored := g.Seed(tc.recs, vas, recordNS, now)
			if (tc.ignored == "") != (len(ignored) == 0) || (tc.ignored != "" && !strings.Contains(ignored[0], tc.ignored)) {
				t.Fatalf("ignored %q, want a report containing %q", ignored, tc.ignored)
			}
			if len(g.since) != len(tc.want) {
				t.Fatalf("got %v, want %v", g.since, tc.want)
			}
			for n, w := range tc.want {
				if got, ok := g.since[n]; !ok || !got.Equal(w) {
					t.Fatalf("node %s: got %v, want %v", n, got, w)
				}
			}
			// Only the first seed counts.
			g.Seed([]*v1alpha1.Finding{goneRecord("n1", ago(time.Hour), ago(59*time.Minute), ago(time.Minute))}, vas, recordNS, now)
			if got := g.since["n1"]; len(tc.want) == 0 && !got.IsZero() {
				t.Fatal("a second seed was taken")
			}
		})
	}
}

func TestGoneNodes_observe(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	va := func(name, node string) storagev1.VolumeAttachment {
		return storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{NodeName: node}}
	}
	node := func(name string) corev1.Node { return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	var g Nodes

	// n1 is missing, n2 exists.
	g.Observe(&snapshot.Snapshot{Nodes: []corev1.Node{node("n2")}, VolumeAttachments: []storagev1.VolumeAttachment{va("a", "n1"), va("b", "n2")}}, t0)
	if len(g.since) != 1 || !g.since["n1"].Equal(t0) {
		t.Fatalf("first pass: %v", g.since)
	}
	// Still missing later: the first sighting stays.
	g.Observe(&snapshot.Snapshot{VolumeAttachments: []storagev1.VolumeAttachment{va("a", "n1")}}, t0.Add(time.Minute))
	if !g.since["n1"].Equal(t0) {
		t.Fatalf("a later pass moved the time: %v", g.since)
	}
	if d := g.NextFencing(5*time.Minute, t0.Add(time.Minute)); d != 4*time.Minute+time.Second {
		t.Fatalf("next fencing in %s, want 4m1s", d)
	}
	if d := g.NextFencing(0, t0); d != 0 {
		t.Fatalf("rule off: next fencing %s, want 0", d)
	}
	// Back (re-registered): forgotten, and a new absence starts a new clock.
	g.Observe(&snapshot.Snapshot{Nodes: []corev1.Node{node("n1")}, VolumeAttachments: []storagev1.VolumeAttachment{va("a", "n1")}}, t0.Add(2*time.Minute))
	if len(g.since) != 0 {
		t.Fatalf("a node seen again must be forgotten: %v", g.since)
	}
	g.Observe(&snapshot.Snapshot{VolumeAttachments: []storagev1.VolumeAttachment{va("a", "n1")}}, t0.Add(3*time.Minute))
	if !g.since["n1"].Equal(t0.Add(3 * time.Minute)) {
		t.Fatalf("a new absence must start a new clock: %v", g.since)
	}
	// Seen in an event between passes (it came back and went again): its
	// time is forgotten and a new absence starts a new clock.
	g.Touch("n1")
	g.Observe(&snapshot.Snapshot{VolumeAttachments: []storagev1.VolumeAttachment{va("a", "n1")}}, t0.Add(3*time.Minute+30*time.Second))
	if !g.since["n1"].Equal(t0.Add(3*time.Minute + 30*time.Second)) {
		t.Fatalf("a node seen in an event must start a new clock: %v", g.since)
	}
	// No attachment refers to it any more: forgotten.
	g.Observe(&snapshot.Snapshot{}, t0.Add(4*time.Minute))
	if len(g.since) != 0 {
		t.Fatalf("a node no attachment refers to must be forgotten: %v", g.since)
	}
}
