package observe

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// benchPage is a LIST page of n VMIs as tether-bench seeds them (four
// hot-plugs each, two of them in the VM spec), each with the managedFields
// entry the server records on create; metaLast as for a custom resource.
func benchPage(tb testing.TB, n int, metaLast bool) []byte {
	tb.Helper()
	list := kubevirtv1.VirtualMachineInstanceList{TypeMeta: metav1.TypeMeta{Kind: "VirtualMachineInstanceList", APIVersion: "kubevirt.io/v1"}}
	list.Continue = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDUsInN0YXJ0IjoiYmVuY2gvdm0tMDA0OTlcdTAwMDAifQ"
	for i := range n {
		name := fmt.Sprintf("vm-%05d", i)
		vm := fixture.VM(name, fixture.InNamespace("bench"))
		var opts []fixture.Option
		for h := range 4 {
			opts = append(opts, fixture.WithHotplug(fmt.Sprintf("%s-hp%d", name, h)))
		}
		vmi := fixture.VMI(name, append(opts, fixture.InNamespace("bench"), fixture.OwnedBy(vm))...)
		vmi.Annotations = map[string]string{"emulator.tether.dev/paused": "true"}
		vmi.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC))
		vmi.ResourceVersion, vmi.Generation = "123456", 1
		raw, err := json.Marshal(vmi)
		if err != nil {
			tb.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			tb.Fatal(err)
		}
		delete(m, "apiVersion")
		delete(m, "kind")
		fields, _ := json.Marshal(fieldSet(m))
		vmi.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "tether-bench", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "kubevirt.io/v1", Time: &vmi.CreationTimestamp, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields}}}
		list.Items = append(list.Items, *vmi)
	}
	body, err := json.Marshal(&list)
	if err != nil {
		tb.Fatal(err)
	}
	if metaLast {
		var m map[string]json.RawMessage // encoding/json writes a map's keys sorted: items before metadata
		if err := json.Unmarshal(body, &m); err != nil {
			tb.Fatal(err)
		}
		if body, err = json.Marshal(m); err != nil {
			tb.Fatal(err)
		}
	}
	return body
}

// fieldSet is v as a managedFields entry's field set.
func fieldSet(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return map[string]any{}
	}
	out := map[string]any{}
	for k, x := range m {
		out["f:"+k] = fieldSet(x)
	}
	return out
}

// The cost of reading a page's continue token ahead, against decoding the
// page: a page of 500 VMIs.
func BenchmarkPage(b *testing.B) {
	for _, metaLast := range []bool{false, true} {
		body := benchPage(b, 500, metaLast)
		b.Run(fmt.Sprintf("metaLast=%v/continueOf", metaLast), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if continueOf(body) == "" {
					b.Fatal("no continue token")
				}
			}
		})
		for _, lean := range []bool{false, true} {
			name := "decode"
			if lean {
				name = "decode+lean" // and made objects, lean
			}
			b.Run(fmt.Sprintf("metaLast=%v/%s", metaLast, name), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				var pg wirePage[vmiWire]
				for b.Loop() {
					if err := pg.decode(body); err != nil {
						b.Fatal(err)
					}
					if !lean {
						continue
					}
					out := make([]snapshot.VMI, 0, len(pg.Items))
					for i := range pg.Items {
						out = append(out, pg.Items[i].object())
					}
				}
			})
		}
	}
}
