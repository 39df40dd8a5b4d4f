package check

import (
	"encoding/json"
	"math/rand"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// readsWorld is a random world with every kind: the hot-plug generator's
// VMs, VMIs, attachment pods, claims and DataVolumes, and a storage world
// of pods, Nodes, VolumeAttachments, PVs and CSIDrivers beside them. Every
// pod list holds the attachment pods, as an observer's does.
func readsWorld(r *rand.Rand) (*snapshot.Snapshot, Policy) {
	b := make([]byte, 64+r.Intn(192))
	r.Read(b)
	hot, p, _ := buildDangling(b)
	vb := make([]byte, 4)
	r.Read(vb)
	items, vp := vaWorld(vb)
	if r.Intn(2) == 0 { // a pod on node-2 waiting for the volume
		items = append(items, node("node-2"), waiting())
	}
	if r.Intn(4) == 0 {
		items = append(items, f.CSIDriver(f.CSIDriverName, r.Intn(2) == 0))
	}
	st := f.Snapshot(items...)
	// Now and then the claim and its PV are stuck terminating on their
	// protection finalizers, for BlockedDeletion to say who holds them.
	gone := metav1.NewTime(now.Add(-time.Hour))
	if r.Intn(3) == 0 {
		for i := range st.PVCs {
			st.PVCs[i].DeletionTimestamp, st.PVCs[i].Finalizers = &gone, []string{snapshot.PVCProtectionFinalizer}
		}
	}
	if r.Intn(3) == 0 {
		for i := range st.PVs {
			st.PVs[i].DeletionTimestamp, st.PVs[i].Finalizers = &gone, []string{snapshot.PVProtectionFinalizer}
		}
	}
	s := hot.Only(snapshot.AllKinds)
	// The tenant attach checks' world, from the same bytes.
	ta := f.Snapshot(tenantAttachGen(b)...)
	s.VMs, s.VMIs, s.Tenants = append(s.VMs, ta.VMs...), append(s.VMIs, ta.VMIs...), append(s.Tenants, ta.Tenants...)
	// The report-only checks' world, in a namespace of its own.
	rb := make([]byte, 96)
	r.Read(rb)
	rw, _, _ := (&gen{b: rb}).reportWorld()
	s.VMs, s.VMIs, s.PVCs = append(s.VMs, rw.VMs...), append(s.VMIs, rw.VMIs...), append(s.PVCs, rw.PVCs...)
	s.AttachmentPods = append(s.AttachmentPods, rw.AttachmentPods...)
	if !hot.FeatureGates.Known {
		s.FeatureGates = rw.FeatureGates
	}
	if r.Intn(3) == 0 { // a hot-plug on the virtio bus with a serial its guest sees cut
		for i := range s.VMIs {
			if vs := s.VMIs[i].Status.VolumeStatus; len(vs) > 0 && vs[0].HotplugVolume != nil {
				s.VMIs[i].Spec.Domain.Devices.Disks = append(slices.Clip(s.VMIs[i].Spec.Domain.Devices.Disks), virtioDisk(vs[0].Name, longSerial))
				break
			}
		}
	}
	if r.Intn(3) == 0 { // nothing guards attachment pods against a drain
		s.EvictionGuard = guardNoWebhook
		if r.Intn(2) == 0 {
			vmi := f.VMI("vm-drained", f.InNamespace("drain"), f.WithHotplug("pvc-1"), f.Migratable(corev1.ConditionTrue))
			s.VMIs = append(s.VMIs, snapshot.VMIOf(vmi))
			s.AttachmentPods = append(s.AttachmentPods, *f.AttachmentPod("hp-volume-vm-drained", f.InNamespace("drain"), f.LaunchedBy(vmi)))
		}
	}
	if r.Intn(3) == 0 { // a volume migration's finished source pod
		vmi, pod := volumeMigrated("vm-migrated", f.InNamespace("volmig"))
		s.VMIs, s.Pods = append(s.VMIs, snapshot.VMIOf(vmi)), append(s.Pods, *pod)
	}
	s.Pods = append(append(s.Pods, st.Pods...), s.AttachmentPods...)
	s.PVCs = append(s.PVCs, st.PVCs...)
	s.Nodes, s.VolumeAttachments, s.PVs, s.CSIDrivers, s.NodesGoneSince = st.Nodes, st.VolumeAttachments, st.PVs, st.CSIDrivers, st.NodesGoneSince
	p.Storage = vp.Storage
	p.Checks = nil
	return snapshot.New(s), p
}

// TestChecksReadOnlyWhatTheyDeclare: over random worlds holding every kind,
// each check finds exactly the same from only the kinds it declares
// (Reads) as from the whole world. A check that reads an undeclared kind
// would, under `--checks`, see it empty: a missing VM, claim or pod that
// is there.
func TestChecksReadOnlyWhatTheyDeclare(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	worlds := 20000
	if testing.Short() {
		worlds = 2000
	}
	found := map[string]int{}
	for i := 0; i < worlds; i++ {
		s, p := readsWorld(r)
		for _, c := range All() {
			p.Checks = []string{c.Name}
			whole := Run(s, p, now)
			k := Reads(p.Checks)
			only := s.Only(k)
			part := Run(snapshot.New(only), p, now)
			a, _ := json.Marshal(whole)
			b, _ := json.Marshal(part)
			if string(a) != string(b) {
				t.Fatalf("world %d: %s finds otherwise from only %s:\nwhole: %s\nonly:  %s", i, c.Name, k, a, b)
			}
			found[c.Name] += len(whole)
		}
	}
	// The worlds must give every check something to find, or the test
	// proves nothing about it.
	for _, c := range All() {
		if found[c.Name] == 0 {
			t.Errorf("no world gave %s a finding", c.Name)
		}
	}
	t.Logf("findings per check over %d worlds: %v", worlds, found)
}

func TestReads(t *testing.T) {
	if Reads(nil) != snapshot.AllKinds || Reads([]string{"NoSuchCheck"}) != snapshot.AllKinds {
		t.Fatal("no names, or an unknown one, must read everything")
	}
	got := Reads([]string{OrphanHotplugVolume, OrphanAttachmentPod})
	if !got.Has(snapshot.KindAttachmentPods) || got.Has(snapshot.KindPods) || got.Has(snapshot.KindStorage) {
		t.Fatalf("hot-plug checks read %s", got)
	}
	for _, c := range All() {
		if c.Reads == 0 {
			t.Errorf("%s declares no reads", c.Name)
		}
	}
}
