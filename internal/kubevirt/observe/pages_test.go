package observe

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/randfill"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// TestLeanDecode: a page of random VMIs (and one of random VMs), written
// as the server writes them, decodes to what the API machinery's own
// decoder (the client's) makes of it, both made lean (snapshot.Lean), and
// what the checks read of it (object) is snapshot.VMIOf (VMOf) of that.
func TestLeanDecode(t *testing.T) {
	dec := serializer.NewCodecFactory(clients.Scheme()).UniversalDeserializer()
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := 0; seed < seeds; seed++ {
		vmis, vms := randomPages(seed)

		body := mustJSON(t, &vmis)
		var want kubevirtv1.VirtualMachineInstanceList
		decodeWhole(t, dec, body, &want)
		got, err := decodePage[vmiWire](body)
		if err != nil {
			t.Fatalf("seed %d: VMI page: %v", seed, err)
		}
		if got.Metadata.Continue != "tok" || len(got.Items) != len(want.Items) {
			t.Fatalf("seed %d: continue %q, %d items, want %d", seed, got.Metadata.Continue, len(got.Items), len(want.Items))
		}
		for i := range want.Items {
			w := want.Items[i]
			if g, o := got.Items[i].object(), snapshot.VMIOf(&w); !reflect.DeepEqual(g, o) {
				t.Fatalf("seed %d VMI %d, as the checks read it:\ngot  %s\nwant %s", seed, i, mustJSON(t, g), mustJSON(t, o))
			}
			g := got.Items[i].typed()
			snapshot.Lean(&g)
			snapshot.Lean(&w)
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("seed %d VMI %d:\ngot  %s\nwant %s", seed, i, mustJSON(t, g), mustJSON(t, w))
			}
		}

		body = mustJSON(t, &vms)
		var wantVMs kubevirtv1.VirtualMachineList
		decodeWhole(t, dec, body, &wantVMs)
		gotVMs, err := decodePage[vmWire](body)
		if err != nil {
			t.Fatalf("seed %d: VM page: %v", seed, err)
		}
		for i := range wantVMs.Items {
			w := wantVMs.Items[i]
			if g, o := gotVMs.Items[i].object(), snapshot.VMOf(&w); !reflect.DeepEqual(g, o) {
				t.Fatalf("seed %d VM %d, as the checks read it:\ngot  %s\nwant %s", seed, i, mustJSON(t, g), mustJSON(t, o))
			}
			g := gotVMs.Items[i].typed()
			snapshot.Lean(&g)
			snapshot.Lean(&w)
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("seed %d VM %d:\ngot  %s\nwant %s", seed, i, mustJSON(t, g), mustJSON(t, w))
			}
		}
	}
}

// randomPages are a page of random VMIs and one of random VMs, each with
// the continue token "tok".
func randomPages(seed int) (vmis kubevirtv1.VirtualMachineInstanceList, vms kubevirtv1.VirtualMachineList) {
	f := randfill.NewWithSeed(int64(seed)).NilChance(0.3).NumElements(0, 3).MaxDepth(8).Funcs(fillers...)
	f.Fill(&vmis.Items)
	f.Fill(&vms.Items)
	vmis.Kind, vmis.APIVersion = "VirtualMachineInstanceList", "kubevirt.io/v1"
	vms.Kind, vms.APIVersion = "VirtualMachineList", "kubevirt.io/v1"
	vmis.Continue, vms.Continue = "tok", "tok"
	return vmis, vms
}

// fillers keep random values to what the API can hold: strings without
// invalid UTF-8 are what randfill makes already; raw JSON must be JSON.
var fillers = []any{
	func(r *runtime.RawExtension, c randfill.Continue) { r.Raw = []byte(`{"a":1}`) },
	func(r *metav1.FieldsV1, c randfill.Continue) { r.Raw = []byte(`{"f:a":{}}`) },
	func(q *resource.Quantity, c randfill.Continue) {
		*q = *resource.NewQuantity(c.Int63n(1<<40), resource.BinarySI)
	},
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeWhole(t *testing.T, dec runtime.Decoder, body []byte, into runtime.Object) {
	t.Helper()
	if _, _, err := dec.Decode(body, nil, into); err != nil {
		t.Fatalf("the API machinery's decoder: %v", err)
	}
}

// The page reader finds the server as client-go does: a host without a
// scheme (https when TLS is configured, as here), or behind an API proxy's
// path prefix, or with a trailing slash.
func TestNewPageReader_serverURL(t *testing.T) {
	for host, want := range map[string]string{
		"https://10.0.0.1:6443":                     "https://10.0.0.1:6443",
		"https://10.0.0.1:6443/":                    "https://10.0.0.1:6443",
		"10.0.0.1:6443":                             "https://10.0.0.1:6443",
		"https://rancher.example/k8s/clusters/c-1":  "https://rancher.example/k8s/clusters/c-1",
		"https://rancher.example/k8s/clusters/c-1/": "https://rancher.example/k8s/clusters/c-1",
	} {
		p, err := NewPageReader(&rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if p.host != want {
			t.Errorf("host %q: the page reader asks %q, want %q", host, p.host, want)
		}
	}
}

// decodePage decodes one LIST page into the wire form W, as the page
// reader does.
func decodePage[W any](body []byte) (*wirePage[W], error) {
	var pg wirePage[W]
	return &pg, pg.decode(body)
}

// A domain's disks keep those marked shareable, however the JSON spells
// the name, and what does not decode is an error as before.
func TestShareableDisks(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`null`, `[]`},
		{`[]`, `[]`},
		{`[{"name":"a"},{"name":"b","shareable":true},{"name":"c","shareable":false}]`, `[b:true c:false]`},
		{`[{"name":"a","\u0073hareable":true},{"n\u0061me":"b","shareable":true}]`, `[a:true b:true]`},
		{`[{"name":"a","cdrom":{"bus":"sata"}},{"shareable":null,"name":"z"}]`, `[]`},
		{`[5]`, `error`},
		{`[{"name":"a","shareable":"yes"}]`, `error`},
	} {
		var w specWire
		err := jsonv2.Unmarshal([]byte(`{"domain":{"devices":{"disks":`+c.in+`}}}`), &w, leanDecoding)
		got := "["
		for i, d := range w.Domain.Devices.Disks {
			if i > 0 {
				got += " "
			}
			got += fmt.Sprintf("%s:%v", d.Name, *d.Shareable)
		}
		got += "]"
		if err != nil {
			got = "error"
		}
		if got != c.want {
			t.Errorf("%s: got %s, want %s (%v)", c.in, got, c.want, err)
		}
	}
}
