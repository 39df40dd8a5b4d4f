package bundle

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/bundles"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const podList = `apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    name: a
    namespace: ns1
    labels:
      kubevirt.io: hotplug-disk
  spec:
    nodeName: n1
    containers:
    - name: c
      image: i
- apiVersion: v1
  kind: Pod
  metadata:
    name: b
    namespace: ns2
  spec:
    nodeName: n2
    containers: []
- apiVersion: kubevirt.io/v9
  kind: VirtualMachine
  metadata:
    name: future
    namespace: ns1
kind: List
metadata:
  resourceVersion: ""
---
apiVersion: v1
kind: Secret
metadata:
  name: s
  namespace: ns1
data:
  password: REDACTED
`

// A plain dump: Lists read item by item, several documents, the selectors
// observe uses, a kind of an unknown version skipped with its reason.
func TestDumpReadsAsAnAPIServer(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "pods.yaml", podList)
	write(t, dir, "nodes.json", `{"kind":"NodeList","apiVersion":"v1","items":[{"metadata":{"name":"n1"}}]}`)
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var pods corev1.PodList
	if err := b.List(ctx, &pods, client.InNamespace("ns1"), client.MatchingLabels{snapshot.AttachmentPodLabel: snapshot.AttachmentPodLabelValue}); err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "a" {
		t.Fatalf("pods of ns1 by label: %v %v", pods.Items, err)
	}
	if err := b.List(ctx, &pods, client.MatchingFields{"spec.nodeName": "n2"}); err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "b" {
		t.Fatalf("pods on n2: %v %v", pods.Items, err)
	}
	var n corev1.Node
	if err := b.Get(ctx, client.ObjectKey{Name: "n1"}, &n); err != nil || n.Name != "n1" {
		t.Fatalf("node n1 (from a List without item kinds): %v", err)
	}
	if err := b.Get(ctx, client.ObjectKey{Name: "gone"}, &n); !apierrors.IsNotFound(err) {
		t.Fatalf("a node not in the bundle: %v, want NotFound", err)
	}
	if b.Other["Secret"] != 1 || b.Part(snapshot.KindPods) == nil || !b.Part(snapshot.KindPods).All {
		t.Fatalf("other %v, pods coverage %+v", b.Other, b.Part(snapshot.KindPods))
	}
	if b.Part(snapshot.KindVMs) != nil {
		t.Fatal("VMs are missing: no coverage")
	}
	if !skipped(b, "version v9, which tether does not read") {
		t.Fatalf("the VM of an unknown version is not reported: %+v", b.Skipped)
	}
	if !strings.Contains(b.CollectedFrom, "newest file time") {
		t.Fatalf("collected from %q", b.CollectedFrom)
	}
}

func skipped(b *Bundle, reason string) bool {
	for _, s := range b.Skipped {
		if strings.Contains(s.Reason, reason) {
			return true
		}
	}
	return false
}

// A must-gather of namespaces: the pods of the namespaces inspected only.
func TestMustGatherCoversTheNamespacesInspected(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	pod := fixture.AttachmentPod("hp-volume-x", fixture.InNamespace("tenant-a"))
	if err := bundles.Write(dir, bundles.MustGather, at, []client.Object{pod, fixture.NodeObject("n1")}); err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := b.Part(snapshot.KindPods)
	if c == nil || c.All || !c.In("tenant-a") || c.In("other") {
		t.Fatalf("pods coverage %+v", c)
	}
	if !b.Collected.Equal(at) || !strings.Contains(b.CollectedFrom, "timestamp") {
		t.Fatalf("collected %v from %q", b.Collected, b.CollectedFrom)
	}
}

// Bad bundles: a clear error, never an empty report.
func TestBadBundles(t *testing.T) {
	dir := t.TempDir()
	good := t.TempDir()
	if err := bundles.Write(good, bundles.Dump, time.Now(), []client.Object{fixture.NodeObject("n1")}); err != nil {
		t.Fatal(err)
	}
	tgz := filepath.Join(dir, "b.tar.gz")
	if err := bundles.Archive(good, tgz); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(tgz)
	cut := write(t, dir, "cut.tar.gz", string(data[:len(data)/2]))
	zipped := filepath.Join(dir, "b.zip")
	if err := bundles.Archive(good, zipped); err != nil {
		t.Fatal(err)
	}
	zdata, _ := os.ReadFile(zipped)
	cutZip := write(t, dir, "cut.zip", string(zdata[:len(zdata)-30]))
	logs := t.TempDir()
	write(t, logs, "ns/pod/logs.txt", "a log\n")
	write(t, logs, "README", "nothing here\n")
	other := t.TempDir()
	write(t, other, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	for _, c := range []struct{ path, want string }{
		{cut, "truncated"},
		{cutZip, "zip archive that cannot be read"},
		{filepath.Join(dir, "nope"), "no such file"},
		{logs, "no object of a kind tether reads"},
		{other, "found only ConfigMap 1"},
	} {
		_, err := Open(c.path, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.path, err, c.want)
		}
	}
	if _, err := Open(tgz, Options{}); err != nil {
		t.Fatalf("the whole archive: %v", err)
	}
}

// An object beyond the size bound is skipped and said so.
func TestTooLargeIsSkipped(t *testing.T) {
	dir := t.TempDir()
	big := "apiVersion: v1\nkind: Node\nmetadata:\n  name: big\n  annotations:\n    a: " + strings.Repeat("x", 4096) + "\n---\napiVersion: v1\nkind: Node\nmetadata:\n  name: small\n"
	write(t, dir, "nodes.yaml", big)
	b, err := Open(dir, Options{MaxObject: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if b.Read["Node"] != 1 || !skipped(b, "larger than") {
		t.Fatalf("read %v, skipped %+v", b.Read, b.Skipped)
	}
}

// FuzzFile: any bytes as a file of a bundle end in objects, skips or an
// error, never a panic.
func FuzzFile(f *testing.F) {
	f.Add([]byte(podList))
	f.Add([]byte(`{"kind":"NodeList","apiVersion":"v1","items":[{"metadata":{"name":"n1"}}]}` + "\n==== START logs ====\n{\"kind\":\"Pod\",\"apiVersion\":\"v1\"}"))
	f.Add([]byte("items:\n  - a: b\n  -\nkind: List\n---\n..."))
	f.Add([]byte("[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"null\"}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &Bundle{Read: map[string]int{}, Other: map[string]int{}, cover: map[*kind]*Coverage{}}
		d := &decoder{b: b, max: 1 << 16, facts: &facts{}}
		_, _ = d.file("yamls/namespaced/ns/v1/pods.yaml", strings.NewReader(string(data)))
		d.finish()
		var pods corev1.PodList
		_ = b.List(context.Background(), &pods)
	})
}

// A tenant's Node keeps what ties it to its infra VM (the annotations a
// live read of the tenant sees), though objects are kept lean.
func TestTenantNodeKeepsItsTies(t *testing.T) {
	dir := t.TempDir()
	n := fixture.TenantNodeObject("worker-1", "infra-ns", "vm-1")
	n.Annotations[snapshot.InfraVMNameAnnotation] = "vm-1"
	n.Annotations["unrelated"] = "dropped"
	if err := bundles.Write(dir, bundles.Dump, time.Now(), []client.Object{n}); err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Node
	if err := b.Get(context.Background(), client.ObjectKey{Name: "worker-1"}, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{snapshot.ClusterNamespaceAnnotation: "infra-ns", snapshot.InfraVMNameAnnotation: "vm-1"}
	if len(got.Annotations) != len(want) || got.Annotations[snapshot.ClusterNamespaceAnnotation] != "infra-ns" || got.Annotations[snapshot.InfraVMNameAnnotation] != "vm-1" {
		t.Fatalf("annotations %v, want %v", got.Annotations, want)
	}
}

// A List in a file named after its kind (`kubectl get pv -o yaml >
// pv.yaml`) says what exists of that kind, even when empty; a kind missing
// from a file of several kinds may only not have been asked for.
func TestEmptyListNamedForItsKind(t *testing.T) {
	const empty = "apiVersion: v1\nitems: []\nkind: List\nmetadata:\n  resourceVersion: \"\"\n"
	nodes := `{"kind":"List","apiVersion":"v1","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}]}`
	for _, c := range []struct {
		name  string
		files map[string]string
		held  bool
	}{
		{"pv.yaml, empty", map[string]string{"nodes.json": nodes, "pv.yaml": empty}, true},
		{"persistentvolumes.json, empty", map[string]string{"cluster.json": nodes, "persistentvolumes.json": `{"apiVersion":"v1","items":[],"kind":"List"}`}, true},
		{"no file of PVs", map[string]string{"cluster.json": nodes}, false},
		{"an empty list of another name", map[string]string{"cluster.json": nodes, "other.yaml": empty}, false},
	} {
		dir := t.TempDir()
		for name, content := range c.files {
			write(t, dir, name, content)
		}
		b, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if held := b.Part(snapshot.KindStorage) != nil; held != c.held {
			t.Errorf("%s: storage view held %v, want %v (missing %v)", c.name, held, c.held, b.Missing())
		}
	}
}

