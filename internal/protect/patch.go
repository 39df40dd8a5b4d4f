package protect

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/protect/inuse"
)

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// AddPatch is the JSON patch that adds inuse.Finalizer to obj as it was read. Its
// `test` op makes the server refuse it when the finalizers (or, with none,
// the whole object) changed since: a stale read can never overwrite
// someone else's finalizers.
func AddPatch(obj client.Object) ([]byte, error) {
	fins := obj.GetFinalizers()
	var ops []patchOp
	if len(fins) == 0 {
		ops = []patchOp{
			{Op: "test", Path: "/metadata/resourceVersion", Value: obj.GetResourceVersion()},
			{Op: "add", Path: "/metadata/finalizers", Value: []string{inuse.Finalizer}},
		}
	} else {
		ops = []patchOp{
			{Op: "test", Path: "/metadata/finalizers", Value: fins},
			{Op: "add", Path: "/metadata/finalizers/-", Value: inuse.Finalizer},
		}
	}
	return json.Marshal(ops)
}

// RemovePatch is the JSON patch that removes inuse.Finalizer from obj as it was
// read, guarded by a `test` op on the finalizers.
func RemovePatch(obj client.Object) ([]byte, error) {
	fins := obj.GetFinalizers()
	i := slices.Index(fins, inuse.Finalizer)
	if i < 0 {
		return nil, fmt.Errorf("%s has no finalizer %s", obj.GetName(), inuse.Finalizer)
	}
	ops := []patchOp{
		{Op: "test", Path: "/metadata/finalizers", Value: fins},
		{Op: "remove", Path: fmt.Sprintf("/metadata/finalizers/%d", i)},
	}
	return json.Marshal(ops)
}

// addFinalizer and removeFinalizer patch obj; a refused `test` op comes back
// as an error, and the caller retries from a fresh read (with backoff).
func addFinalizer(ctx context.Context, c client.Writer, obj client.Object) error {
	p, err := AddPatch(obj)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, p))
}

func removeFinalizer(ctx context.Context, c client.Writer, obj client.Object) error {
	p, err := RemovePatch(obj)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, p))
}
