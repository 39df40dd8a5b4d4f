package check

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// The storage world of these tables: claim default/data bound to PV pv-1,
// attached to node-1 by VolumeAttachment va-1, all created at the epoch.
func dataPVC(opts ...f.Option) *corev1.PersistentVolumeClaim {
	return f.PVC("data", append([]f.Option{f.ClaimRef("", "pv-1")}, opts...)...)
}

func dataPV(opts ...f.Option) *corev1.PersistentVolume {
	return f.CSIPV("pv-1", "h-1", append([]f.Option{f.ClaimRef("default", "data")}, opts...)...)
}

func va1(node string, opts ...f.Option) any {
	return f.VolumeAttachment("va-1", node, "pv-1", append([]f.Option{f.Driver(f.CSIDriverName), f.Attached()}, opts...)...)
}

func node(name string, opts ...f.Option) any { return f.NodeObject(name, opts...) }

func notReady() f.Option { return f.NodeCondition(corev1.ConditionUnknown) }

// stuck is a pod whose deletion was asked for ten minutes ago; its
// container is still reported running (its kubelet never confirmed).
func stuck(name string, opts ...f.Option) any {
	return f.UserPod(name, append([]f.Option{f.Claims("data"), f.Terminating(now.Add(-10 * time.Minute))}, opts...)...)
}

func user(name string, opts ...f.Option) any {
	return f.UserPod(name, append([]f.Option{f.Claims("data")}, opts...)...)
}

func storageWorld(items ...any) []any { return append([]any{dataPVC(), dataPV()}, items...) }

func fenceGone(p *Policy)   { p.Storage.FenceGoneNodesAfter = 10 * time.Minute }
func forceDetach(p *Policy) { p.Storage.ForceDetach = true }

