package check

import (
	"runtime"
	"testing"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// BenchmarkAuditHeld is what an audit's decision costs in memory on the
// benchmark worlds: the checks' pass, then the first-sighting stage's one
// question per finding (SeenTwice), as `tether audit` asks them. It
// reports the bytes the findings hold once made (held-B/finding, after a
// collection, the snapshot aside) and the bytes allocated per pass
// (alloc-MB/pass: garbage made while the snapshot and the findings are
// held, which is when an audit's heap is largest).
//
// "orphans": every VM gone, so every hot-plug is an OwnerGone finding;
// "declarative": KubeVirt v1.9.0's defaults (declarative hot-plug sync)
// and no tenant, so each VMI's two hot-plugs outside the VM spec are
// DeclarativeSync findings, as in tether-bench's world.
func BenchmarkAuditHeld(b *testing.B) {
	worlds := map[string]func() snapshot.Snapshot{
		"orphans": func() snapshot.Snapshot { return benchSnapshot("orphans") },
		"declarative": func() snapshot.Snapshot {
			s := benchSnapshot("mixed")
			s.Tenants, s.FeatureGates = nil, gatesWith(nil, nil)
			return s
		},
	}
	for _, world := range []string{"orphans", "declarative"} {
		s := snapshot.New(worlds[world]())
		for _, job := range []struct {
			name   string
			checks []string
		}{{"one-check", []string{OrphanHotplugVolume}}, {"all", nil}} {
			b.Run(world+"/"+job.name, func(b *testing.B) {
				p := DefaultPolicy()
				p.Checks = job.checks
				var fs []drift.Finding
				var before, after runtime.MemStats
				held := 0.0
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					fs = nil
					runtime.GC()
					runtime.ReadMemStats(&before)
					fs = Run(s, p, now)
					for _, f := range fs {
						SeenTwice(p, f.Check)
					}
					runtime.GC()
					runtime.ReadMemStats(&after)
					held += float64(after.HeapAlloc) - float64(before.HeapAlloc)
				}
				if len(fs) == 0 {
					b.Fatal("no findings")
				}
				b.ReportMetric(held/float64(b.N)/float64(len(fs)), "held-B/finding")
				b.ReportMetric(float64(len(fs)), "findings")
				runtime.KeepAlive(fs)
			})
		}
	}
}
