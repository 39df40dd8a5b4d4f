package controller

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// BenchmarkCacheHeldPerVMI: the heap a cache's store holds per VMI with
// its VM, of the shape tether-bench seeds (four hot-plugged volumes, all in
// the VM's spec, no labels) and of that shape with labels as KubeVirt's
// objects carry them, decoded from JSON as an informer decodes them and
// kept under their keys, for each transform: whole objects without
// managedFields, lean ones (snapshot.Lean), and the controller's
// (leanCache: lean, then compact).
//
//	go test -run '^$' -bench CacheHeldPerVMI -benchtime 1x ./internal/controller/
func BenchmarkCacheHeldPerVMI(b *testing.B) {
	const n = 5000
	lean := func(o any) (any, error) {
		o, err := stripManagedFields(o)
		return snapshot.Lean(o), err
	}
	for _, labelled := range []bool{false, true} {
		vm, vmi := benchShape(b, labelled)
		for _, tc := range []struct {
			name      string
			transform func(any) (any, error)
		}{{"whole", stripManagedFields}, {"lean", lean}, {"controller", leanCache}} {
			b.Run(fmt.Sprintf("labels=%t/%s", labelled, tc.name), func(b *testing.B) {
				var per float64
				for b.Loop() {
					per = heldPerVMI(b, n, vm, vmi, tc.transform)
				}
				b.ReportMetric(per, "B/VMI")
			})
		}
	}
}

// benchShape is the JSON of tether-bench's VM and VMI (seedOne), as the
// API server returns them: with managedFields and a resourceVersion. With
// labels, the VM and its template carry two and the VMI four (the
// template's and those virt-controller adds).
func benchShape(b *testing.B, labels bool) (vm, vmi []byte) {
	var vmOpts, vmiOpts []fixture.Option
	for h := 0; h < 4; h++ {
		vol := fmt.Sprintf("vm-00042-hp%d", h)
		vmOpts = append(vmOpts, fixture.WithVolume(vol, fixture.PVC(vol), fixture.Hotpluggable()))
		vmiOpts = append(vmiOpts, fixture.WithHotplug(vol))
	}
	v := fixture.VM("vm-00042", append(vmOpts, fixture.InNamespace("bench"))...)
	i := fixture.VMI("vm-00042", append(vmiOpts, fixture.InNamespace("bench"), fixture.OwnedBy(v))...)
	if labels {
		domain := []string{"kubevirt.io/domain", "vm-00042", "kubevirt.io/size", "small"}
		v.Labels = map[string]string{"app": "bench", "vm.kubevirt.io/template": "fedora-server-small"}
		v.Spec.Template.ObjectMeta.Labels = map[string]string{domain[0]: domain[1], domain[2]: domain[3]}
		i.Labels = map[string]string{domain[0]: domain[1], domain[2]: domain[3], "kubevirt.io/nodeName": "node-1", "kubevirt.io/vm": "vm-00042"}
	}
	for _, m := range []*metav1.ObjectMeta{&v.ObjectMeta, &i.ObjectMeta} {
		m.Annotations = map[string]string{"kubevirt.io/paused": "true"}
		m.ResourceVersion = "123456"
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "tether-bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "kubevirt.io/v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}
	}
	vm, err := json.Marshal(v)
	if err == nil {
		vmi, err = json.Marshal(i)
	}
	if err != nil {
		b.Fatal(err)
	}
	return vm, vmi
}

// heldPerVMI decodes n copies of vm and vmi (each its own name), applies
// transform and keeps them in a cache.Store, and returns the heap they hold
// per VMI.
func heldPerVMI(b *testing.B, n int, vm, vmi []byte, transform func(any) (any, error)) float64 {
	decoder := serializer.NewCodecFactory(clients.Scheme()).UniversalDeserializer()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	before := heapInUse()
	for i := range n {
		for _, raw := range [][]byte{vm, vmi} {
			// A name of its own, as long as the original.
			raw = []byte(string(raw))
			copy(raw[indexOf(raw, `"vm-00042"`)+1:], fmt.Sprintf("vm-%05d", i))
			obj, _, err := decoder.Decode(raw, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			out, err := transform(obj)
			if err == nil {
				err = store.Add(out)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	per := float64(heapInUse()-before) / float64(n)
	runtime.KeepAlive(store)
	return per
}

func indexOf(s []byte, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if string(s[i:i+len(sub)]) == sub {
			return i
		}
	}
	panic("not found: " + sub)
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
