package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/bundles"
)

// Reading a dump allocates about what a live audit's page reader allocates
// decoding the same objects in pages (the reference here: the dump's items
// decoded by observe.Decoder in pages of the live page size), not a
// multiple of it: the memory a bundle leaves behind is what decoding its
// objects leaves, laid out as a live audit's. Allocation counts are
// deterministic, unlike peak memory; docs/bundles.md gives the peak beside
// the live audit's at 100,000 VMIs.
func TestOpenAllocatesAsALiveRead(t *testing.T) {
	const vmis = 3000
	path := filepath.Join(t.TempDir(), "dump.json")
	if err := bundles.WriteLarge(path, vmis, 4); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	var pagesVMI, pagesVM [][]byte
	var vmiItems, vmItems [][]byte
	for _, it := range list.Items {
		if bytes.Contains(it, []byte(`"kind":"VirtualMachineInstance"`)) {
			vmiItems = append(vmiItems, it)
		} else {
			vmItems = append(vmItems, it)
		}
	}
	pagesVMI, pagesVM = pagesOf(vmiItems), pagesOf(vmItems)
	raw, list.Items, vmiItems, vmItems = nil, nil, nil, nil

	reference := allocated(func() {
		var d observe.Decoder
		var vs []snapshot.VMI
		var ms []snapshot.VM
		for _, p := range pagesVMI {
			if err := d.VMIs(p, func(v snapshot.VMI) { vs = append(vs, v) }); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range pagesVM {
			if err := d.VMs(p, func(v snapshot.VM) { ms = append(ms, v) }); err != nil {
				t.Fatal(err)
			}
		}
		if len(vs) != vmis || len(ms) != vmis {
			t.Fatalf("reference decoded %d VMIs and %d VMs", len(vs), len(ms))
		}
	})
	var b *Bundle
	opened := allocated(func() {
		if b, err = Open(path, Options{}); err != nil {
			t.Fatal(err)
		}
	})
	if b.Read["VirtualMachineInstance"] != vmis || b.Read["VirtualMachine"] != vmis {
		t.Fatalf("read %v", b.Read)
	}
	t.Logf("Open allocated %.1f MiB, decoding the same objects in pages %.1f MiB (%.2fx)", mib(opened), mib(reference), float64(opened)/float64(reference))
	if float64(opened) > 1.25*float64(reference) {
		t.Errorf("Open allocated %.1f MiB for %d VMIs and VMs, %.2f times what decoding them in pages does (%.1f MiB): want at most 1.25 times",
			mib(opened), 2*vmis, float64(opened)/float64(reference), mib(reference))
	}
}

func pagesOf(items [][]byte) [][]byte {
	var out [][]byte
	for len(items) > 0 {
		n := min(len(items), observe.DefaultPageSize)
		out = append(out, []byte(`{"items":[`+string(bytes.Join(items[:n], []byte(",")))+`]}`))
		items = items[n:]
	}
	return out
}

func allocated(f func()) uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	f()
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc - before
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// A VMI that does not decode is skipped alone, saying which and why; the
// others of its page are read, across pages, and of two copies of one VMI
// the later resourceVersion stays.
func TestPagedVMIs_badOneSkippedAlone(t *testing.T) {
	const n = 1201 // three pages
	var items []string
	for i := range n {
		phase := `"Running"`
		if i == 700 {
			phase = `5` // not a string: does not decode
		}
		items = append(items, fmt.Sprintf(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"vmi-%04d","namespace":"ns","resourceVersion":"10"},"status":{"phase":%s,"nodeName":"n%d"}}`, i, phase, i))
	}
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a-vmis.json", `{"apiVersion":"v1","items":[`+strings.Join(items, ",")+`],"kind":"List"}`)
	write("b-again.json", `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"vmi-0003","namespace":"ns","resourceVersion":"11"},"status":{"phase":"Running","nodeName":"later"}}`)
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Read["VirtualMachineInstance"]; got != n-1 {
		t.Errorf("read %d VMIs, want %d", got, n-1)
	}
	if !skipped(b, "VirtualMachineInstance ns/vmi-0700 does not decode as kubevirt.io/v1") {
		t.Errorf("skipped %+v: want vmi-0700 said", b.Skipped)
	}
	vs := b.vmis.all
	if len(vs) != n-1 || vs[0].Name != "vmi-0000" || vs[len(vs)-1].Name != fmt.Sprintf("vmi-%04d", n-1) {
		t.Fatalf("%d VMIs, first %q, last %q", len(vs), vs[0].Name, vs[len(vs)-1].Name)
	}
	for i := range vs {
		want := fmt.Sprintf("n%d", i)
		if i >= 700 {
			want = fmt.Sprintf("n%d", i+1)
		}
		if i == 3 {
			want = "later"
		}
		if vs[i].Status.NodeName != want {
			t.Errorf("VMI %d (%s) on %q, want %q", i, vs[i].Name, vs[i].Status.NodeName, want)
		}
	}
}
