package bundle

import (
	"context"

	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// A Bundle hands the observer its VMIs and VMs as it holds them, as the
// checks read them, in one page: no typed list of 100,000 VMIs is made.
var _ observe.Pager = (*Bundle)(nil)

// LeanVMIs returns the VMIs of ns ("" every namespace).
func (b *Bundle) LeanVMIs(_ context.Context, ns string, _ int64, answered func(), page func(int)) ([]snapshot.VMI, error) {
	if b.closed {
		return nil, errClosed
	}
	return inNamespace(b.vmis.all, ns, answered, page, func(v *snapshot.VMI) string { return v.Namespace }), nil
}

// LeanVMs returns the VMs of ns ("" every namespace).
func (b *Bundle) LeanVMs(_ context.Context, ns string, _ int64, answered func(), page func(int)) ([]snapshot.VM, error) {
	if b.closed {
		return nil, errClosed
	}
	return inNamespace(b.vms.all, ns, answered, page, func(v *snapshot.VM) string { return v.Namespace }), nil
}

// inNamespace is the items of xs in ns, told to answered and page as one
// page: a copy of them, or with ns "" xs itself, shared (nothing changes a
// snapshot's items; capped, so that an append makes a copy).
func inNamespace[T any](xs []T, ns string, answered func(), page func(int), nsOf func(*T) string) []T {
	if answered != nil {
		answered()
	}
	out := xs[:len(xs):len(xs)]
	if ns != "" {
		out = nil
		for i := range xs {
			if nsOf(&xs[i]) == ns {
				out = append(out, xs[i])
			}
		}
	}
	if page != nil {
		page(len(out))
	}
	return out
}