// Harvester's collector writes no file for a list without items, and logs
// each list it failed to get: of a namespace it collected, a kind without
// a file has no object, unless the log says the list failed.
func TestHarvesterKindWithoutFileHasNoObject(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	objs := []client.Object{fixture.NodeObject("n1"), fixture.AttachmentPod("hp-volume-x", fixture.InNamespace("vms"))}
	for _, c := range []struct {
		name, log string
		held      bool
	}{
		{"no PV, none failed", "", true},
		{"the PVs' list failed", "Failed to get /api/v1/persistentvolumes: the server is currently unable to handle the request\n", false},
		{"another namespace's DataVolumes failed", "Failed to get /apis/cdi.kubevirt.io/v1beta1/namespaces/other/datavolumes: forbidden\n", true},
		{"this namespace's DataVolumes failed", "Failed to get /apis/cdi.kubevirt.io/v1beta1/namespaces/vms/datavolumes: forbidden\n", false},
	} {
		dir := t.TempDir()
		if err := bundles.Write(dir, bundles.Harvester, at, objs); err != nil {
			t.Fatal(err)
		}
		if c.log != "" {
			roots, _ := filepath.Glob(filepath.Join(dir, "supportbundle_*"))
			write(t, roots[0], harvesterErrors, c.log)
		}
		b, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		held := b.Part(snapshot.KindStorage) != nil && b.Part(snapshot.KindPods).In("vms") && b.Part(snapshot.KindDataVolumes).In("vms")
		if held != c.held {
			t.Errorf("%s: storage, pods and DataVolumes of vms held %v, want %v", c.name, held, c.held)
		}
	}
}

