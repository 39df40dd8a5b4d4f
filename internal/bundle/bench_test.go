package bundle

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/testing/bundles"
)

var (
	benchVMIs = flag.Int("bundle.vmis", 10000, "BenchmarkAuditLargeDump: VMIs in the dump")
	benchFile = flag.String("bundle.file", "", "BenchmarkAuditLargeDump: the dump file, written if missing and kept (default: a temporary one)")
)

// BenchmarkAuditLargeDump is what an audit of a large dump holds: a `kubectl
// get vm,vmi -A -o json` file of tether-bench's audit world (-bundle.vmis
// VMIs, four hot-plugs each, two of them outside the VM spec), read
// (held-MiB/open: the bundle's heap once read, after a collection), then
// observed as `tether audit --from` observes it (held-MiB/bundle+snapshot;
// held-MiB/snapshot once the bundle is closed, as audit --from closes it
// then: what a live audit's snapshot of the world holds) and decided with
// every check (held-MiB/audit: the snapshot and the findings). No figure is asserted: docs/bundles.md records them beside
// the live audit's.
func BenchmarkAuditLargeDump(b *testing.B) {
	path := *benchFile
	if path == "" {
		path = filepath.Join(b.TempDir(), "dump.json")
	}
	if _, err := os.Stat(path); err != nil {
		if err := bundles.WriteLarge(path, *benchVMIs, 4); err != nil {
			b.Fatal(err)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Size())/(1<<20), "file-MiB")
	var opened, both, observed, audited float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		base := heap()
		bd, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		opened += heap() - base
		s, err := observe.Observe(context.Background(), bd, observe.Options{PageSize: observe.Unpaged, Lean: true, Pages: bd})
		if err != nil {
			b.Fatal(err)
		}
		both += heap() - base
		bd.Close() // as audit --from does once it has observed
		observed += heap() - base
		fs := check.RunDeferred(s, check.DefaultPolicy(), time.Now()) // as audit runs them: words when printed
		audited += heap() - base
		if len(fs) == 0 {
			b.Fatal("no findings")
		}
		runtime.KeepAlive(bd)
		runtime.KeepAlive(s)
		runtime.KeepAlive(fs)
	}
	b.ReportMetric(opened/float64(b.N), "held-MiB/open")
	b.ReportMetric(both/float64(b.N), "held-MiB/bundle+snapshot")
	b.ReportMetric(observed/float64(b.N), "held-MiB/snapshot")
	b.ReportMetric(audited/float64(b.N), "held-MiB/audit")
}

// heap is the heap in use after a collection, in MiB.
func heap() float64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}
