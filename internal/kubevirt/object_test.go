package kubevirt

import (
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/drift"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// --object names one object, NAMESPACE/NAME, /NAME when cluster-scoped,
// or NAME where one namespace has it (a VM and its VMI share a name); a
// name two namespaces have asks for the namespace, and a name nothing read
// has is an error naming what was read.
func TestResolve(t *testing.T) {
	s := f.Snapshot(
		f.VM("web", f.InNamespace("a")), f.VMI("web", f.InNamespace("a")),
		f.VM("db", f.InNamespace("a")), f.VM("db", f.InNamespace("b")),
		f.PVC("data", f.InNamespace("b")),
		f.VolumeAttachment("csi-1", "node-1", "pv-1"),
	)
	found := []drift.Finding{{Namespace: "t", Object: drift.ObjectRef{Kind: "Node", Name: "guest-1"}}}
	for _, tc := range []struct {
		object, ns, name, err string
	}{
		{object: "a/web", ns: "a", name: "web"},
		{object: "web", ns: "a", name: "web"},
		{object: "b/db", ns: "b", name: "db"},
		{object: "data", ns: "b", name: "data"},
		{object: "/csi-1", ns: "", name: "csi-1"},
		{object: "csi-1", ns: "", name: "csi-1"},
		{object: "guest-1", ns: "t", name: "guest-1"},
		{object: "db", err: `--object "db" is in namespaces a, b: pass NAMESPACE/db`},
		{object: "b/web", err: `--object "b/web": nothing read in namespace b is named web (read: 3 VMs, 1 VMIs, 1 PVCs, 1 VolumeAttachments;`},
		{object: "nope", err: "nothing read in every namespace is named nope"},
		{object: "/web", err: "nothing read in the cluster scope is named web"},
		{object: "a/", err: "names nothing"},
		{object: "a/b/c", err: "names nothing"},
		{object: "", err: "names nothing"},
	} {
		ns, name, err := Resolve(s, found, tc.object)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.object, err, tc.err)
		case tc.err == "" && (err != nil || ns != tc.ns || name != tc.name):
			t.Errorf("%q: %q %q (%v), want %q %q", tc.object, ns, name, err, tc.ns, tc.name)
		}
	}
}
