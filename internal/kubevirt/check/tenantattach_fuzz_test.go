package check

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

var (
	taVMs     = []string{"a", "b"}
	taHandles = []string{"dv-1", "dv-2", "pvc-3"}
	taPhases  = []kubevirtv1.VolumePhase{kubevirtv1.VolumeReady, kubevirtv1.VolumeReady, kubevirtv1.HotplugVolumeAttachedToNode,
		kubevirtv1.HotplugVolumeMounted, kubevirtv1.VolumePending, kubevirtv1.HotplugVolumeDetaching}
)

// tenantAttachGen reads a world for the tenant attach checks from bytes:
// VMs and VMIs a and b in the default namespace, each hot-plug handle
// absent, listed under its own name or under another name with the handle
// as its claim, in some phase; and tenants whose nodes w-a and w-b name
// those VMs (or nothing), with VolumeAttachments attached, failing with
// "already exists" or otherwise, being deleted, young or old, recorded
// against the right node ID or another.
func tenantAttachGen(b []byte) []any {
	g := &gen{b: b}
	var items []any
	for _, name := range taVMs {
		if g.n(4) == 0 {
			continue
		}
		var vmOpts []f.Option
		var vmiOpts []f.Option
		for _, h := range taHandles {
			switch g.n(4) {
			case 1:
				vmiOpts = append(vmiOpts, f.WithHotplug(h, f.VolumePhase(taPhases[g.n(len(taPhases))])))
			case 2:
				vmiOpts = append(vmiOpts, f.WithHotplug("disk-"+h, f.Claim(h), f.VolumePhase(taPhases[g.n(len(taPhases))])))
			}
			if g.n(3) == 0 {
				vmOpts = append(vmOpts, f.WithVolume(h, f.DataVolume(h), f.Hotpluggable()))
			}
			if g.n(8) == 0 {
				vmOpts = append(vmOpts, f.PendingAdd(h, f.DataVolume(h)))
			}
		}
		switch g.n(8) {
		case 0:
			vmiOpts = append(vmiOpts, f.Migrating())
		case 1:
			vmiOpts = append(vmiOpts, f.Terminating(now))
		case 2:
			vmiOpts = append(vmiOpts, f.Phase(kubevirtv1.Scheduled))
		case 3:
			vmiOpts = append(vmiOpts, f.CreatedAt(now.Add(-time.Duration(g.n(10))*time.Minute)))
		}
		vm := f.VM(name, append([]f.Option{f.Running()}, vmOpts...)...)
		if g.n(5) != 0 {
			items = append(items, vm)
		}
		items = append(items, f.VMI(name, append([]f.Option{f.OwnedBy(vm)}, vmiOpts...)...))
	}
	for i := g.n(3); i > 0; i-- {
		var opts []f.TenantOption
		for _, name := range taVMs {
			node := "w-" + name
			if g.n(4) != 0 {
				opts = append(opts, f.WithNode(snapshot.TenantNode{Name: node, ProviderID: snapshot.ProviderIDPrefix + name, ClusterNamespace: f.Namespace}))
			} else {
				opts = append(opts, f.WithNode(snapshot.TenantNode{Name: node}))
			}
			for _, h := range taHandles {
				if g.n(3) == 0 {
					continue
				}
				id := f.Namespace + "/" + name
				if g.n(8) == 0 {
					id = f.Namespace + "/other"
				}
				va := []f.Option{f.AttachedToID(id)}
				switch g.n(4) {
				case 0, 1:
					va = append(va, f.Attached())
				case 2:
					va = append(va, f.AttachError(alreadyExists(h), now))
				case 3:
					va = append(va, f.AttachError("timed out waiting for the condition", now))
				}
				if g.n(6) == 0 {
					va = append(va, f.Terminating(now))
				}
				if g.n(5) == 0 {
					va = append(va, f.CreatedAt(now.Add(-time.Duration(g.n(10))*time.Minute)))
				}
				opts = append(opts, f.Attaches(node, h, va...))
			}
		}
		switch g.n(8) {
		case 0:
			opts = append(opts, f.Unreachable("timeout"))
		case 1:
			opts = append(opts, func(t *snapshot.Tenant) { t.DriverMissing = true })
		}
		items = append(items, f.Tenant(string(rune('s'+i)), opts...))
	}
	return items
}

