package check

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// vaWorld builds a random storage world around va-1 on node-1 from data.
func vaWorld(data []byte) ([]any, Policy) {
	bit := func(i int) bool { return i/8 < len(data) && data[i/8]&(1<<(i%8)) != 0 }
	items := []any{}
	if !bit(0) {
		items = append(items, dataPVC(), dataPV())
	}
	var nodeOpts []f.Option
	if bit(1) {
		nodeOpts = append(nodeOpts, notReady())
	}
	if bit(2) {
		nodeOpts = append(nodeOpts, f.OutOfService())
	}
	if bit(3) {
		nodeOpts = append(nodeOpts, f.CreatedAt(now.Add(-time.Duration(1+int(data[0]%90))*time.Minute)))
	}
	if bit(4) {
		nodeOpts = append(nodeOpts, f.CSINodeID(f.CSIDriverName, "id-2"))
	}
	if !bit(5) {
		items = append(items, node("node-1", nodeOpts...))
	} else if bit(6) {
		items = append(items, f.NodesGone{"node-1": now.Add(-time.Duration(len(data)) * 7 * time.Minute)})
	}
	var podOpts []f.Option
	if bit(7) {
		podOpts = append(podOpts, f.Terminating(now.Add(-time.Duration(len(data))*time.Minute)))
	}
	if bit(8) {
		podOpts = append(podOpts, f.Finished(now.Add(-time.Hour)))
	}
	if bit(9) {
		podOpts = append(podOpts, f.CreatedAt(now.Add(-time.Minute)))
	}
	if bit(10) {
		items = append(items, user("app", podOpts...))
	}
	var vaOpts []f.Option
	if bit(11) {
		vaOpts = append(vaOpts, f.AttachedToID("id-1"))
	}
	if bit(12) {
		vaOpts = append(vaOpts, f.Terminating(now.Add(-time.Hour)))
	}
	items = append(items, va1("node-1", vaOpts...))
	p := DefaultPolicy()
	p.Storage.ForceDetach = bit(13)
	if bit(14) {
		p.Storage.FenceGoneNodesAfter = 10 * time.Minute
	}
	return items, p
}

// FuzzStaleVolumeAttachment judges by the rules of non-graceful node
// shutdown (Kubernetes docs, "Node Shutdowns"): a volume may be taken from
// a node only once the node is known to be down. The evidence is an
// out-of-service taint on that very node (k8sOutOfServiceTainted), or the
// operator's rule for nodes gone long enough; a Node object re-created
// under the name (younger, or with another CSI node ID than the one the
// VolumeAttachment was attached to: the external-attacher records that ID in
// the VolumeAttachment annotation csi.alpha.kubernetes.io/node-id) is not the machine that
// holds the volume, so its taint is no evidence. Forced detach steps need
// the opt-in; pods to delete are never ones still running on a live node,
// and a finished pod holds no volume.
func FuzzStaleVolumeAttachment(fz *testing.F) {
	for _, seed := range [][]byte{{0, 0}, {0x06, 0x04}, {0x20, 0x44}, {0x84, 0x24}, {0x0e, 0x25}, {0xff, 0xff}, {0x28, 0x40, 1, 2}} {
		fz.Add(seed)
	}
	fz.Fuzz(func(t *testing.T, data []byte) {
		items, p := vaWorld(data)
		s := f.Snapshot(items...)
		fs := FindStaleVolumeAttachments(NewInput(s, p, now))
		for _, fd := range fs {
			assertWellFormed(t, fd)
			if !fd.Action.Safe {
				continue
			}
			var node *corev1.Node
			for i := range s.Nodes {
				if s.Nodes[i].Name == "node-1" {
					node = &s.Nodes[i]
				}
			}
			replaced := node != nil && (node.CreationTimestamp.After(now.Add(-2*time.Hour)) && node.CreationTimestamp.Time.After(f.Epoch()) ||
				k8sCSINodeID(node, f.CSIDriverName) == "id-2" && s.VolumeAttachments[0].Annotations["csi.alpha.kubernetes.io/node-id"] == "id-1")
			taint := node != nil && !replaced && k8sOutOfServiceTainted(node)
			goneLong := p.Storage.FenceGoneNodesAfter > 0 && (node == nil && !s.NodesGoneSince["node-1"].IsZero() && now.Sub(s.NodesGoneSince["node-1"]) >= p.Storage.FenceGoneNodesAfter ||
				replaced && now.Sub(node.CreationTimestamp.Time) >= p.Storage.FenceGoneNodesAfter)
			if !taint && !goneLong {
				t.Fatalf("safe %s without fencing evidence:\n%+v", fd.Action.Type, fd)
			}
			if fd.Action.Type != DeletePodsOnFencedNode && !p.Storage.ForceDetach {
				t.Fatalf("forced %s without the opt-in", fd.Action.Type)
			}
			for _, pod := range StaleHolders(s, p, now, "va-1") {
				if node != nil && !replaced && pod.DeletionTimestamp == nil {
					t.Fatalf("would delete pod %s, which is not being deleted, on a node that still exists", pod.Name)
				}
				if pod.Status.Phase == corev1.PodSucceeded {
					t.Fatalf("would delete finished pod %s: it holds nothing", pod.Name)
				}
			}
		}
	})
}
