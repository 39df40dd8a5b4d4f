package check

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

const (
	benchVMIs      = 10000
	benchHotplugs  = 4
	benchNamespace = 10
)

// benchSnapshot builds benchVMIs VMIs with benchHotplugs hot-plugs each,
// spread over benchNamespace namespaces, with one attachment pod per VMI and
// a tenant whose nodes are the VMs and that attaches most volumes. In the
// "mixed" layout the VM spec lists two volumes, the tenant attaches the
// third, and every tenth VMI has an orphaned fourth volume (the tenant's,
// attached nowhere); every hundredth attachment pod is orphaned. In
// the "orphans" layout every VM is gone and there is no tenant, so every
// volume is a finding.
func benchSnapshot(layout string) snapshot.Snapshot {
	var s snapshot.Snapshot
	tenant := f.Tenant("t1")
	for k := 0; k < benchVMIs; k++ {
		// Sorted by namespace, then name, as a LIST returns them.
		i := (k%(benchVMIs/benchNamespace))*benchNamespace + k/(benchVMIs/benchNamespace)
		nsName := fmt.Sprintf("ns-%d", i%benchNamespace)
		ns := f.InNamespace(nsName)
		name := fmt.Sprintf("vm-%05d", i)
		vols := make([]string, benchHotplugs)
		for j := range vols {
			vols[j] = fmt.Sprintf("pvc-%05d-%d", i, j)
		}
		vm := f.VM(name, ns, f.Running(),
			f.WithVolume(vols[0], f.PVC(vols[0]), f.Hotpluggable()),
			f.WithVolume(vols[1], f.PVC(vols[1]), f.Hotpluggable()))
		opts := []f.Option{ns, f.OwnedBy(vm), f.Labels("cluster", "c1")}
		for _, v := range vols {
			opts = append(opts, f.WithHotplug(v))
			s.PVCs = append(s.PVCs, *f.PVC(v, ns)) // the claims exist: nothing dangles
		}
		vmi := f.VMI(name, opts...)
		pod := f.AttachmentPod("hp-volume-"+name, ns, f.LaunchedBy(vmi), f.Claims(vols...))
		if i%100 == 99 {
			pod = f.AttachmentPod("hp-volume-old-"+name, ns, f.LaunchedBy(vmi), f.Claims("gone-"+name))
		}
		s.VMIs = append(s.VMIs, snapshot.VMIOf(vmi))
		s.AttachmentPods = append(s.AttachmentPods, *pod)
		if layout == "orphans" {
			continue
		}
		s.VMs = append(s.VMs, snapshot.VMOf(vm))
		// The tenant node is the VM, in the VM's own namespace.
		f.NodesIn(nsName, name)(&tenant)
		f.Attaches(name, vols[2])(&tenant)
		if i%10 != 9 {
			f.Attaches(name, vols[3])(&tenant)
		} else {
			f.Volumes(vols[3])(&tenant) // the tenant's volume, attached nowhere
		}
	}
	if layout != "orphans" {
		s.Tenants = []snapshot.Tenant{tenant}
	}
	s.FeatureGates = hotplugGate()
	return s
}

// BenchmarkHotplugChecks is the pass of the two hot-plug checks alone
// (OrphanHotplugVolume, OrphanAttachmentPod) on an indexed snapshot.
func BenchmarkHotplugChecks(b *testing.B) {
	s := snapshot.New(benchSnapshot("mixed"))
	p := DefaultPolicy()
	p.Checks = []string{OrphanHotplugVolume, OrphanAttachmentPod}
	b.ReportAllocs()
	n, cpu := 0, processCPU()
	for b.Loop() {
		n = len(Run(s, p, now))
	}
	reportPerVMI(b, n, processCPU()-cpu)
}

func BenchmarkRun(b *testing.B) {
	for _, layout := range []string{"mixed", "orphans"} {
		base := benchSnapshot(layout)
		b.Run(layout+"/index+run", func(b *testing.B) {
			b.ReportAllocs()
			n, cpu := 0, processCPU()
			for b.Loop() {
				n = len(Run(snapshot.New(base), DefaultPolicy(), now))
			}
			reportPerVMI(b, n, processCPU()-cpu)
		})
		b.Run(layout+"/run", func(b *testing.B) {
			s := snapshot.New(base)
			b.ReportAllocs()
			n, cpu := 0, processCPU()
			for b.Loop() {
				n = len(Run(s, DefaultPolicy(), now))
			}
			reportPerVMI(b, n, processCPU()-cpu)
		})
	}
}

// reportPerVMI reports wall time per VMI and, because the machine may be
// shared, the process CPU time per pass (with -cpu 1 that is one core's work).
func reportPerVMI(b *testing.B, findings int, cpu time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchVMIs, "ns/VMI")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/pass")
	}
	b.ReportMetric(float64(findings), "findings")
}

// BenchmarkReportOnlyCost is the all-checks pass with and without the
// report-only checks of issue 29 (StuckHotplugPhase, SharedClaimConflict,
// InterruptedVolumeMigration), in one run, for their share of the cost.
func BenchmarkReportOnlyCost(b *testing.B) {
	s := snapshot.New(benchSnapshot("mixed"))
	// The checks of the drift of 2024, and the ones that came after them.
	before := []string{OrphanHotplugVolume, OrphanAttachmentPod, DanglingVolumeReference, StaleVolumeAttachment, MultiAttachConflict, BlockedDeletion}
	cases := []struct {
		name   string
		checks []string
	}{{"before", before}, {"after", Names()}}
	for _, name := range Names() {
		if !slices.Contains(before, name) {
			cases = append(cases, struct {
				name   string
				checks []string
			}{name, []string{name}})
		}
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p := DefaultPolicy()
			p.Checks = c.checks
			b.ReportAllocs()
			n, cpu := 0, processCPU()
			for b.Loop() {
				n = len(Run(s, p, now))
			}
			reportPerVMI(b, n, processCPU()-cpu)
		})
	}
}
