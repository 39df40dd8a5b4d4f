package observe

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// listAll fills list with every item, one page of pageSize at a time, and
// returns the item count. Pages are appended in order. A pageSize of 0
// reads in one LIST without limit, as a cache must.
func listAll(ctx context.Context, c client.Reader, list client.ObjectList, ns string, pageSize int64, opts ...client.ListOption) (int, error) {
	if pageSize <= 0 {
		if ns != "" {
			opts = append(opts, client.InNamespace(ns))
		}
		if err := c.List(ctx, list, opts...); err != nil {
			return 0, err
		}
		return meta.LenList(list), nil
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
		page := list.DeepCopyObject().(client.ObjectList)
		o := append([]client.ListOption{client.Limit(pageSize), client.Continue(cont)}, opts...)
		if ns != "" {
			o = append(o, client.InNamespace(ns))
		}
		if err := c.List(ctx, page, o...); err != nil {
			return 0, err
		}
		all = reflect.AppendSlice(all, reflect.ValueOf(page).Elem().FieldByName("Items"))
		cont = page.GetContinue()
		if cont == "" {
			break
		}
	}
	items.Set(all)
	return all.Len(), nil
}

func isNoKind(err error) bool {
	var nm *meta.NoKindMatchError
	return errors.As(err, &nm) || meta.IsNoMatchError(err)
}
