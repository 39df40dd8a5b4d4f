package check

import (
	"bytes"
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/bundle"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/bundles"
)

// TestBundleDecidesAsLive: for the fuzz generator's worlds, every check
// finds, field for field, the same from a support bundle of the world in
// each layout (as a directory, and packed as the tools pack it) as from
// the world itself, read as an observer reads a cluster. The parts a
// bundle of these layouts cannot hold here (the tenants' evidence, the
// records of gone nodes and virt-api's webhook, which these worlds make
// as facts, not objects) are the world's on both sides.
func TestBundleDecidesAsLive(t *testing.T) {
	rng := rand.New(rand.NewPCG(48, 4935))
	for i := range 12 {
		world, p, now := leanWorld(leanInput(rng))
		objs, live := bundleWorld(world)
		want := findingsJSON(t, Run(live, p, now))
		layout := bundles.All[i%len(bundles.All)]
		dir := t.TempDir()
		if err := bundles.Write(dir, layout, now, objs); err != nil {
			t.Fatal(err)
		}
		from := dir
		if i%3 == 1 {
			from = filepath.Join(t.TempDir(), "bundle.tar.gz")
			if layout == bundles.Harvester {
				from = filepath.Join(t.TempDir(), "bundle.zip")
			}
			if err := bundles.Archive(dir, from); err != nil {
				t.Fatal(err)
			}
		}
		b, err := bundle.Open(from, bundle.Options{})
		if err != nil {
			t.Fatalf("world %d, %s: %v", i, layout, err)
		}
		if !b.Collected.Equal(now) && layout != bundles.Dump && layout != bundles.DumpJSON {
			t.Errorf("world %d, %s: collected %v (from %s), want %v", i, layout, b.Collected, b.CollectedFrom, now)
		}
		// Read as typed lists, and with its VMIs and VMs handed over as
		// the checks read them (Pager), as audit --from reads it.
		for _, pages := range []observe.Pager{nil, b} {
			got, err := observe.Observe(context.Background(), b, observe.Options{PageSize: observe.Unpaged, Lean: true, Pages: pages})
			if err != nil {
				t.Fatal(err)
			}
			read := got.Only(snapshot.AllKinds)
			read.Tenants, read.EvictionGuard, read.NodesGoneSince = world.Tenants, world.EvictionGuard, world.NodesGoneSince
			if !live.FeatureGates.Known {
				read.FeatureGates = live.FeatureGates
			}
			if have := findingsJSON(t, Run(snapshot.New(read), p, now)); !bytes.Equal(have, want) {
				t.Errorf("world %d, layout %s (%s), pager %v: the bundle's findings differ from the world's\nbundle: %s\nworld:  %s", i, layout, from, pages != nil, have, want)
			}
		}
	}
}

// bundleWorld is the world's objects, and the world as an observer reads
// them: one object of each name (the generator may make two), every
// attachment pod among the pods, and the KubeVirt CR its gates say.
func bundleWorld(w *snapshot.Snapshot) ([]client.Object, *snapshot.Snapshot) {
	seen := map[string]bool{}
	var objs []client.Object
	add := func(o client.Object, kind string) bool {
		key := kind + "/" + o.GetNamespace() + "/" + o.GetName()
		if seen[key] {
			return false
		}
		seen[key] = true
		objs = append(objs, o)
		return true
	}
	out := snapshot.Snapshot{FeatureGates: w.FeatureGates}
	for i := range w.VMs {
		vm := w.VMs[i].Typed()
		if add(&vm, "vm") {
			out.VMs = append(out.VMs, w.VMs[i])
		}
	}
	for i := range w.VMIs {
		vmi := w.VMIs[i].Typed()
		if add(&vmi, "vmi") {
			out.VMIs = append(out.VMIs, w.VMIs[i])
		}
	}
	for _, pods := range [][]corev1.Pod{w.Pods, w.AttachmentPods} {
		for i := range pods {
			if add(&pods[i], "pod") {
				out.Pods = append(out.Pods, pods[i])
				if pods[i].Labels[snapshot.AttachmentPodLabel] == snapshot.AttachmentPodLabelValue {
					out.AttachmentPods = append(out.AttachmentPods, pods[i])
				}
			}
		}
	}
	keepEach(w.PVCs, "pvc", add, &out.PVCs)
	keepEach(w.DataVolumes, "dv", add, &out.DataVolumes)
	bundleStorage(w, &out, add)
	if g := w.FeatureGates; g.Known {
		kv := &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
		kv.Spec.Configuration.DeveloperConfiguration = &kubevirtv1.DeveloperConfiguration{FeatureGates: g.Enabled, DisabledFeatureGates: g.Disabled}
		if g.EvictionStrategy != "" {
			es := kubevirtv1.EvictionStrategy(g.EvictionStrategy)
			kv.Spec.Configuration.EvictionStrategy = &es
		}
		kv.Status.ObservedKubeVirtVersion, kv.Status.Phase = g.KubeVirtVersion, kubevirtv1.KubeVirtPhase(g.Phase)
		objs = append(objs, kv)
	}
	out.Tenants, out.EvictionGuard, out.NodesGoneSince = w.Tenants, w.EvictionGuard, w.NodesGoneSince
	return objs, snapshot.New(out)
}

// bundleStorage adds the world's storage view.
func bundleStorage(w *snapshot.Snapshot, out *snapshot.Snapshot, add func(client.Object, string) bool) {
	keepEach(w.Nodes, "node", add, &out.Nodes)
	keepEach(w.VolumeAttachments, "va", add, &out.VolumeAttachments)
	keepEach(w.PVs, "pv", add, &out.PVs)
	keepEach(w.CSIDrivers, "csidriver", add, &out.CSIDrivers)
}

// keepEach adds each of items, and keeps in out those added.
func keepEach[T any, P interface {
	*T
	client.Object
}](items []T, kind string, add func(client.Object, string) bool, out *[]T) {
	for i := range items {
		if add(P(&items[i]), kind) {
			*out = append(*out, items[i])
		}
	}
}
