package compactcache

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// listWatch is a ListerWatcher of fixed items and a fake watch, without the
// watch-list protocol (which a fake watch does not speak).
type listWatch struct {
	toolscache.ListWatch
}

func (listWatch) IsWatchListSemanticsUnSupported() bool { return true }

// seenEvents records the types and objects an informer's handler got.
type seenEvents struct {
	mu   sync.Mutex
	objs []any
}

func (s *seenEvents) add(objs ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs = append(s.objs, objs...)
}

func (s *seenEvents) all() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]any(nil), s.objs...)
}

// The caches' informers store VMs and VMIs compact and hand out only the
// lean objects: to event handlers (add, update, delete), to the reader
// (GetIndexer, GetStore: get, list, by index) and to index functions
// added later. What they hand out equals what the lean caches held.
func TestCompactInformer_storesCompactHandsOutLean(t *testing.T) {
	whole := fixture.VMI("a", fixture.InNamespace("ns"), fixture.WithHotplug("v1"), fixture.WithHotplug("v2"), fixture.Labels("k", "v"))
	whole.TypeMeta = metav1.TypeMeta{} // as a typed client decodes it
	whole.ResourceVersion = "1"
	whole.Annotations = map[string]string{"a": "b"}
	whole.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "virt-handler"}}
	lean := snapshot.Lean(whole.DeepCopy()).(*kubevirtv1.VirtualMachineInstance)

	fw := watch.NewFakeWithChanSize(4, false)
	lw := listWatch{toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &kubevirtv1.VirtualMachineInstanceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []kubevirtv1.VirtualMachineInstance{*whole.DeepCopy()}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
	}}
	inf := NewInformer(&lw, &kubevirtv1.VirtualMachineInstance{}, 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(compact); err != nil {
		t.Fatal(err)
	}
	var seen seenEvents
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { seen.add(o) },
		UpdateFunc: func(old, o any) { seen.add(old, o) },
		DeleteFunc: func(o any) { seen.add(o) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}

	// The store holds the compact object.
	inner := inf.(compactInformer).SharedIndexInformer.GetIndexer().List()
	if len(inner) != 1 {
		t.Fatalf("store holds %d objects", len(inner))
	}
	if _, ok := inner[0].(*snapshot.CompactVMI); !ok {
		t.Fatalf("the store holds a %T, not a compact VMI", inner[0])
	}

	// Every read gives the lean object.
	if err := inf.AddIndexers(toolscache.Indexers{"node": func(o any) ([]string, error) {
		return []string{o.(*kubevirtv1.VirtualMachineInstance).Status.NodeName}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	idx := inf.GetIndexer()
	byKey, _, _ := idx.GetByKey("ns/a")
	got, _, _ := idx.Get(lean)
	byNS, _ := idx.ByIndex(toolscache.NamespaceIndex, "ns")
	byNode, _ := idx.ByIndex("node", lean.Status.NodeName)
	index, _ := idx.Index("node", lean)
	reads := map[string]any{"GetByKey": byKey, "Get": got, "List": idx.List()[0], "GetStore().List": inf.GetStore().List()[0]}
	for name, list := range map[string][]any{"ByIndex(namespace)": byNS, "ByIndex(node)": byNode, "Index(node)": index} {
		if len(list) != 1 {
			t.Fatalf("%s: %d objects", name, len(list))
		}
		reads[name] = list[0]
	}
	for name, o := range reads {
		if !reflect.DeepEqual(o, lean) {
			t.Errorf("%s gave %#v, want the lean VMI", name, o)
		}
	}

	// An update and a delete reach the handler as lean objects.
	changed := whole.DeepCopy()
	changed.ResourceVersion = "2"
	changed.Status.NodeName = "node-2"
	fw.Modify(changed)
	fw.Delete(changed.DeepCopy())
	deadline := time.Now().Add(10 * time.Second)
	for len(seen.all()) < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	events := seen.all()
	if len(events) != 4 {
		t.Fatalf("handler got %d objects, want 4 (add, update old and new, delete)", len(events))
	}
	leanChanged := snapshot.Lean(changed.DeepCopy())
	for i, want := range []any{lean, lean, leanChanged, leanChanged} {
		if !reflect.DeepEqual(events[i], want) {
			t.Errorf("event object %d: %#v, want %#v", i, events[i], want)
		}
	}
}

// A deletion's tombstone carries the lean object too.
func TestExpand_tombstone(t *testing.T) {
	vmi := fixture.VMI("a")
	c := snapshot.Compact(vmi.DeepCopy())
	got := expand(toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: c}).(toolscache.DeletedFinalStateUnknown)
	if !reflect.DeepEqual(got.Obj, snapshot.Lean(vmi.DeepCopy())) {
		t.Errorf("tombstone holds %#v", got.Obj)
	}
}

// compact is the controller's cache transform of VMs and VMIs, as far as
// this informer is concerned: lean, then compact.
func compact(obj any) (any, error) { return snapshot.Compact(snapshot.Lean(obj)), nil }
