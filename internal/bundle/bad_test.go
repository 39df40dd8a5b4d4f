package bundle

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/bundles"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// newDecoder is a decoder of one file's objects, bounded by max.
func newDecoder(max int64) *decoder {
	b := &Bundle{Read: map[string]int{}, Other: map[string]int{}, cover: map[*kind]*Coverage{}}
	return &decoder{b: b, max: max, facts: &facts{}}
}

// Many JSON values in one file (kubectl cluster-info dump's lists, or
// crafted input) cost what one does: the bytes allocated do not grow by a
// buffer per value read before.
func TestManyJSONValuesCostWhatOneDoes(t *testing.T) {
	const n = 20000
	in := `{"kind":"NodeList","apiVersion":"v1","items":[{"metadata":{"name":"n1"}}]}` + strings.Repeat("{}\n", n)
	d := newDecoder(DefaultMaxObject)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	if _, err := d.file("nodes.json", strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	if got := ms.TotalAlloc - before; got > 256<<20 {
		t.Fatalf("%d small JSON values allocated %d MiB: a buffer per value", n, got>>20)
	}
	if d.b.Read["Node"] != 1 {
		t.Fatalf("read %v", d.b.Read)
	}
}

// An object beyond the bound is skipped and said so, in every form it can
// come in: a long YAML line, one JSON object, items that wait for their
// List's kind; the objects before it are read.
func TestOversizedIsSkippedInEveryForm(t *testing.T) {
	big := strings.Repeat("x", 4096)
	for _, c := range []struct {
		name, in, want string
		read           int
	}{
		{"yaml line", "apiVersion: v1\nkind: Node\nmetadata:\n  name: small\n---\napiVersion: v1\nkind: Node\nmetadata: {name: big, annotations: {a: " + big + "}}\n", "larger than --max-object-size", 1},
		{"json object", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"small"}}` + "\n" + `{"apiVersion":"v1","kind":"Node","metadata":{"name":"big","annotations":{"a":"` + big + `"}}}`, "larger than --max-object-size", 1},
		{"json pending items", `{"apiVersion":"v1","items":[{"metadata":{"name":"small"}},{"metadata":{"name":"a` + big[:600] + `"}},{"metadata":{"name":"b` + big[:600] + `"}}],"kind":"NodeList"}`, "names its kind only after them", 2},
	} {
		d := newDecoder(1024)
		n, err := d.file("f", strings.NewReader(c.in))
		if err != nil {
			d.skip("f", err.Error(), false)
		}
		if d.b.Read["Node"] != c.read || !skipped(d.b, c.want) {
			t.Errorf("%s: read %d object(s), %v; skipped %+v; want %d Node(s) and a skip saying %q", c.name, n, d.b.Read, d.b.Skipped, c.read, c.want)
		}
	}
}

// FuzzOpen: any bytes as a bundle file (plain, tar, gzip, zip) end in a
// bundle with objects or an error, never a panic, a hang or a bundle that
// read nothing.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	src := filepath.Join(dir, "src")
	objs := []client.Object{fixture.NodeObject("n1"), fixture.PVC("c", fixture.InNamespace("ns"))}
	if err := bundles.Write(src, bundles.Harvester, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), objs); err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"b.tar.gz", "b.zip", "b.tar"} {
		p := filepath.Join(dir, name)
		if err := bundles.Archive(src, p); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(podList))
	p := filepath.Join(dir, "bundle") // one file, written anew for each input
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := Open(p, Options{MaxObject: 1 << 16})
		if err == nil && len(b.Read) == 0 {
			t.Fatal("a bundle that read nothing, without an error")
		}
	})
}