func TestStaleVolumeAttachment(t *testing.T) {
	gone := func(ago time.Duration) any { return f.NodesGone{"node-1": now.Add(-ago)} }
	cases := []struct {
		name   string
		items  []any
		policy []func(*Policy)
		want   *outcome
	}{
		{name: "running pod on Ready node -> no finding",
			items: storageWorld(node("node-1"), user("app"), va1("node-1")), want: noFinding()},
		{name: "pod terminating on Ready node -> no finding (its kubelet is working)",
			items: storageWorld(node("node-1"), stuck("app"), va1("node-1")), want: noFinding()},
		{name: "no pod on Ready node past grace -> reported, not fenced",
			items: storageWorld(node("node-1"), va1("node-1")),
			want:  blocked(drift.SeverityWarning, DeleteVolumeAttachment, NodeNotFenced, "no scheduled, running pod on node node-1 needs it", "Ready=True")},
		{name: "no pod, attachment younger than grace -> no finding",
			items: storageWorld(node("node-1"), va1("node-1", f.CreatedAt(now.Add(-time.Minute)))), want: noFinding()},
		{name: "finished pod on Ready node -> reported, not fenced",
			items: storageWorld(node("node-1"), user("job", f.Finished(now.Add(-time.Hour+time.Minute))), va1("node-1")),
			want:  blocked(drift.SeverityWarning, DeleteVolumeAttachment, NodeNotFenced, "pod default/job on the node has finished")},
		{name: "finished pod, finished within grace -> no finding",
			items: storageWorld(node("node-1"), user("job", f.Finished(now.Add(-time.Minute))), va1("node-1")), want: noFinding()},
		{name: "node NotReady, pod stuck terminating, no taint -> reported, no action",
			items: storageWorld(node("node-1", notReady()), stuck("app"), va1("node-1")),
			want:  blocked(drift.SeverityWarning, DeletePodsOnFencedNode, NodeNotFenced, "stuck terminating (deletion due 10m0s ago) on a node that is not Ready", "has no node.kubernetes.io/out-of-service taint")},
		{name: "node NotReady and out-of-service, pod stuck terminating -> delete the pod (normal path)",
			items: storageWorld(node("node-1", notReady(), f.OutOfService()), stuck("app"), va1("node-1")),
			want:  &outcome{severity: drift.SeverityWarning, action: DeletePodsOnFencedNode, safe: true, evidence: []string{"carries the node.kubernetes.io/out-of-service taint"}}},
		{name: "node out-of-service, pod not being deleted -> no finding (the pod still counts)",
			items: storageWorld(node("node-1", notReady(), f.OutOfService()), user("app"), va1("node-1")), want: noFinding()},
		{name: "node out-of-service, no pod -> delete attachment needs the opt-in",
			items: storageWorld(node("node-1", notReady(), f.OutOfService()), va1("node-1")),
			want:  blocked(drift.SeverityWarning, DeleteVolumeAttachment, drift.NotRequested, "needs the explicit opt-in")},
		{name: "node out-of-service, no pod, force-detach -> delete attachment",
			items: storageWorld(node("node-1", notReady(), f.OutOfService()), va1("node-1")), policy: []func(*Policy){forceDetach},
			want: safe(DeleteVolumeAttachment)},
		{name: "deletion hangs on the attacher finalizer, node out-of-service, force-detach -> remove finalizer",
			items:  storageWorld(node("node-1", notReady(), f.OutOfService()), va1("node-1", f.Terminating(now.Add(-time.Hour)))),
			policy: []func(*Policy){forceDetach},
			want:   &outcome{severity: drift.SeverityWarning, action: RemoveAttacherFinalizer, safe: true, evidence: []string{"the attacher has not confirmed the detach"}}},
		{name: "node gone, since unknown -> reported, not fenced",
			items: storageWorld(user("app"), va1("node-1")), policy: []func(*Policy){fenceGone},
			want: blocked(drift.SeverityWarning, DeletePodsOnFencedNode, NodeNotFenced, "node node-1 does not exist (since when is unknown)")},
		{name: "node gone long, rule off -> reported, not fenced",
			items: storageWorld(user("app"), va1("node-1"), gone(time.Hour)),
			want:  blocked(drift.SeverityWarning, DeletePodsOnFencedNode, NodeNotFenced, "rule that fences nodes gone for long is off")},
		{name: "node gone briefly, rule on -> reported, not fenced",
			items: storageWorld(user("app"), va1("node-1"), gone(time.Minute)), policy: []func(*Policy){fenceGone},
			want: blocked(drift.SeverityWarning, DeletePodsOnFencedNode, NodeNotFenced, "less than the 10m0s")},
		{name: "node gone long, rule on, pod still bound -> delete the pod",
			items: storageWorld(user("app"), va1("node-1"), gone(time.Hour)), policy: []func(*Policy){fenceGone},
			want: &outcome{severity: drift.SeverityWarning, action: DeletePodsOnFencedNode, safe: true, evidence: []string{"still bound to the missing node", "fenced by the operator's rule"}}},
		{name: "node gone long, rule on, no pod -> delete attachment needs the opt-in",
			items: storageWorld(va1("node-1"), gone(time.Hour)), policy: []func(*Policy){fenceGone},
			want: blocked(drift.SeverityWarning, DeleteVolumeAttachment, drift.NotRequested)},
		{name: "node re-created with the same name -> another node, not fenced",
			items: storageWorld(node("node-1", f.CreatedAt(now.Add(-5*time.Minute)), f.OutOfService()), user("app", f.CreatedAt(now.Add(-2*time.Minute))), va1("node-1")),
			want:  blocked(drift.SeverityWarning, DeleteVolumeAttachment, NodeNotFenced, "was re-created and is not the node the volume was attached to")},
		{name: "node re-created long ago, rule on, its own pod uses the volume -> not fenced (a Node of that name exists: the machine may be alive)",
			items:  storageWorld(node("node-1", f.CreatedAt(now.Add(-30*time.Minute))), user("app", f.CreatedAt(now.Add(-2*time.Minute))), va1("node-1")),
			policy: []func(*Policy){fenceGone},
			want:   blocked(drift.SeverityWarning, DeleteVolumeAttachment, NodeNotFenced, "may be alive")},
		{name: "node re-registered (deleted by mistake, kubelet alive), rule on, running pods -> never fenced, no pod deleted",
			items:  storageWorld(node("node-1", f.CreatedAt(now.Add(-30*time.Minute))), user("app", f.CreatedAt(now.Add(-2*time.Hour))), va1("node-1")),
			policy: []func(*Policy){fenceGone, func(p *Policy) { p.Storage.ForceDetach = true }},
			want:   blocked(drift.SeverityWarning, DeletePodsOnFencedNode, NodeNotFenced, "may be alive")},
		{name: "node with another CSI node ID -> another node",
			items: storageWorld(node("node-1", f.CSINodeID(f.CSIDriverName, "id-2")), user("app"), va1("node-1", f.AttachedToID("id-1"))),
			want:  blocked(drift.SeverityWarning, DeleteVolumeAttachment, NodeNotFenced, `now has CSI node ID "id-2", not "id-1"`)},
		{name: "same CSI node ID -> no finding",
			items: storageWorld(node("node-1", f.CSINodeID(f.CSIDriverName, "id-1")), user("app"), va1("node-1", f.AttachedToID("id-1"))), want: noFinding()},
		{name: "PV gone, node Ready -> reported, not fenced",
			items: []any{node("node-1"), va1("node-1")},
			want:  blocked(drift.SeverityWarning, DeleteVolumeAttachment, NodeNotFenced, "PersistentVolume pv-1 does not exist")},
		{name: "node NotReady, no taint, pod still running -> no finding",
			items: storageWorld(node("node-1", notReady()), user("app"), va1("node-1")), want: noFinding()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			for _, fn := range tc.policy {
				fn(&p)
			}
			fs := FindStaleVolumeAttachments(NewInput(f.Snapshot(tc.items...), p, now))
			assertOutcome(t, fs, tc.want)
			if len(fs) == 1 {
				again, ok := CheckVolumeAttachment(f.Snapshot(tc.items...), p, now, "va-1")
				if !ok || again.ID != fs[0].ID || again.Action != fs[0].Action {
					t.Errorf("CheckVolumeAttachment disagrees with the pass: %+v, %v", again.Action, ok)
				}
			}
		})
	}
}

