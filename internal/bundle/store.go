package bundle

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// store holds the objects read, lean, one per kind, namespace and name.
// VMIs and VMs, a bundle's bulk, are held as the checks read them
// (snapshot.VMI, snapshot.VM: a third of KubeVirt's types), and handed to
// the observer so (Pager); every other kind as its lean typed object.
type store struct {
	objs  map[*kind][]client.Object
	vmis  rows[snapshot.VMI]
	vms   rows[snapshot.VM]
	index map[objKey]int
}

// fit puts the VMIs and VMs read into one slice each, of exactly their
// count: the snapshot shares them for the whole audit, as a live audit's
// snapshot holds its pages, read into slices of the size the server said.
func (s *store) fit() {
	s.vmis.fit()
	s.vms.fit()
}

// rows is a list of T that grows without copying what it holds: blocks of
// rowsBlock while it is read (appending to one slice of 100,000 VMIs would
// copy it again and again, hundreds of MiB of garbage in all), one slice
// of exactly its rows once fitted.
type rows[T any] struct {
	blocks [][]T
	all    []T
	fitted bool
}

const rowsBlock = 1024

func (r *rows[T]) len() int {
	if r.fitted {
		return len(r.all)
	}
	if len(r.blocks) == 0 {
		return 0
	}
	return (len(r.blocks)-1)*rowsBlock + len(r.blocks[len(r.blocks)-1])
}

func (r *rows[T]) at(i int) *T {
	if r.fitted {
		return &r.all[i]
	}
	return &r.blocks[i/rowsBlock][i%rowsBlock]
}

// put sets row i, or appends x when i is the count.
func (r *rows[T]) put(i int, x T) {
	switch {
	case i < r.len():
		*r.at(i) = x
	case r.fitted:
		r.all = append(r.all, x)
	default:
		if len(r.blocks) == 0 || len(r.blocks[len(r.blocks)-1]) == rowsBlock {
			r.blocks = append(r.blocks, make([]T, 0, rowsBlock))
		}
		last := &r.blocks[len(r.blocks)-1]
		*last = append(*last, x)
	}
}

// fit makes the rows one slice of exactly their count.
func (r *rows[T]) fit() {
	if r.fitted {
		return
	}
	r.all = make([]T, 0, r.len())
	for _, b := range r.blocks {
		r.all = append(r.all, b...)
	}
	r.blocks, r.fitted = nil, true
}

// count is how many objects of k the store holds.
func (s *store) count(k *kind) int {
	switch k.gvk.Kind {
	case "VirtualMachineInstance":
		return s.vmis.len()
	case "VirtualMachine":
		return s.vms.len()
	}
	return len(s.objs[k])
}

// at is object i of k: for VMIs and VMs, a typed object made anew.
func (s *store) at(k *kind, i int) client.Object {
	var o client.Object
	switch k.gvk.Kind {
	case "VirtualMachineInstance":
		vmi := s.vmis.at(i).Typed()
		o = &vmi
	case "VirtualMachine":
		vm := s.vms.at(i).Typed()
		o = &vm
	default:
		return s.objs[k][i]
	}
	o.GetObjectKind().SetGroupVersionKind(k.gvk)
	return o
}

func putAt[T any](xs []T, i int, x T) []T {
	if i == len(xs) {
		return append(xs, x)
	}
	xs[i] = x
	return xs
}

type objKey struct {
	k        *kind
	ns, name string
}

