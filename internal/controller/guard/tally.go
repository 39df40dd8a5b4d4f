package guard

import (
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Tally keeps what the guard counts of the VMIs (how many, and the
// hot-plugged volumes of each namespace) up to date from the VMI
// informer's events, so that a look costs the namespaces, not a walk of
// every cached VMI (which, out of compact caches, made some 4 KB of
// garbage a VMI a look). It is a toolscache.ResourceEventHandler.
type Tally struct {
	mu sync.Mutex
	// vmis are the hot-plugged volumes of each VMI, by cache key.
	vmis map[string]tallied
	// namespaces are the sums over the VMIs of each namespace.
	namespaces map[string]nsTally
}

type tallied struct {
	namespace string
	hotplugs  int
}

type nsTally struct{ vmis, hotplugs int }

// NewTally is an empty tally.
func NewTally() *Tally {
	return &Tally{vmis: map[string]tallied{}, namespaces: map[string]nsTally{}}
}

// hotplugs counts the hot-plugged volumes in a VMI's status.
func hotplugs(vmi *kubevirtv1.VirtualMachineInstance) int {
	n := 0
	for _, vs := range vmi.Status.VolumeStatus {
		if vs.HotplugVolume != nil {
			n++
		}
	}
	return n
}

func (t *Tally) set(key string, now tallied, present bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if was, ok := t.vmis[key]; ok {
		ns := t.namespaces[was.namespace]
		ns.vmis, ns.hotplugs = ns.vmis-1, ns.hotplugs-was.hotplugs
		if ns.vmis == 0 {
			delete(t.namespaces, was.namespace)
		} else {
			t.namespaces[was.namespace] = ns
		}
		delete(t.vmis, key)
	}
	if !present {
		return
	}
	t.vmis[key] = now
	ns := t.namespaces[now.namespace]
	ns.vmis, ns.hotplugs = ns.vmis+1, ns.hotplugs+now.hotplugs
	t.namespaces[now.namespace] = ns
}

func (t *Tally) observe(obj any) {
	vmi, ok := obj.(*kubevirtv1.VirtualMachineInstance)
	if !ok {
		return
	}
	t.set(vmi.Namespace+"/"+vmi.Name, tallied{namespace: vmi.Namespace, hotplugs: hotplugs(vmi)}, true)
}

// OnAdd implements toolscache.ResourceEventHandler.
func (t *Tally) OnAdd(obj any, _ bool) { t.observe(obj) }

// OnUpdate implements toolscache.ResourceEventHandler.
func (t *Tally) OnUpdate(_, obj any) { t.observe(obj) }

// OnDelete implements toolscache.ResourceEventHandler (a tombstone too).
func (t *Tally) OnDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		t.set(d.Key, tallied{}, false)
		return
	}
	if vmi, ok := obj.(*kubevirtv1.VirtualMachineInstance); ok {
		t.set(vmi.Namespace+"/"+vmi.Name, tallied{}, false)
	}
}

// VMIs is how many VMIs the informer holds.
func (t *Tally) VMIs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.vmis)
}

// Hotplugs is the hot-plugged volumes of the VMIs in the namespaces
// applies says yes to: a walk of the namespaces.
func (t *Tally) Hotplugs(applies func(namespace string) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for ns, c := range t.namespaces {
		if applies(ns) {
			n += c.hotplugs
		}
	}
	return n
}