// tenantAttachOracle says which findings the two checks must make, by
// check, VMI and handle, and whether each is held (info) or not. Its
// rules are the platform's, independent of the checks' code:
//
//   - a tenant speaks only when read whole (reachable, its CSIDriver
//     present), through a VolumeAttachment of its driver on a node whose
//     providerID kubevirt://<vm> and cluster-namespace annotation name the
//     VMI's VM, unless an attachment on that node was published to another
//     node ID ("<namespace>/<vm>", csi-driver controller.go:374-375);
//   - the handle is the PV's CSI volume handle; a VMI status entry is the
//     handle's when named after it (csi-driver controller.go:431-445) or
//     using it as claim; Ready hot-plugs are what publish waits for
//     (csi-driver client.go:219-233);
//   - phantom: attached, not being deleted, no Ready hot-plug and no
//     non-hot-plug entry; already present: not attached, error containing
//     "already exists" (virt-api volumes.go:298, 301), a Ready hot-plug;
//   - held: the VMI terminating or migrating (both), not Running or with a
//     pending addvolume (phantom), either object younger than the grace.
func tenantAttachOracle(s *snapshot.Snapshot, grace time.Duration) map[[3]string]bool {
	want := map[[3]string]bool{}
	for i := range s.VMIs {
		vmi := &s.VMIs[i]
		var vm *snapshot.VM
		for j := range s.VMs {
			if s.VMs[j].Name == vmi.Name {
				vm = &s.VMs[j]
			}
		}
		for _, t := range s.Tenants {
			if !t.Reachable || t.DriverMissing {
				continue
			}
			for _, n := range t.Nodes {
				if n.ProviderID != snapshot.ProviderIDPrefix+vmi.Name || n.ClusterNamespace != vmi.Namespace || publishedElsewhere(t, n.Name, vmi) {
					continue
				}
				for _, va := range t.VolumeAttachments {
					if va.Spec.NodeName != n.Name || va.Spec.Attacher != t.CSIDriver() || va.DeletionTimestamp != nil {
						continue
					}
					h := ""
					for _, pv := range t.PVs {
						if pv.Name == *va.Spec.Source.PersistentVolumeName {
							h = pv.Spec.CSI.VolumeHandle
						}
					}
					ready, other := false, false
					for _, vs := range vmi.Status.VolumeStatus {
						claim := ""
						if vs.PersistentVolumeClaimInfo != nil {
							claim = vs.PersistentVolumeClaimInfo.ClaimName
						}
						if vs.Name != h && claim != h {
							continue
						}
						ready = ready || (vs.HotplugVolume != nil && vs.Phase == kubevirtv1.VolumeReady)
						other = other || vs.HotplugVolume == nil
					}
					since := va.CreationTimestamp.Time
					if vmi.CreationTimestamp.After(since) {
						since = vmi.CreationTimestamp.Time
					}
					young := now.Sub(since) < grace
					busy := vmi.DeletionTimestamp != nil || (vmi.Status.MigrationState != nil && !vmi.Status.MigrationState.Completed && !vmi.Status.MigrationState.Failed)
					switch {
					case va.Status.Attached && !ready && !other:
						pending := false
						if vm != nil {
							for _, r := range vm.Status.VolumeRequests {
								pending = pending || (r.AddVolumeOptions != nil && r.AddVolumeOptions.Name == h)
							}
						}
						k := [3]string{PhantomAttach, vmi.Name, h}
						want[k] = want[k] || !(busy || young || pending || vmi.Status.Phase != kubevirtv1.Running)
					case !va.Status.Attached && ready && va.Status.AttachError != nil && strings.Contains(va.Status.AttachError.Message, "already exists"):
						k := [3]string{AttachAlreadyPresent, vmi.Name, h}
						want[k] = want[k] || !(busy || young)
					}
				}
			}
		}
	}
	return want
}

