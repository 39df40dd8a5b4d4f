package snapshot_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
)

func TestFeatureGateState(t *testing.T) {
	cases := []struct {
		name  string
		gates snapshot.FeatureGates
		want  snapshot.GateState
	}{
		{"CR unreadable -> unknown", snapshot.FeatureGates{Enabled: []string{"HotplugVolumes"}}, snapshot.GateUnknown},
		{"listed -> enabled", f.Gates("DataVolumes", "HotplugVolumes"), snapshot.GateEnabled},
		{"not listed -> disabled", f.Gates("DataVolumes"), snapshot.GateDisabled},
		{"no gates at all -> disabled", f.Gates(), snapshot.GateDisabled},
		{"listed and disabled -> disabled", snapshot.FeatureGates{Known: true, Enabled: []string{"HotplugVolumes"}, Disabled: []string{"HotplugVolumes"}}, snapshot.GateDisabled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.gates.State(snapshot.HotplugVolumesGate); got != tc.want {
				t.Errorf("State = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestIndexLookups(t *testing.T) {
	vm := f.VM("a")
	vmi := f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1"), f.WithHotplug("v2"))
	other := f.VMI("a", f.InNamespace("other"))
	pod := f.AttachmentPod("hp-volume-a", f.Claims("v1", "v2"))
	s := f.Snapshot(vm, vmi, other, pod, f.PVC("v1"), f.DataVolume("dv"))
	ix := s.Index()
	if ix.VM("default", "a") == nil || ix.VM("other", "a") != nil {
		t.Errorf("VM lookups wrong")
	}
	if got := ix.VMI("other", "a"); got == nil || got.Namespace != "other" {
		t.Errorf("VMI(other, a) = %v", got)
	}
	if ix.AttachmentPod("default", "hp-volume-a") == nil || ix.PVC("default", "v1") == nil || ix.DataVolume("default", "dv") == nil {
		t.Errorf("pod, PVC or DataVolume lookup failed")
	}
	if n := len(ix.VMIsIn("default")); n != 1 {
		t.Errorf("VMIsIn(default) has %d VMIs", n)
	}
	refs := ix.AttachPodRefs("default", "hp-volume-a")
	if len(refs) != 1 || refs[0].VMI.Name != "a" || refs[0].Volume != "v1" || refs[0].PodUID != pod.UID {
		t.Errorf("two volumes through one pod must give one ref, got %+v", refs)
	}
	if s.Index() != ix {
		t.Errorf("Index must be built once")
	}
}

// PVCState says, with the claim, whether it is being deleted.
func TestPVCState(t *testing.T) {
	ix := f.Snapshot(f.PVC("live"), f.PVC("going", f.Terminating(time.Unix(100, 0)))).Index()
	if pvc, deleting := ix.PVCState("default", "live"); pvc == nil || deleting {
		t.Errorf("live: %v %v", pvc, deleting)
	}
	if pvc, deleting := ix.PVCState("default", "going"); pvc == nil || pvc.Name != "going" || !deleting {
		t.Errorf("going: %v %v", pvc, deleting)
	}
	if pvc, deleting := ix.PVCState("default", "none"); pvc != nil || deleting {
		t.Errorf("none: %v %v", pvc, deleting)
	}
}

func TestIndexIsBuiltLazilyForLiterals(t *testing.T) {
	s := &snapshot.Snapshot{VMs: []snapshot.VM{snapshot.VMOf(f.VM("a"))}}
	if s.Index().VM("default", "a") == nil {
		t.Fatal("a literal snapshot must index itself on first use")
	}
}

func TestAttachPodRefs(t *testing.T) {
	a := f.VMI("a", f.WithHotplug("v1"), f.WithHotplug("v2", f.AttachPod("hp-new")))
	b := f.VMI("b", f.WithHotplug("v3", f.AttachPod("hp-new", "other-uid")))
	mig := f.VMI("c", f.Migrating(), f.TargetAttachmentPod("hp-target"))
	// Only namespaces with attachment pods are indexed for them.
	s := f.Snapshot(a, b, mig, f.AttachmentPod("hp-new"))
	ix := s.Index()
	if refs := ix.AttachPodRefs("default", "hp-new"); len(refs) != 2 || refs[0].VMI.Name != "a" || refs[1].PodUID != "other-uid" {
		t.Errorf("refs to hp-new = %+v", refs)
	}
	if got := ix.MigrationTargetOf("default", f.UID("Pod", "default", "hp-target")); got == nil || got.Name != "c" {
		t.Errorf("MigrationTargetOf = %v", got)
	}
	if got := ix.MigrationTargetOf("other", f.UID("Pod", "default", "hp-target")); got != nil {
		t.Errorf("MigrationTargetOf must respect the namespace")
	}
}

func TestTenantsFor(t *testing.T) {
	s := f.Snapshot(f.Tenant("all"), f.Tenant("only-a", f.ForNamespace("a")), f.Tenant("only-b", f.ForNamespace("b")))
	names := func(ns string) []string {
		var out []string
		for _, ti := range s.Index().TenantsFor(ns) {
			out = append(out, ti.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := names("a"); !reflect.DeepEqual(got, []string{"all", "only-a"}) {
		t.Errorf("TenantsFor(a) = %v", got)
	}
	if got := names("c"); !reflect.DeepEqual(got, []string{"all"}) {
		t.Errorf("TenantsFor(c) = %v", got)
	}
}

func TestTenantAttachments(t *testing.T) {
	tenant := f.Tenant("t1",
		f.Attaches("vm-a", "h1"),
		f.Attaches("vm-b", "h1", f.Terminating(time.Unix(0, 0))),
		f.Attaches("vm-a", "h2", f.Attacher("ebs.csi.aws.com")),
		f.WithAttachment(f.VolumeAttachment("inline", "vm-a", "", f.InlineHandle("h3"))),
		f.WithAttachment(f.VolumeAttachment("missing-pv", "vm-c", "pv-gone")),
		f.WithAttachment(f.VolumeAttachment("dup", "vm-d", "pv-dup")),
		f.WithPV(f.PV("pv-dup", "h4")),
		f.WithPV(f.PV("pv-dup", "h5")),
		f.WithAttachment(f.VolumeAttachment("not-csi", "vm-e", "pv-nfs")),
		f.WithPV(nfsPV("pv-nfs")),
	)
	ti := f.Snapshot(tenant).Index().TenantsFor("default")[0]
	handles := func(h string) []string {
		var out []string
		for _, a := range ti.Attachments(h) {
			d := ""
			if a.Deleting {
				d = "(deleting)"
			}
			out = append(out, a.Node+d)
		}
		return out
	}
	for h, want := range map[string][]string{
		"h1": {"vm-a", "vm-b(deleting)"},
		"h2": nil, // another attacher
		"h3": {"vm-a"},
		"h4": {"vm-d"},
		"h5": {"vm-d"},
		"":   nil,
	} {
		if got := handles(h); !reflect.DeepEqual(got, want) {
			t.Errorf("Attachments(%q) = %v, want %v", h, got, want)
		}
	}
	if u := ti.Unresolved("vm-c"); len(u) != 1 || u[0].PV != "pv-gone" {
		t.Errorf("an attachment of a missing PV must be unresolved: %+v", u)
	}
	if u := ti.Unresolved("vm-e"); len(u) != 1 {
		t.Errorf("an attachment of a non-CSI PV must be unresolved: %+v", u)
	}
	if u := ti.Unresolved("vm-a"); len(u) != 0 {
		t.Errorf("vm-a has no unresolved attachments: %+v", u)
	}
}

// A tenant attachment keeps what the tenant attach checks compare: the
// attacher's status (attached, the attach error and its time) and its age;
// AttachmentsOn lists a node's attachments of known handle, in order.
func TestTenantAttachmentStatus(t *testing.T) {
	at := time.Unix(100, 0).UTC()
	tenant := f.Tenant("t1",
		f.Attaches("vm-a", "h1", f.Attached()),
		f.Attaches("vm-a", "h2", f.AttachError("already exists", at), f.CreatedAt(at)),
		f.WithAttachment(f.VolumeAttachment("missing-pv", "vm-a", "pv-gone")))
	ti := f.Snapshot(tenant).Index().TenantsFor("default")[0]
	on := ti.AttachmentsOn("vm-a")
	if len(on) != 2 || on[0].Handle != "h1" || on[1].Handle != "h2" {
		t.Fatalf("AttachmentsOn(vm-a) = %+v", on)
	}
	if !on[0].Attached || on[0].AttachError != "" {
		t.Errorf("h1: %+v", on[0])
	}
	if on[1].Attached || on[1].AttachError != "already exists" || !on[1].AttachErrorTime.Equal(at) || !on[1].Created.Equal(at) {
		t.Errorf("h2: %+v", on[1])
	}
	if len(ti.AttachmentsOn("vm-b")) != 0 {
		t.Errorf("vm-b has no attachments")
	}
}

func TestUnreachableTenantHasNoEvidence(t *testing.T) {
	tenant := f.Tenant("t1", f.Attaches("vm-a", "h1"), f.Unreachable("timeout"))
	ti := f.Snapshot(tenant).Index().TenantsFor("default")[0]
	if ti.Reachable || ti.Error != "timeout" || len(ti.Attachments("h1")) != 0 {
		t.Errorf("unreachable tenant = %+v", ti)
	}
}

func nfsPV(name string) *corev1.PersistentVolume {
	pv := f.PV(name, "")
	pv.Spec.CSI = nil
	pv.Spec.NFS = &corev1.NFSVolumeSource{Server: "nfs.example", Path: "/x"}
	return pv
}

func TestVolumeStatusClaims(t *testing.T) {
	vmi := f.VMI("a", f.WithHotplug("v1", f.Claim("c1")), f.WithHotplug("v2", f.FromDataVolume("dv2")), f.WithHotplug("v3", f.StatusOnly()))
	vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus,
		kubevirtv1.VolumeStatus{Name: "v4"},
		kubevirtv1.VolumeStatus{Name: "v1", PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: "c-other"}},
		kubevirtv1.VolumeStatus{})
	want := [][]string{{"c1"}, {"dv2"}, {"v3"}, {"v4"}, {"c1", "c-other"}, nil}
	own := snapshot.VMIOf(vmi)
	for i := range vmi.Status.VolumeStatus {
		if got := snapshot.VolumeStatusClaims(&own, &own.Status.VolumeStatus[i]); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("status %d (%q): claims %v, want %v", i, vmi.Status.VolumeStatus[i].Name, got, want[i])
		}
	}
}

func TestVolumeHelpers(t *testing.T) {
	typed := f.VM("a", f.WithVolume("v1", f.PVC("c1"), f.Hotpluggable()), f.WithVolume("v2", f.DataVolume("d2")))
	own := snapshot.VMOf(typed)
	vm := &own
	if v := snapshot.VMVolume(vm, "v1"); snapshot.ClaimName(v) != "c1" || !snapshot.Hotpluggable(v) {
		t.Errorf("v1 = %+v", v)
	}
	if v := snapshot.VMVolume(vm, "v2"); snapshot.ClaimName(v) != "d2" || snapshot.Hotpluggable(v) {
		t.Errorf("v2 = %+v", v)
	}
	if snapshot.VMVolume(vm, "v3") != nil || snapshot.VMVolume(nil, "v1") != nil || snapshot.VMVolume(&snapshot.VM{}, "v1") != nil ||
		snapshot.TemplateVolume(typed, "v2") == nil || snapshot.TemplateVolume(&kubevirtv1.VirtualMachine{}, "v1") != nil {
		t.Errorf("VMVolume and TemplateVolume must find the volume, and be nil-safe")
	}
	if snapshot.ClaimName(nil) != "" || snapshot.Hotpluggable(nil) {
		t.Errorf("ClaimName/Hotpluggable must be nil-safe")
	}
}

func TestNewSharesObjects(t *testing.T) {
	base := snapshot.Snapshot{VMs: []snapshot.VM{snapshot.VMOf(f.VM("a"))}}
	s := snapshot.New(base)
	if &s.VMs[0] != &base.VMs[0] {
		t.Errorf("New must not copy the objects")
	}
	if s.Index().VM("default", "a") != &base.VMs[0] {
		t.Errorf("the index must point into the snapshot's slices")
	}
}

func TestVMIsInKeepsOrderAcrossRuns(t *testing.T) {
	s := f.Snapshot(f.VMI("a"), f.VMI("b"), f.VMI("x", f.InNamespace("other")), f.VMI("c"))
	var got []string
	for _, vmi := range s.Index().VMIsIn("default") {
		got = append(got, vmi.Name)
	}
	if !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("VMIsIn(default) = %v", got)
	}
	if at := s.Index().VMIIndexesIn("default"); !reflect.DeepEqual(at, []int{0, 1, 3}) {
		t.Errorf("VMIIndexesIn(default) = %v", at)
	}
}

func TestVMsInKeepsOrderAcrossRuns(t *testing.T) {
	s := f.Snapshot(f.VM("a"), f.VM("b"), f.VM("x", f.InNamespace("other")), f.VM("c"),
		f.VMI("y", f.InNamespace("third")), f.VMI("z", f.InNamespace("other")))
	var got []string
	for _, vm := range s.Index().VMsIn("default") {
		got = append(got, vm.Name)
	}
	if !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("VMsIn(default) = %v", got)
	}
	if ns := s.Index().VMNamespaces(); !reflect.DeepEqual(ns, []string{"default", "other", "third"}) {
		t.Errorf("VMNamespaces() = %v", ns)
	}
}

func TestLazyLookupsAreSafeConcurrently(t *testing.T) {
	s := f.Snapshot(f.VMI("a"), f.AttachmentPod("p"), f.PVC("c"), f.DataVolume("d"))
	done := make(chan bool)
	for i := 0; i < 4; i++ {
		go func() {
			ix := s.Index()
			done <- ix.VMI("default", "a") != nil && ix.AttachmentPod("default", "p") != nil &&
				ix.PVC("default", "c") != nil && ix.DataVolume("default", "d") != nil && len(ix.VMIsIn("default")) == 1 &&
				len(ix.VMsIn("default")) == 0 && len(ix.VMNamespaces()) == 1
		}()
	}
	for i := 0; i < 4; i++ {
		if !<-done {
			t.Error("a concurrent lookup failed")
		}
	}
}

// A generic ephemeral volume's claim is named <pod>-<volume>: its pod uses it.
func TestPodClaimNames_includesGenericEphemeralClaims(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-claim"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}}}
	got := snapshot.PodClaimNames(pod)
	if want := []string{"data-claim", "web-scratch"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
