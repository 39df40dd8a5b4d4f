// Package compactcache is the informer of the controller's caches that
// stores VMs and VMIs compact and hands out the lean objects they stand for.
package compactcache

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// The caches of VMs and VMIs hold compact objects (snapshot.Compact, the
// last step of leanCache): about a third of the memory of the lean typed
// objects (BenchmarkCacheHeldPerVMI). Nothing outside an informer sees one: compactInformer hands
// its event handlers, its indexers' functions and the cache's reader (which
// reads through GetIndexer) the lean objects they stand for
// (snapshot.Expand), so every read and every event is as it was with
// lean objects in the store.

// NewInformer is the caches' informer constructor
// (cache.Options.NewInformer).
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return compactInformer{toolscache.NewSharedIndexInformer(lw, obj, resync, expandingIndexers(indexers))}
}

// compactInformer is a SharedIndexInformer whose store may hold compact
// objects and which gives out only expanded ones.
type compactInformer struct {
	toolscache.SharedIndexInformer
}

func (i compactInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(expandingHandler{h})
}

func (i compactInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(expandingHandler{h}, resync)
}

func (i compactInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(expandingHandler{h}, o)
}

func (i compactInformer) AddIndexers(indexers toolscache.Indexers) error {
	return i.SharedIndexInformer.AddIndexers(expandingIndexers(indexers))
}

func (i compactInformer) GetStore() toolscache.Store {
	return expandingIndexer{i.SharedIndexInformer.GetIndexer()}
}

func (i compactInformer) GetIndexer() toolscache.Indexer {
	return expandingIndexer{i.SharedIndexInformer.GetIndexer()}
}

// expand is snapshot.Expand, also inside a deletion's tombstone.
func expand(obj any) any {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		d.Obj = snapshot.Expand(d.Obj)
		return d
	}
	return snapshot.Expand(obj)
}

// expandingHandler hands h expanded objects.
type expandingHandler struct {
	h toolscache.ResourceEventHandler
}

func (e expandingHandler) OnAdd(obj any, initial bool) { e.h.OnAdd(expand(obj), initial) }
func (e expandingHandler) OnUpdate(old, obj any)       { e.h.OnUpdate(expand(old), expand(obj)) }
func (e expandingHandler) OnDelete(obj any)            { e.h.OnDelete(expand(obj)) }

// expandingIndexers gives each index function expanded objects, but the
// namespace index's: controller-runtime's is cache.MetaNamespaceIndexFunc,
// which reads the metadata a compact object holds as it is.
func expandingIndexers(in toolscache.Indexers) toolscache.Indexers {
	out := make(toolscache.Indexers, len(in))
	for name, f := range in {
		if name == toolscache.NamespaceIndex {
			out[name] = f
			continue
		}
		out[name] = func(obj any) ([]string, error) { return f(expand(obj)) }
	}
	return out
}

// expandingIndexer reads an informer's store as expanded objects. Its
// writes are the store's own (nothing but the informer writes it).
type expandingIndexer struct {
	toolscache.Indexer
}

func (x expandingIndexer) AddIndexers(indexers toolscache.Indexers) error {
	return x.Indexer.AddIndexers(expandingIndexers(indexers))
}

func (x expandingIndexer) List() []any { return expandAll(x.Indexer.List()) }

func (x expandingIndexer) Get(obj any) (any, bool, error) {
	item, ok, err := x.Indexer.Get(obj)
	return expand(item), ok, err
}

func (x expandingIndexer) GetByKey(key string) (any, bool, error) {
	item, ok, err := x.Indexer.GetByKey(key)
	return expand(item), ok, err
}

func (x expandingIndexer) Index(name string, obj any) ([]any, error) {
	items, err := x.Indexer.Index(name, obj)
	return expandAll(items), err
}

func (x expandingIndexer) ByIndex(name, value string) ([]any, error) {
	items, err := x.Indexer.ByIndex(name, value)
	return expandAll(items), err
}

func expandAll(items []any) []any {
	for i := range items {
		items[i] = expand(items[i])
	}
	return items
}
