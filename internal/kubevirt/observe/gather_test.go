package observe_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// readers returns two readers over the same objects: one that behaves like
// the manager's cache (it serves no LIST pages, so a paged read would lose
// objects) and a live one.
func readers(t *testing.T, objs ...client.Object) (cache, live client.Reader) {
	t.Helper()
	store := fake.NewClientBuilder().WithScheme(clients.Scheme()).WithObjects(objs...).Build()
	cache = interceptor.NewClient(store.(client.WithWatch), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := (&client.ListOptions{}).ApplyOptions(opts)
			if o.Limit > 0 || o.Continue != "" {
				return errors.New("a cache serves no pages")
			}
			return c.List(ctx, list, opts...)
		},
	})
	return cache, store
}

// exported is the snapshot without its index, for comparing.
func exported(s *snapshot.Snapshot) snapshot.Snapshot {
	return snapshot.Snapshot{
		VMs: s.VMs, VMIs: s.VMIs, AttachmentPods: s.AttachmentPods, PVCs: s.PVCs, DataVolumes: s.DataVolumes,
		FeatureGates: s.FeatureGates, Warnings: s.Warnings, Tenants: s.Tenants, Pods: s.Pods, Nodes: s.Nodes,
		VolumeAttachments: s.VolumeAttachments, PVs: s.PVs, CSIDrivers: s.CSIDrivers, NodesGoneSince: s.NodesGoneSince,
	}
}

func sameSnapshots(t *testing.T, what string, cached, live *snapshot.Snapshot) {
	t.Helper()
	c, l := reflect.ValueOf(exported(cached)), reflect.ValueOf(exported(live))
	for i := 0; i < c.NumField(); i++ {
		if !c.Type().Field(i).IsExported() {
			continue
		}
		// Semantic: an empty list and none are the same read.
		if cf, lf := c.Field(i).Interface(), l.Field(i).Interface(); !equality.Semantic.DeepEqual(cf, lf) {
			t.Errorf("%s: the cache pass and the live read differ in %s:\ncache: %+v\nlive:  %+v", what, c.Type().Field(i).Name, cf, lf)
		}
	}
}

func kubeVirt() *kubevirtv1.KubeVirt {
	return &kubevirtv1.KubeVirt{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt", Name: "kubevirt"},
		Spec: kubevirtv1.KubeVirtSpec{Configuration: kubevirtv1.KubeVirtConfiguration{
			DeveloperConfiguration: &kubevirtv1.DeveloperConfiguration{FeatureGates: []string{"HotplugVolumes"}, DisabledFeatureGates: []string{"Snapshot"}},
		}},
		Status: kubevirtv1.KubeVirtStatus{ObservedKubeVirtVersion: "v1.2.0"},
	}
}

// The gates, read from a cache and live, are the same, version included.
func TestGates_cacheAndLiveReadTheSame(t *testing.T) {
	cache, live := readers(t, kubeVirt())
	ctx := context.Background()
	c, l := observe.Gates(ctx, cache), observe.Gates(ctx, live)
	if !reflect.DeepEqual(c, l) || !c.Known || c.KubeVirtVersion != "v1.2.0" || !slices.Equal(c.Enabled, []string{"HotplugVolumes"}) {
		t.Fatalf("cache %+v, live %+v", c, l)
	}
}

// A VMI subject read from a cache (tenant evidence from the watches, about
// the VMI read) equals the one read live (tenants read first); a gone VMI
// is an empty snapshot both ways.
func TestVMI_cacheAndLiveReadTheSame(t *testing.T) {
	vm := fixture.VM("vm-a", fixture.InNamespace("ns"))
	vmi := fixture.VMI("vm-a", fixture.InNamespace("ns"), fixture.OwnedBy(vm), fixture.Running(), fixture.WithHotplug("v1"))
	other := fixture.VM("vm-b", fixture.InNamespace("ns"))
	cache, live := readers(t, kubeVirt(), vm, vmi, other)
	ctx := context.Background()
	tenants := []snapshot.Tenant{{Name: "guest", Reachable: true}}
	var saw *snapshot.VMI
	of := func(v *snapshot.VMI) []snapshot.Tenant { saw = v; return tenants }
	c, err := observe.VMI(ctx, cache, "ns", "vm-a", observe.Tenants{Of: of})
	if err != nil {
		t.Fatal(err)
	}
	l, err := observe.VMI(ctx, live, "ns", "vm-a", observe.Tenants{Read: tenants})
	if err != nil {
		t.Fatal(err)
	}
	if saw == nil || saw.UID != vmi.UID {
		t.Fatalf("the tenants' evidence was not asked about the VMI read (got %v)", saw)
	}
	if len(c.VMIs) != 1 || len(c.VMs) != 1 || c.VMs[0].Name != "vm-a" || !c.FeatureGates.Known {
		t.Fatalf("want the VMI, its VM and the gates, got %+v", exported(c))
	}
	sameSnapshots(t, "VMI", c, l)
	c, _ = observe.VMI(ctx, cache, "ns", "gone", observe.Tenants{Of: of})
	l, _ = observe.VMI(ctx, live, "ns", "gone", observe.Tenants{Read: tenants})
	if len(c.VMIs)+len(c.Tenants)+len(l.VMIs)+len(l.Tenants) != 0 {
		t.Fatal("a gone VMI should yield an empty snapshot")
	}
}

