package protect

import (
	"context"
	"fmt"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Change is one finalizer change of a one-shot run (`tether protect`).
type Change struct {
	Ref inuse.Ref `json:"ref"`
	// Action is Add or Release.
	Action inuse.Decision `json:"action"`
	// Users are the VMs that hold the object (for Add).
	Users []string `json:"users,omitempty"`
	// Error is set when applying the change failed.
	Error string `json:"error,omitempty"`

	obj client.Object
}

// PlanOptions scope a one-shot run.
type PlanOptions struct {
	// Namespace limits the run; empty means every namespace.
	Namespace string
	// Selector on VM labels; nil means every VM.
	Selector labels.Selector
	// Release plans the removal of every tether finalizer in the namespace
	// (the uninstall path), whoever uses the object.
	Release bool
}

// Plan reads the VMs and the protected kinds once and returns the changes:
// with Release, every object carrying inuse.Finalizer; otherwise every object a VM
// in scope holds that lacks it. Plan never removes a finalizer from an
// object in use unless Release asks for it.
func Plan(ctx context.Context, c client.Client, o PlanOptions) ([]Change, error) {
	if o.Selector == nil {
		o.Selector = labels.Everything()
	}
	var in []client.ListOption
	if o.Namespace != "" {
		in = append(in, client.InNamespace(o.Namespace))
	}
	held := map[inuse.Ref][]snapshot.VM{}
	if !o.Release {
		var vms kubevirtv1.VirtualMachineList
		if err := c.List(ctx, &vms, append(in, client.MatchingLabelsSelector{Selector: o.Selector})...); err != nil {
			return nil, fmt.Errorf("listing VMs: %w", err)
		}
		for i := range vms.Items {
			vm := snapshot.VMOf(&vms.Items[i])
			for _, d := range inuse.Dependents(&vm) {
				held[d] = append(held[d], vm)
			}
		}
	}
	var out []Change
	for _, k := range inuse.Kinds {
		if !installed(c.RESTMapper(), k) {
			continue
		}
		list, all := newList(k)
		if err := c.List(ctx, list, in...); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return nil, fmt.Errorf("listing %ss: %w", k, err)
		}
		for _, obj := range all() {
			ref := inuse.Ref{Kind: k, Namespace: obj.GetNamespace(), Name: obj.GetName()}
			if o.Release {
				if inuse.HasFinalizer(obj) {
					out = append(out, Change{Ref: ref, Action: inuse.Release, obj: obj})
				}
				continue
			}
			users := inuse.Users(ref, obj, held[ref])
			if inuse.NeedToAddFinalizer(obj, users) {
				out = append(out, Change{Ref: ref, Action: inuse.Add, Users: users, obj: obj})
			}
		}
	}
	return out, nil
}

// Apply carries out the planned changes with the same guarded JSON patches
// as the controller, recording each failure in its Change. It returns the
// number of failures.
func Apply(ctx context.Context, c client.Client, changes []Change) int {
	failed := 0
	for i := range changes {
		ch := &changes[i]
		var err error
		switch ch.Action {
		case inuse.Add:
			err = addFinalizer(ctx, c, ch.obj)
		case inuse.Release:
			err = removeFinalizer(ctx, c, ch.obj)
		}
		if err != nil {
			ch.Error = err.Error()
			failed++
		}
	}
	return failed
}
