package bundle

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/tether-dev/tether/internal/clients"
)

// Bundle is a client.Reader over its objects: observe reads it as it reads
// an API server. A List honours the namespace, the label selector and the
// field selectors metadata.name, metadata.namespace and (of pods)
// spec.nodeName; it answers in one page, with items that share their
// maps, slices and pointers with the bundle's objects (as a cache read
// without copies does): nothing may change them, and a bundle of 100,000
// VMIs is not held twice while it is observed. A kind the bundle holds nothing of
// is an error for Get (what it would say is unknown, not "not found") and
// an empty List (the checks that decide from it do not run: see Part).
var _ client.Reader = (*Bundle)(nil)

// Get copies the object key of obj's kind into obj.
func (b *Bundle) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if b.closed {
		return errClosed
	}
	k, err := b.kindFor(obj, false)
	if err != nil {
		return err
	}
	if b.cover[k] == nil && b.count(k) == 0 {
		return fmt.Errorf("the bundle holds no %s: unknown", k.gvk.Kind)
	}
	ns := key.Namespace
	if k.cluster {
		ns = ""
	}
	i, ok := b.index[objKey{k, ns, key.Name}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: k.gvk.Group, Resource: k.resource}, key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(b.at(k, i).DeepCopyObject()).Elem())
	return nil
}

// List copies the objects of list's kind that the options select into list.
func (b *Bundle) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if b.closed {
		return errClosed
	}
	k, err := b.kindFor(list, true)
	if err != nil {
		return err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	var out []runtime.Object
	for i := range b.count(k) {
		o := b.at(k, i)
		if lo.Namespace != "" && !k.cluster && o.GetNamespace() != lo.Namespace {
			continue
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		if lo.FieldSelector != nil && !lo.FieldSelector.Empty() {
			ok, err := matchFields(lo.FieldSelector, o)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		out = append(out, o)
	}
	return meta.SetList(list, out)
}

// errClosed: a read after Close.
var errClosed = errors.New("the bundle was closed: its objects are in the snapshot read from it")

// Close lets go of the bundle's objects once they have been read into a
// snapshot (an audit reads a bundle once): what it says of itself (its
// coverage, what it skipped) stays; reads after it are errors.
func (b *Bundle) Close() {
	b.store, b.closed = store{}, true
}

// matchFields matches the field selectors a bundle answers.
func matchFields(sel fields.Selector, o client.Object) (bool, error) {
	set := fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()}
	if p, ok := o.(*corev1.Pod); ok {
		set["spec.nodeName"] = p.Spec.NodeName
	}
	for _, r := range sel.Requirements() {
		if _, ok := set[r.Field]; !ok {
			return false, fmt.Errorf("a bundle cannot select %T by field %s", o, r.Field)
		}
	}
	return sel.Matches(set), nil
}

// kindFor is the kind read of obj (a list when list is set).
func (b *Bundle) kindFor(obj runtime.Object, list bool) (*kind, error) {
	gvk, err := apiutil.GVKForObject(obj, clients.Scheme())
	if err != nil {
		return nil, err
	}
	name := gvk.Kind
	if list {
		name = strings.TrimSuffix(name, "List")
	}
	k, ok := kindOf(gvk.Group, name)
	if !ok {
		return nil, &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: gvk.Group, Kind: name}, SearchedVersions: []string{gvk.Version}}
	}
	return k, nil
}
