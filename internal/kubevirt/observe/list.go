package observe

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// listAll fills list with every item, one page of pageSize at a time, and
// returns the item count. Pages are appended in order. A pageSize of 0
// reads in one LIST without limit, as a cache must.
func listAll(ctx context.Context, c client.Reader, list client.ObjectList, ns string, pageSize int64, opts ...client.ListOption) (int, error) {
	return listPages(ctx, c, list, ns, pageSize, false, nil, opts...)
}

// listPages is listAll that makes each item lean (snapshot.Lean) as its
// page arrives when lean is set, and tells page, when set, the count of
// items read so far after each page.
func listPages(ctx context.Context, c client.Reader, list client.ObjectList, ns string, pageSize int64, lean bool, page func(n int), opts ...client.ListOption) (int, error) {
	if page == nil {
		page = func(int) {}
	}
	if pageSize <= 0 {
		if ns != "" {
			opts = append(opts, client.InNamespace(ns))
		}
		if err := c.List(ctx, list, opts...); err != nil {
			return 0, err
		}
		leanItems(list, lean)
		n := meta.LenList(list)
		page(n)
		return n, nil
	}
	items := reflect.ValueOf(list).Elem().FieldByName("Items")
	if !items.IsValid() {
		return 0, fmt.Errorf("%T has no Items", list)
	}
	all := reflect.MakeSlice(items.Type(), 0, 0)
	cont := ""
	for {
		// A fresh page each time: decoding into a reused one could merge
		// maps of the previous page's items into this page's.
		pg := list.DeepCopyObject().(client.ObjectList)
		o := append([]client.ListOption{client.Limit(pageSize), client.Continue(cont)}, opts...)
		if ns != "" {
			o = append(o, client.InNamespace(ns))
		}
		if err := c.List(ctx, pg, o...); err != nil {
			return 0, err
		}
		leanItems(pg, lean)
		got := reflect.ValueOf(pg).Elem().FieldByName("Items")
		if all.Cap() == 0 {
			// The server's estimate of what is left sizes the list once,
			// instead of a copy of everything read so far at each doubling.
			all = reflect.MakeSlice(items.Type(), 0, got.Len()+int(remaining(pg.GetRemainingItemCount())))
		}
		all = reflect.AppendSlice(all, got)
		page(all.Len())
		cont = pg.GetContinue()
		if cont == "" {
			break
		}
	}
	items.Set(all)
	return all.Len(), nil
}

// leanItems makes every item of list lean, when lean is set.
func leanItems(list client.ObjectList, lean bool) {
	if lean {
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			snapshot.Lean(o)
			return nil
		})
	}
}

func isNoKind(err error) bool {
	var nm *meta.NoKindMatchError
	return errors.As(err, &nm) || meta.IsNoMatchError(err)
}

// remaining is the server's estimate r of the items after a page, or 0
// when it gives none (or one past belief).
func remaining(r *int64) int64 {
	if r != nil && *r > 0 && *r < 1<<24 {
		return *r
	}
	return 0
}
