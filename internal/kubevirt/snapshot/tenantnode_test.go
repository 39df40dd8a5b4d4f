package snapshot_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

func TestResolveTenantNode(t *testing.T) {
	capk := func(vm, ns string) snapshot.TenantNode {
		return snapshot.TenantNode{Name: "worker-0", ProviderID: "kubevirt://" + vm, ClusterNamespace: ns}
	}
	with := func(n snapshot.TenantNode, f func(*snapshot.TenantNode)) snapshot.TenantNode { f(&n); return n }
	for _, tc := range []struct {
		name    string
		node    snapshot.TenantNode
		infraNS string
		byName  bool
		want    string // "ns/vm", or "unknown: <part of the reason>", or "ambiguous ns/vm"
	}{
		{"providerID and cluster-namespace annotation", capk("vm-1", "tenant-a"), "", false, "tenant-a/vm-1"},
		{"providerID, namespace from the tenant", capk("vm-1", ""), "tenant-a", false, "tenant-a/vm-1"},
		{"providerID, no namespace anywhere", capk("vm-1", ""), "", false, "unknown: no annotation cluster.x-k8s.io/cluster-namespace"},
		{"providerID without a VM name", capk("", "tenant-a"), "", false, "unknown: does not name a VM"},
		{"providerID of another provider is no source", snapshot.TenantNode{Name: "w", ProviderID: "aws:///eu-west-1a/i-0abc"}, "tenant-a", false, "unknown: has no providerID"},
		{"infra-vm annotations", snapshot.TenantNode{Name: "w", InfraVMName: "vm-2", InfraVMNamespace: "tenant-a"}, "", false, "tenant-a/vm-2"},
		{"one infra-vm annotation only", snapshot.TenantNode{Name: "w", InfraVMName: "vm-2"}, "tenant-a", false, "unknown: only one of the annotations"},
		{"CSINode node ID only", snapshot.TenantNode{Name: "w", CSINodeID: "tenant-a/vm-3"}, "", false, "tenant-a/vm-3"},
		{"malformed CSINode node ID", snapshot.TenantNode{Name: "w", CSINodeID: "vm-3"}, "", false, "unknown: is not <namespace>/<vm>"},
		{"all sources agree", with(capk("vm-1", "tenant-a"), func(n *snapshot.TenantNode) {
			n.InfraVMName, n.InfraVMNamespace, n.CSINodeID = "vm-1", "tenant-a", "tenant-a/vm-1"
		}), "tenant-a", false, "tenant-a/vm-1"},
		{"providerID and CSINode disagree on the VM", with(capk("vm-1", "tenant-a"), func(n *snapshot.TenantNode) { n.CSINodeID = "tenant-a/vm-9" }), "", false, "unknown: names tenant-a/vm-9"},
		{"providerID and annotations disagree on the namespace", with(capk("vm-1", "tenant-a"), func(n *snapshot.TenantNode) {
			n.InfraVMName, n.InfraVMNamespace = "vm-1", "tenant-b"
		}), "", false, "unknown: names tenant-b/vm-1"},
		{"VM outside the tenant's infra namespace", capk("vm-1", "tenant-b"), "tenant-a", false, "ambiguous tenant-a/vm-1"},
		{"no source, name matching off", snapshot.TenantNode{Name: "vm-4"}, "tenant-a", false, "unknown: has no providerID"},
		{"no source, name matching on", snapshot.TenantNode{Name: "vm-4"}, "tenant-a", true, "tenant-a/vm-4"},
		{"no source, name matching on but no namespace", snapshot.TenantNode{Name: "vm-4"}, "", true, "unknown: matching by name needs"},
		{"name matching never overrides a source", capk("vm-1", "tenant-a"), "tenant-a", true, "tenant-a/vm-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := snapshot.ResolveTenantNode(&tc.node, tc.infraNS, tc.byName)
			var got string
			switch {
			case m.Ambiguous:
				got = "ambiguous " + m.VM.String()
			case m.Unknown != "":
				got = "unknown: " + m.Unknown
			default:
				got = m.VM.String()
				if m.How == "" {
					t.Error("a resolved node says not how")
				}
			}
			if got != tc.want && !(strings.HasPrefix(tc.want, "unknown: ") && strings.HasPrefix(got, "unknown: ") && strings.Contains(got, strings.TrimPrefix(tc.want, "unknown: "))) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewTenantNode_kubeletVolumesOfTheDriver(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}
	node.Status.VolumesInUse = []corev1.UniqueVolumeName{"kubernetes.io/csi/csi.kubevirt.io^pvc-a", "kubernetes.io/csi/other.csi^pvc-b", "kubernetes.io/aws-ebs/vol-1"}
	node.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "kubernetes.io/csi/csi.kubevirt.io^pvc-c"}, {Name: "kubernetes.io/csi/csi.kubevirt.io^pvc-a"}}
	cn := &storagev1.CSINode{Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "other.csi", NodeID: "x"}, {Name: "csi.kubevirt.io", NodeID: "tenant-a/vm-1"}}}}
	n := snapshot.NewTenantNode(node, cn, "csi.kubevirt.io")
	if strings.Join(n.InUse, ",") != "pvc-a,pvc-c" || n.CSINodeID != "tenant-a/vm-1" {
		t.Fatalf("in use %v, node ID %q", n.InUse, n.CSINodeID)
	}
}

