package observe_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// request is one request a gatherer made of the API.
type request struct {
	verb, namespace, label string
	gvk                    schema.GroupVersionKind
}

func (r request) String() string {
	return fmt.Sprintf("%s %s in %q label %q", r.verb, r.gvk.Kind, r.namespace, r.label)
}

// recording returns a client over objs that records every request made
// of it.
func recording(t *testing.T, objs ...client.Object) (client.Client, func() []request) {
	t.Helper()
	var mu sync.Mutex
	var got []request
	add := func(verb, ns, label string, o runtime.Object) {
		gvk, err := apiutil.GVKForObject(o, clients.Scheme())
		if err != nil {
			t.Errorf("%s of %T: %v", verb, o, err)
		}
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
		mu.Lock()
		defer mu.Unlock()
		got = append(got, request{verb: verb, namespace: ns, label: label, gvk: gvk})
	}
	store := fake.NewClientBuilder().WithScheme(clients.Scheme()).WithObjects(objs...).Build()
	c := interceptor.NewClient(store, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			add("get", key.Namespace, "", o)
			return c.Get(ctx, key, o, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			label := ""
			if lo.LabelSelector != nil {
				label = lo.LabelSelector.String()
			}
			add("list", lo.Namespace, label, list)
			return c.List(ctx, list, opts...)
		},
	})
	return c, func() []request {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
}

// readsAsTheTableSays fails unless the requests read exactly the resources
// of kinds, each as its row of the kind table says: a verb the row grants,
// in namespace ns (everywhere when the row reads it cluster-wide), with the
// row's label.
func readsAsTheTableSays(t *testing.T, what string, kinds snapshot.Kinds, ns string, reqs []request) {
	t.Helper()
	want := map[schema.GroupVersionKind]bool{}
	for _, row := range kinds.Rows() {
		for _, res := range row.Resources {
			want[res.GroupVersionKind] = true
		}
	}
	read := map[schema.GroupVersionKind]bool{}
	for _, r := range reqs {
		read[r.gvk] = true
		if !slices.ContainsFunc(kinds.Rows(), func(row snapshot.KindRow) bool { return explains(row, ns, r) }) {
			t.Errorf("%s: %s: no row of %s reads so", what, r, kinds)
		}
	}
	for gvk := range want {
		if !read[gvk] {
			t.Errorf("%s: declares %s but never reads %s", what, kinds, gvk.Kind)
		}
	}
}

// explains reports whether row reads as r did.
func explains(row snapshot.KindRow, ns string, r request) bool {
	for _, res := range row.Resources {
		in := ns
		if row.ClusterWide(res) {
			in = ""
		}
		if res.GroupVersionKind == r.gvk && r.label == row.Label && r.namespace == in && slices.Contains(row.Verbs(), r.verb) {
			return true
		}
	}
	return false
}

// world holds an object of every kind the table names.
func world() []client.Object {
	ns := fixture.InNamespace("ns")
	vm := fixture.VM("vm-a", ns, fixture.WithDataVolumeTemplate("root-dv"))
	vmi := fixture.VMI("vm-a", ns, fixture.OwnedBy(vm), fixture.Running(), fixture.WithHotplug("v1", fixture.AttachPod("hp-1")))
	return []client.Object{kubeVirt(), vm, vmi, fixture.DataVolume("root-dv", ns, fixture.DVPhase(cdiv1.Succeeded)), fixture.PVC("claim-1", ns),
		fixture.AttachmentPod("hp-1", ns, fixture.LaunchedBy(vmi)), fixture.UserPod("app-1", ns, fixture.BoundTo("node-1")),
		fixture.NodeObject("node-1"), fixture.CSIPV("pv-1", "h1"), fixture.VolumeAttachment("va-1", "node-1", "pv-1"),
		fixture.CSIDriver(fixture.CSIDriverName, true)}
}

// Every gatherer reads exactly the resources of the kinds it declares, as
// the kind table says: Observe (the audit) kind by kind, within a
// namespace and across all; VMI (the hot-plug loop and its re-check);
// Namespace (the namespace loop); Storage (the storage loop) and
// WithInfraOfNode (the fence loop).
func TestGatherersReadWhatTheKindTableSays(t *testing.T) {
	ctx := context.Background()
	c, requests := recording(t, world()...)
	for _, ns := range []string{"ns", ""} {
		for _, row := range snapshot.KindTable() {
			if _, err := observe.Observe(ctx, c, observe.Options{Namespace: ns, Kinds: row.Kind}); err != nil {
				t.Fatal(err)
			}
			readsAsTheTableSays(t, fmt.Sprintf("Observe %s in %q", row.Name, ns), row.Kind, ns, requests())
		}
		if _, err := observe.Observe(ctx, c, observe.Options{Namespace: ns}); err != nil {
			t.Fatal(err)
		}
		readsAsTheTableSays(t, fmt.Sprintf("Observe in %q", ns), snapshot.AllKinds, ns, requests())
		var s snapshot.Snapshot
		if err := observe.Storage(ctx, c, &s, observe.StorageRead{Namespace: ns}); err != nil {
			t.Fatal(err)
		}
		readsAsTheTableSays(t, fmt.Sprintf("Storage in %q", ns), observe.StorageKinds, ns, requests())
	}
	s, err := observe.VMI(ctx, c, "ns", "vm-a", observe.Tenants{})
	if err != nil {
		t.Fatal(err)
	}
	readsAsTheTableSays(t, "VMI", observe.VMIKinds, "ns", requests())
	if len(s.DataVolumes) != 1 {
		t.Errorf("VMI read %d DataVolumes, want the one of the VM's dataVolumeTemplates", len(s.DataVolumes))
	}
	if _, err := observe.Namespace(ctx, c, observe.StorageRead{Namespace: "ns", Kinds: observe.NamespaceKinds}); err != nil {
		t.Fatal(err)
	}
	readsAsTheTableSays(t, "Namespace", observe.NamespaceKinds, "ns", requests())
	tenant := fixture.Tenant("guest", fixture.NodesIn("ns", "vm-a"))
	if s, err = observe.WithInfraOfNode(ctx, c, tenant, "vm-a"); err != nil {
		t.Fatal(err)
	}
	readsAsTheTableSays(t, "WithInfraOfNode", observe.InfraOfNodeKinds, "ns", requests())
	if len(s.VMs)+len(s.VMIs) != 2 {
		t.Errorf("WithInfraOfNode read %d VMs and %d VMIs, want the node's", len(s.VMs), len(s.VMIs))
	}
}
