package snapshot

import (
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// internMax bounds the strings the intern table keeps: namespaces, node
// names, label keys, kinds and phases are few in any cluster; past the
// bound, strings are kept as they come.
const internMax = 4096

// interned is the table of the strings that many compact objects repeat.
// Each decoded object brings its own copy of its namespace, its owner's
// apiVersion and kind, its label keys, its node's name and its phases;
// interned, the cache holds one of each. Entries are never dropped.
var interned = &internTable{max: internMax}

type internTable struct {
	mu  sync.RWMutex
	m   map[string]string
	max int
}

// of returns the table's string equal to s, adding a copy of s while the
// table has room.
func (t *internTable) of(s string) string {
	if s == "" {
		return s
	}
	t.mu.RLock()
	v, ok := t.m[s]
	t.mu.RUnlock()
	if ok {
		return v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m[s]; ok {
		return v
	}
	if len(t.m) >= t.max {
		return s
	}
	if t.m == nil {
		t.m = map[string]string{}
	}
	v = strings.Clone(s)
	t.m[v] = v
	return v
}

// internOf is interned.of for string kinds (phases, node names).
func internOf[S ~string](s S) S { return S(interned.of(string(s))) }

// internMeta interns, in place, what metadata repeats from object to
// object: the namespace and the owners' apiVersions and kinds (label keys:
// compactLabels; label values vary too much to be worth a place).
func internMeta(m *metav1.ObjectMeta) {
	m.Namespace = interned.of(m.Namespace)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind = interned.of(r.APIVersion), interned.of(r.Kind)
	}
}