func TestStaleVolumeAttachment_scope(t *testing.T) {
	items := storageWorld(node("node-1"), va1("node-1"))
	p := DefaultPolicy()
	p.Scope.Namespaces = []string{"other"}
	if fs := FindStaleVolumeAttachments(NewInput(f.Snapshot(items...), p, now)); len(fs) != 0 {
		t.Errorf("claim outside the namespace scope -> no finding, got %+v", fs)
	}
	p.Scope.Namespaces = []string{"default"}
	fs := FindStaleVolumeAttachments(NewInput(f.Snapshot(items...), p, now))
	if len(fs) != 1 || fs[0].Namespace != "default" {
		t.Fatalf("claim inside the scope -> one finding in its namespace, got %+v", fs)
	}
	p.Scope.Namespaces = []string{"default"}
	if fs := FindStaleVolumeAttachments(NewInput(f.Snapshot(node("node-1"), va1("node-1")), p, now)); len(fs) != 0 {
		t.Errorf("PV gone under a namespace scope -> not provably in scope, got %+v", fs)
	}
}

// A plan made from a late cache (node fenced, pod stuck) must not survive a
// live read that shows otherwise.
func TestStaleVolumeAttachment_liveReadContradicts(t *testing.T) {
	cached := f.Snapshot(storageWorld(node("node-1", notReady(), f.OutOfService()), stuck("app"), va1("node-1"))...)
	planned := FindStaleVolumeAttachments(NewInput(cached, DefaultPolicy(), now))
	if len(planned) != 1 || !planned[0].Action.Safe {
		t.Fatalf("cached view should give a safe plan, got %+v", planned)
	}
	if holders := StaleHolders(cached, DefaultPolicy(), now, "va-1"); len(holders) != 1 || holders[0].Name != "app" {
		t.Fatalf("holders = %v, want [app]", holders)
	}
	for name, live := range map[string][]any{
		"taint removed -> blocked":              storageWorld(node("node-1", notReady()), stuck("app"), va1("node-1")),
		"node Ready again -> no finding":        storageWorld(node("node-1", f.OutOfService()), stuck("app"), va1("node-1")),
		"pod no longer terminating -> needed":   storageWorld(node("node-1", notReady(), f.OutOfService()), user("app"), va1("node-1")),
		"attachment gone -> nothing to do":      storageWorld(node("node-1", notReady(), f.OutOfService()), stuck("app")),
		"node re-created meanwhile -> blocked ": storageWorld(node("node-1", f.CreatedAt(now.Add(-time.Minute)), f.OutOfService()), stuck("app"), va1("node-1")),
	} {
		t.Run(name, func(t *testing.T) {
			fresh, ok := CheckVolumeAttachment(f.Snapshot(live...), DefaultPolicy(), now, "va-1")
			if ok && fresh.Action.Safe && fresh.Action.Type == planned[0].Action.Type {
				t.Fatalf("live state contradicts the plan, yet the re-check still allows %s", fresh.Action.Type)
			}
		})
	}
}

// storageChecksWorld gives each storage check one finding: a pod on node-2
// waits for claim data, attached to the gone node-1, and claim old is
// stuck terminating under a finished pod.
func storageChecksWorld() []any {
	return storageWorld(node("node-2"), waiting(), va1("node-1"),
		f.PVC("old", f.Finalizers("kubernetes.io/pvc-protection"), f.Terminating(now.Add(-time.Hour))),
		f.UserPod("job", f.Claims("old"), f.Finished(now.Add(-2*time.Hour))))
}