// A must-gather's gatherers collect every object of some kinds: where they
// ran, a kind without a file has none (no PV, no VMI here); the collection
// time is the latest of its timestamp files, whatever their order.
func TestMustGatherKindWithoutFileHasNoObject(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	vm := fixture.VM("stopped", fixture.InNamespace("vms"))
	objs := []client.Object{vm, fixture.NodeObject("n1"), fixture.PVC("c", fixture.InNamespace("vms")), fixture.AttachmentPod("hp-volume-x", fixture.InNamespace("vms"))}
	dir := t.TempDir()
	if err := bundles.Write(dir, bundles.MustGather, at, objs); err != nil {
		t.Fatal(err)
	}
	roots, _ := filepath.Glob(filepath.Join(dir, "must-gather.local.*"))
	write(t, roots[0], "zz-image/timestamp", at.Add(-2*time.Minute).String()+" m=+0.1\n")
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Part(snapshot.KindStorage) == nil || !b.Part(snapshot.KindVMIs).In("vms") || !b.Part(snapshot.KindDataVolumes).All {
		t.Fatalf("storage %+v, VMIs %+v, DataVolumes %+v; missing %v", b.Part(snapshot.KindStorage), b.Part(snapshot.KindVMIs), b.Part(snapshot.KindDataVolumes), b.Missing())
	}
	if !b.Collected.Equal(at) {
		t.Fatalf("collected %v from %s, want %v", b.Collected, b.CollectedFrom, at)
	}
}

// kubectl cluster-info dump --output-directory writes nodes.json and a
// pods.json for every namespace, empty where a namespace has no pod: the
// namespace's pods are held, none.
func TestClusterInfoDumpEmptyNamespace(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "nodes.json", `{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"n1"}}]}`)
	write(t, dir, "busy/pods.json", `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"p","namespace":"busy"},"spec":{"nodeName":"n1","containers":[]}}]}`)
	write(t, dir, "quiet/pods.json", `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`)
	write(t, dir, "busy/p/logs.txt", "==== START logs for container c of pod busy/p ====\nhello\n")
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := b.Part(snapshot.KindPods)
	if c == nil || c.All || !c.In("busy") || !c.In("quiet") || c.In("other") {
		t.Fatalf("pods coverage %+v", c)
	}
	if !slices.Contains(b.Layouts, "cluster-info-dump") {
		t.Fatalf("layouts %v", b.Layouts)
	}
}

// The VMIs and VMs go to the observer as the checks read them, of the
// namespace asked; once closed, a bundle answers no read.
func TestPagerAndClose(t *testing.T) {
	dir := t.TempDir()
	vm := fixture.VM("a", fixture.InNamespace("ns1"))
	objs := []client.Object{vm, fixture.VMI("a", fixture.InNamespace("ns1"), fixture.OwnedBy(vm), fixture.WithHotplug("v")),
		fixture.VMI("b", fixture.InNamespace("ns2")), fixture.NodeObject("n1")}
	if err := bundles.Write(dir, bundles.Dump, time.Now(), objs); err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	vmis, err := b.LeanVMIs(ctx, "ns1", 500, nil, nil)
	if err != nil || len(vmis) != 1 || vmis[0].Name != "a" || len(vmis[0].Status.VolumeStatus) != 1 {
		t.Fatalf("VMIs of ns1: %+v, %v", vmis, err)
	}
	if vms, err := b.LeanVMs(ctx, "", 500, nil, nil); err != nil || len(vms) != 1 {
		t.Fatalf("VMs: %+v, %v", vms, err)
	}
	var typed kubevirtv1.VirtualMachineInstance
	if err := b.Get(ctx, client.ObjectKey{Namespace: "ns2", Name: "b"}, &typed); err != nil || typed.Name != "b" {
		t.Fatalf("Get VMI ns2/b: %v", err)
	}
	b.Close()
	var nodes corev1.NodeList
	if _, err := b.LeanVMIs(ctx, "", 500, nil, nil); err == nil || b.List(ctx, &nodes) == nil {
		t.Fatal("a closed bundle answered a read")
	}
}