// FuzzResolveTenantNode checks the resolver against the driver's own rule,
// restated here (kubevirt/csi-driver resolveNodeID and ControllerPublish):
// the plugin's node ID is "<ns>/<vm>" from providerID kubevirt://<vm> plus
// the cluster-namespace annotation, else from the two infra-vm
// annotations; a running plugin's ID is in the CSINode; the controller
// attaches to <vm> in its infra namespace. A resolved node must be that VM
// for every source present, and in the infra namespace.
func FuzzResolveTenantNode(f *testing.F) {
	f.Add("w", "kubevirt://vm", "a", "", "", "a/vm", "a", false)
	f.Add("vm", "", "", "vm", "b", "", "", true)
	f.Fuzz(func(t *testing.T, name, providerID, clusterNS, vmName, vmNS, csiID, infraNS string, byName bool) {
		n := snapshot.TenantNode{Name: name, ProviderID: providerID, ClusterNamespace: clusterNS, InfraVMName: vmName, InfraVMNamespace: vmNS, CSINodeID: csiID}
		m := snapshot.ResolveTenantNode(&n, infraNS, byName)
		if m.Unknown != "" {
			return // refusing is always allowed
		}
		vm := m.VM
		if vm.Name == "" || vm.Namespace == "" {
			t.Fatalf("resolved to %q", vm)
		}
		if infraNS != "" && vm.Namespace != infraNS {
			t.Fatalf("resolved to %s outside the infra namespace %s", vm, infraNS)
		}
		sources := 0
		if rest, ok := strings.CutPrefix(providerID, "kubevirt://"); ok {
			sources++
			ns := clusterNS
			if ns == "" {
				ns = infraNS
			}
			if rest != vm.Name || ns != vm.Namespace {
				t.Fatalf("providerID %q (namespace %q) but resolved to %s", providerID, ns, vm)
			}
		}
		if vmName != "" || vmNS != "" {
			sources++
			if vmName != vm.Name || vmNS != vm.Namespace {
				t.Fatalf("annotations name %s/%s but resolved to %s", vmNS, vmName, vm)
			}
		}
		if csiID != "" {
			sources++
			if csiID != vm.Namespace+"/"+vm.Name {
				t.Fatalf("CSINode node ID %q but resolved to %s", csiID, vm)
			}
		}
		if sources == 0 && (!byName || vm.Name != name || vm.Namespace != infraNS) {
			t.Fatalf("no source and name matching %v, yet resolved to %s", byName, vm)
		}
	})
}