// publishedElsewhere: an attachment on node was recorded against another
// node ID than the VMI's VM, so the node is not certainly that VM.
func publishedElsewhere(t snapshot.Tenant, node string, vmi *snapshot.VMI) bool {
	for _, va := range t.VolumeAttachments {
		id := va.Annotations[snapshot.VANodeIDAnnotation]
		if va.Spec.NodeName == node && va.Spec.Attacher == t.CSIDriver() && id != "" && id != vmi.Namespace+"/"+vmi.Name {
			return true
		}
	}
	return false
}

// The two checks find exactly what the oracle says, over seeded random
// worlds: no phantom or "already present" finding without the tenant's
// and the VMI's word for it, none missed, the held ones info, the others
// critical (PhantomAttach) or warning (AttachAlreadyPresent), and never an
// action.
func TestTenantAttachChecksAgreeWithTheOracle(t *testing.T) {
	reachesEvery(t, 3, func(b []byte) []drift.Finding { return agreeWithTheOracle(t, b) },
		func(fd drift.Finding) string { return fd.Check + " " + string(fd.Severity) },
		"PhantomAttach critical", "PhantomAttach info", "AttachAlreadyPresent warning", "AttachAlreadyPresent info")
}

// reachesEvery runs run on seeded random byte strings (5000, or 1000 with
// -short), counts its findings by key, and fails unless each of want was
// reached (so that the property run checks could fail).
func reachesEvery(t *testing.T, seed uint64, run func([]byte) []drift.Finding, key func(drift.Finding) string, want ...string) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed+1))
	n := 5000
	if testing.Short() {
		n = 1000
	}
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		b := make([]byte, 32+r.IntN(160))
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		for _, fd := range run(b) {
			counts[key(fd)]++
		}
	}
	for _, k := range want {
		if counts[k] == 0 {
			t.Errorf("the generator never reached %s", k)
		}
	}
	t.Logf("findings: %v", counts)
}

// FuzzTenantAttachChecks runs the same comparison on fuzzed worlds.
func FuzzTenantAttachChecks(fz *testing.F) {
	fz.Add([]byte{})
	fz.Add([]byte("phantom attach: attached=true, no Ready hot-plug"))
	fz.Fuzz(func(t *testing.T, b []byte) { agreeWithTheOracle(t, b) })
}

// agreeWithTheOracle runs both checks on the world of b, fails unless
// every finding only reports, with the check's severity or info when held,
// and they match the oracle; it returns the findings.
func agreeWithTheOracle(t *testing.T, b []byte) []drift.Finding {
	t.Helper()
	s := f.Snapshot(tenantAttachGen(b)...)
	p := DefaultPolicy()
	p.Checks = []string{PhantomAttach, AttachAlreadyPresent}
	fs := Run(s, p, now)
	got := map[[3]string]bool{}
	for _, fd := range fs {
		assertWellFormed(t, fd)
		if fd.Action.Type != drift.None || fd.Action.Safe {
			t.Fatalf("input %x: %s proposes %+v", b, fd.Check, fd.Action)
		}
		held := fd.Severity == drift.SeverityInfo
		if !held && fd.Severity != map[string]drift.Severity{PhantomAttach: drift.SeverityCritical, AttachAlreadyPresent: drift.SeverityWarning}[fd.Check] {
			t.Fatalf("input %x: %s with severity %s", b, fd.Check, fd.Severity)
		}
		got[[3]string{fd.Check, fd.Object.Name, fd.Volume}] = !held
	}
	if want := tenantAttachOracle(s, DefaultTenantAttachGrace); !reflect.DeepEqual(got, want) {
		t.Fatalf("input %x:\n got %v\nwant %v", b, got, want)
	}
	return fs
}