// The references of a VM read from a cache (every claim of the namespace)
// hold, for one volume, exactly what the live re-check of that volume reads
// (the claims it names, one GET each).
func TestVMReferences_cacheAndLiveReadTheSame(t *testing.T) {
	claim, dv := fixture.PVC("claim-1", fixture.InNamespace("ns")), fixture.DataVolume("dv-1", fixture.InNamespace("ns"))
	unrelated := fixture.PVC("claim-9", fixture.InNamespace("ns"))
	vm := fixture.VM("vm-a", fixture.InNamespace("ns"),
		fixture.WithVolume("v1", claim, fixture.Hotpluggable()), fixture.WithVolume("v2", dv, fixture.Hotpluggable()))
	vmi := fixture.VMI("vm-a", fixture.InNamespace("ns"), fixture.OwnedBy(vm), fixture.Running(), fixture.WithHotplug("v1", fixture.Claim("claim-1")))
	pod := fixture.AttachmentPod("hp-1", fixture.InNamespace("ns"), fixture.LaunchedBy(vmi))
	elsewhere := fixture.PVC("claim-1", fixture.InNamespace("other"))
	cache, live := readers(t, kubeVirt(), vm, vmi, pod, claim, dv, unrelated, elsewhere)
	ctx := context.Background()
	all, err := observe.VMReferences(ctx, cache, "ns", "vm-a", observe.Claims{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.PVCs) != 2 || len(all.DataVolumes) != 1 || len(all.AttachmentPods) != 1 || len(all.VMIs) != 1 {
		t.Fatalf("the cache pass should read every claim of the namespace, got %+v", exported(all))
	}
	for volume, names := range map[string][]string{"v1": {"claim-1"}, "v2": {"dv-1"}} {
		l, err := observe.VMReferences(ctx, live, "ns", "vm-a", observe.Claims{Volume: volume})
		if err != nil {
			t.Fatal(err)
		}
		narrowed := exported(all)
		narrowed.PVCs = slices.DeleteFunc(slices.Clone(all.PVCs), func(p corev1.PersistentVolumeClaim) bool { return !slices.Contains(names, p.Name) })
		narrowed.DataVolumes = slices.DeleteFunc(slices.Clone(all.DataVolumes), func(d cdiv1.DataVolume) bool { return !slices.Contains(names, d.Name) })
		sameSnapshots(t, "VMReferences "+volume, snapshot.New(narrowed), l)
	}
	none, err := observe.VMReferences(ctx, cache, "ns", "vm-a", observe.Claims{NoDataVolumes: true})
	if err != nil || len(none.DataVolumes) != 0 {
		t.Fatalf("NoDataVolumes should read no DataVolume, got %d (%v)", len(none.DataVolumes), err)
	}
}

// The storage view read from a cache (one LIST per kind, objects shared)
// equals the one read live in pages.
func TestStorage_cacheAndLiveReadTheSame(t *testing.T) {
	objs := []client.Object{
		fixture.VM("vm-a", fixture.InNamespace("ns")),
		fixture.PVC("claim-1", fixture.InNamespace("ns")), fixture.PVC("claim-2", fixture.InNamespace("ns")),
		fixture.DataVolume("dv-1", fixture.InNamespace("ns")),
		fixture.UserPod("app-1", fixture.InNamespace("ns"), fixture.BoundTo("node-1")),
		fixture.UserPod("app-2", fixture.InNamespace("ns"), fixture.BoundTo("node-2")),
		fixture.UserPod("app-3", fixture.InNamespace("ns"), fixture.BoundTo("node-2")),
		fixture.NodeObject("node-1"), fixture.NodeObject("node-2"), fixture.NodeObject("node-3"),
		fixture.VolumeAttachment("va-1", "node-1", "pv-1"), fixture.VolumeAttachment("va-2", "node-2", "pv-2"),
		fixture.CSIPV("pv-1", "h1"), fixture.CSIPV("pv-2", "h2"), fixture.CSIPV("pv-3", "h3"),
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.kubevirt.io"}},
	}
	cache, live := readers(t, objs...)
	ctx := context.Background()
	var c, l snapshot.Snapshot
	if err := observe.Storage(ctx, cache, &c, observe.StorageRead{Shared: true}); err != nil {
		t.Fatal(err)
	}
	if err := observe.Storage(ctx, live, &l, observe.StorageRead{PageSize: 2, Lenient: true}); err != nil {
		t.Fatal(err)
	}
	if len(c.Pods) != 3 || len(c.Nodes) != 3 || len(c.VolumeAttachments) != 2 || len(c.PVs) != 3 || len(c.PVCs) != 2 ||
		len(c.VMs) != 1 || len(c.DataVolumes) != 1 || len(c.CSIDrivers) != 1 {
		t.Fatalf("the cache pass missed objects: %+v", c)
	}
	sameSnapshots(t, "Storage", &c, &l)
	var without snapshot.Snapshot
	if err := observe.Storage(ctx, cache, &without, observe.StorageRead{NoVMs: true, NoDataVolumes: true}); err != nil {
		t.Fatal(err)
	}
	if len(without.VMs)+len(without.DataVolumes) != 0 {
		t.Fatal("NoVMs and NoDataVolumes should read neither")
	}
}

// One namespace read from a cache (the controller's namespace loop) equals
// Observe's live read of that namespace, kind for kind; nothing of another
// namespace or outside the kinds asked for is read, and a kind outside one
// namespace is refused.
func TestNamespace_cacheReadEqualsObserveOfTheNamespace(t *testing.T) {
	ns, other := fixture.InNamespace("ns"), fixture.InNamespace("other")
	vm := fixture.VM("vm-a", ns)
	vmi := fixture.VMI("vm-a", ns, fixture.OwnedBy(vm), fixture.Running(), fixture.WithHotplug("v1", fixture.AttachPod("hp-1")))
	objs := []client.Object{kubeVirt(), vm, vmi, fixture.PVC("claim-1", ns), fixture.DataVolume("dv-1", ns),
		fixture.AttachmentPod("hp-1", ns, fixture.LaunchedBy(vmi)), fixture.UserPod("app-1", ns, fixture.BoundTo("node-1")),
		fixture.VM("vm-b", other), fixture.VMI("vm-b", other), fixture.PVC("claim-1", other), fixture.AttachmentPod("hp-2", other),
		fixture.NodeObject("node-1"), fixture.CSIPV("pv-1", "h1")}
	cache, live := readers(t, objs...)
	ctx := context.Background()
	for _, k := range []snapshot.Kinds{
		observe.NamespaceKinds &^ snapshot.KindPods,
		observe.NamespaceKinds,
		snapshot.KindVMs | snapshot.KindPVCs,
	} {
		c, err := observe.Namespace(ctx, cache, observe.StorageRead{Namespace: "ns", Shared: true, Kinds: k})
		if err != nil {
			t.Fatal(err)
		}
		l, err := observe.Observe(ctx, live.(client.Client), observe.Options{Namespace: "ns", Kinds: k})
		if err != nil {
			t.Fatal(err)
		}
		sameSnapshots(t, "Namespace "+k.String(), c, l)
		for _, o := range append(append(append([]metav1.Object{}, objectsOf(c.VMs)...), objectsOf(c.VMIs)...), append(objectsOf(c.PVCs), objectsOf(c.AttachmentPods)...)...) {
			if o.GetNamespace() != "ns" {
				t.Errorf("%s: read %s/%s of another namespace", k, o.GetNamespace(), o.GetName())
			}
		}
		if len(c.Nodes)+len(c.PVs) != 0 || (!k.Has(snapshot.KindVMIs) && len(c.VMIs) != 0) || (!k.Has(snapshot.KindKubeVirt) && c.FeatureGates.Known) {
			t.Errorf("%s: read more than asked: %+v", k, exported(c))
		}
	}
	full, _ := observe.Namespace(ctx, cache, observe.StorageRead{Namespace: "ns", Kinds: observe.NamespaceKinds &^ snapshot.KindPods})
	if len(full.VMs) != 1 || len(full.VMIs) != 1 || len(full.PVCs) != 1 || len(full.DataVolumes) != 1 || len(full.AttachmentPods) != 1 || len(full.Pods) != 0 || !full.FeatureGates.Known {
		t.Errorf("the namespace's objects were not all read: %+v", exported(full))
	}
	for _, o := range []observe.StorageRead{{Kinds: snapshot.KindVMs}, {Namespace: "ns", Kinds: snapshot.KindStorage | snapshot.KindVMs}, {Namespace: "ns"}} {
		if _, err := observe.Namespace(ctx, cache, o); err == nil {
			t.Errorf("%+v: read, want refused", o)
		}
	}
}

func objectsOf[T any, P interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}