// object decodes one object's JSON (from a List of listKind, in
// listVersion, when it came from one) and keeps it if its kind is read.
func (d *decoder) object(file string, doc int, raw []byte, listVersion, listKind string) error {
	var h header
	if err := h.read(raw); err != nil {
		d.skip(file, fmt.Sprintf("document %d: an object that is not JSON or YAML of an object (%v)", doc, err), false)
		return nil
	}
	if h.Kind == "" && strings.HasSuffix(listKind, "List") && listKind != "List" {
		h.Kind, h.APIVersion = strings.TrimSuffix(listKind, "List"), listVersion
	}
	gv, err := schema.ParseGroupVersion(h.APIVersion)
	if h.Kind == "" || err != nil {
		d.skip(file, fmt.Sprintf("document %d: an object without apiVersion and kind", doc), false)
		return nil
	}
	k, ok := kindOf(gv.Group, h.Kind)
	if !ok {
		d.b.Other[h.Kind]++
		return nil
	}
	if !k.reads(gv.Version) {
		d.skip(file, fmt.Sprintf("%s %s/%s is of version %s, which tether does not read (it reads %s): objects of this kind are left out",
			h.Kind, h.Metadata.Namespace, h.Metadata.Name, gv.Version, k.gvk.GroupVersion()), false)
		return nil
	}
	if d.facts.harvesterFile(file) {
		if raw, err = unNull(raw); err != nil {
			d.skip(file, fmt.Sprintf("%s %s: %v", h.Kind, h.Metadata.Name, err), false)
			return nil
		}
	}
	if d.keepCompact(k, file, doc, &h, raw) {
		return nil
	}
	obj, err := clients.Scheme().New(k.gvk)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, obj); err != nil {
		d.skip(file, fmt.Sprintf("%s %s/%s does not decode as %s: %v", h.Kind, h.Metadata.Namespace, h.Metadata.Name, k.gvk.GroupVersion(), err), false)
		return nil
	}
	tenant := tenantAnnotations(obj)
	o := snapshot.Lean(obj).(client.Object)
	for a, v := range tenant {
		setAnnotation(o, a, v)
	}
	o.GetObjectKind().SetGroupVersionKind(k.gvk)
	if k.cluster {
		o.SetNamespace("")
	}
	d.keep(k, o.GetNamespace(), o.GetName(), o.GetResourceVersion(), func(s *store, i int) { s.objs[k] = putAt(s.objs[k], i, o) })
	d.facts.seen(file, k, o.GetNamespace())
	return nil
}

// keepCompact gathers a VMI or a VM into its kind's page (see page), and
// says whether k was one of those.
func (d *decoder) keepCompact(k *kind, file string, doc int, h *header, raw []byte) bool {
	var p *page
	switch k.gvk.Kind {
	case "VirtualMachineInstance":
		p = &d.vmiPage
	case "VirtualMachine":
		p = &d.vmPage
	default:
		return false
	}
	if p.k == nil {
		p.k = k
	}
	p.add(file, doc, h, raw)
	if len(p.items) == observe.DefaultPageSize {
		d.flush(p)
	}
	return true
}

// tenantAnnotations are the annotations of a Node that tie it, as a
// tenant's node, to its infra VM (snapshot.NewTenantNode): Lean keeps only
// what the infra cluster's Nodes are read for, and a tenant's bundle is
// read by the same reader.
func tenantAnnotations(obj any) map[string]string {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for _, a := range []string{snapshot.ClusterNamespaceAnnotation, snapshot.InfraVMNameAnnotation, snapshot.InfraVMNamespaceAnnotation} {
		if v, ok := n.Annotations[a]; ok {
			out[a] = v
		}
	}
	return out
}

func setAnnotation(o client.Object, k, v string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.SetAnnotations(a)
}

// keep stores an object of k, ns and name by put; of two copies of one
// object (layouts gather some objects twice), the one of the higher
// resourceVersion stays.
func (d *decoder) keep(k *kind, ns, name, rv string, put func(s *store, i int)) {
	s := &d.b.store
	if s.index == nil {
		s.objs, s.index = map[*kind][]client.Object{}, map[objKey]int{}
	}
	key := objKey{k, ns, name}
	if i, ok := s.index[key]; ok {
		if newer(rv, s.at(k, i).GetResourceVersion()) {
			put(s, i)
		}
		return
	}
	s.index[key] = s.count(k)
	put(s, s.count(k))
	d.b.Read[k.gvk.Kind]++
}

// newer says whether resourceVersion a is later than b, where both are
// numbers (as etcd's are); otherwise the first read stays.
func newer(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

// harvesterFile says whether file is a list Harvester's collector wrote.
func (f *facts) harvesterFile(file string) bool {
	return strings.Contains("/"+file, "/yamls/namespaced/") || strings.Contains("/"+file, "/yamls/cluster/")
}

// unNull undoes what Harvester's collector does to every list it writes
// (support-bundle-kit pkg/manager/collectors/common.go, toObjCommon): it
// writes null values and empty strings as the string "null". Read back as
// a string "null" would be a time, a number or a name that cannot be; so
// every "null" string is null again (no field tether reads holds it).
func unNull(raw []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return json.Marshal(nullAgain(v))
}

func nullAgain(v any) any {
	switch x := v.(type) {
	case string:
		if x == "null" {
			return nil
		}
	case map[string]any:
		for k, e := range x {
			x[k] = nullAgain(e)
		}
	case []any:
		for i, e := range x {
			x[i] = nullAgain(e)
		}
	}
	return v
}
