package check

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	f "github.com/tether-dev/tether/internal/testing/fixture"
	corev1 "k8s.io/api/core/v1"
)

func TestLookup(t *testing.T) {
	for _, name := range []string{OrphanHotplugVolume, OrphanAttachmentPod} {
		c, err := Lookup(name)
		if err != nil || c.Name != name || c.Run == nil || c.Doc == "" {
			t.Errorf("Lookup(%q) = %+v, %v", name, c, err)
		}
	}
	_, err := Lookup("OrphanVolume")
	if err == nil || !strings.Contains(err.Error(), `"OrphanVolume"`) ||
		!strings.Contains(err.Error(), OrphanHotplugVolume) || !strings.Contains(err.Error(), OrphanAttachmentPod) {
		t.Errorf("unknown check error must name it and the valid checks, got %v", err)
	}
	if got := Names(); !reflect.DeepEqual(got, []string{OrphanHotplugVolume, OrphanAttachmentPod, DanglingVolumeReference,
		StaleVolumeAttachment, MultiAttachConflict, BlockedDeletion, PhantomAttach, StuckPublish, AttachAlreadyPresent, UnpersistedHotplug, TruncatedDiskSerial, DrainEvictsHotplug, TenantNodeDown,
		StuckHotplugPhase, SharedClaimConflict, InterruptedVolumeMigration, MigrationSourcePodLeftover}) {
		t.Errorf("Names() = %v", got)
	}
}

func TestPolicyValidate(t *testing.T) {
	cases := []struct {
		name   string
		policy func(*Policy)
		errs   []string
	}{
		{"default policy -> valid", func(*Policy) {}, nil},
		{"every opt-in and a scope -> valid", func(p *Policy) {
			p.Scope.Namespaces, p.Scope.VolumePrefix, p.Checks = []string{"default", "tenant-a"}, "pvc-", []string{OrphanAttachmentPod}
			p.AllowVMIOnlyDetach, p.TenantAuthoritative, p.DeleteAttachmentPods = true, true, true
		}, nil},
		{"unknown check -> error naming the valid checks", func(p *Policy) { p.Checks = []string{"Nope"} }, []string{`"Nope"`, OrphanHotplugVolume}},
		{"invalid namespace -> error", func(p *Policy) { p.Scope.Namespaces = []string{"Bad_NS"} }, []string{`"Bad_NS"`}},
		{"empty namespace -> error", func(p *Policy) { p.Scope.Namespaces = []string{""} }, []string{`namespace ""`}},
		{"negative pod age -> error", func(p *Policy) { p.MinAttachmentPodAge = -time.Second }, []string{"must not be negative"}},
		{"several problems -> all reported", func(p *Policy) {
			p.Checks, p.MinAttachmentPodAge = []string{"X"}, -1
		}, []string{`"X"`, "negative"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			tc.policy(&p)
			err := p.Validate()
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error")
			}
			for _, e := range tc.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q does not mention %q", err, e)
				}
			}
		})
	}
}

func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	if p.MinAttachmentPodAge != 2*time.Minute || p.AllowVMIOnlyDetach || p.TenantAuthoritative || p.DeleteAttachmentPods || len(p.Checks) != 0 {
		t.Errorf("DefaultPolicy() = %+v: defaults must be conservative", p)
	}
	// A zero policy behaves like the default one.
	s := f.Snapshot(f.AttachmentPod("hp-volume-a", f.Claims("c1"), f.CreatedAt(now.Add(-time.Minute))))
	fs := Run(s, Policy{DeleteAttachmentPods: true}, now)
	if len(fs) != 1 || fs[0].Action.BlockedBy != AttachmentPodTooYoung {
		t.Errorf("zero MinAttachmentPodAge must mean the default: %+v", fs)
	}
}

func orphanWorld() []any {
	vm := f.VM("a", f.Running())
	return []any{
		f.VMI("b", f.OwnedBy(f.VM("b")), f.WithHotplug("v2"), f.WithHotplug("v1")),
		f.VMI("a", f.OwnedBy(vm), f.WithHotplug("v1")),
		f.VMI("c", f.InNamespace("aaa"), f.Owner("kubevirt.io/v1", "VirtualMachine", "c", "u", true), f.WithHotplug("v1")),
		f.AttachmentPod("hp-volume-zzz", f.Claims("c1")),
		hotplugGate(),
	}
}

func TestRunSortsAndFiltersChecks(t *testing.T) {
	fs := Run(f.Snapshot(orphanWorld()...), DefaultPolicy(), now)
	var got []string
	for _, fd := range fs {
		got = append(got, fd.Namespace+" "+fd.Object.Kind+" "+fd.Object.Name+" "+fd.Volume+" "+fd.Check)
	}
	want := []string{
		"aaa VirtualMachineInstance c v1 DanglingVolumeReference",
		"aaa VirtualMachineInstance c v1 OrphanHotplugVolume",
		"default Pod hp-volume-zzz c1 OrphanAttachmentPod",
		"default VirtualMachineInstance a v1 DanglingVolumeReference",
		"default VirtualMachineInstance a v1 OrphanHotplugVolume",
		"default VirtualMachineInstance b v1 DanglingVolumeReference",
		"default VirtualMachineInstance b v1 OrphanHotplugVolume",
		"default VirtualMachineInstance b v2 DanglingVolumeReference",
		"default VirtualMachineInstance b v2 OrphanHotplugVolume",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order:\n got %q\nwant %q", got, want)
	}
	p := DefaultPolicy()
	p.Checks = []string{OrphanAttachmentPod, "Unknown"}
	for _, fd := range Run(f.Snapshot(orphanWorld()...), p, now) {
		if fd.Check != OrphanAttachmentPod {
			t.Errorf("check %s ran although only %s was selected", fd.Check, OrphanAttachmentPod)
		}
	}
}

func TestFindingIDIsStable(t *testing.T) {
	obj := drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "a", UID: "u1"}
	id := drift.FindingID(OrphanHotplugVolume, "default", obj, "v1")
	if id != drift.FindingID(OrphanHotplugVolume, "default", obj, "v1") || len(id) != 12 {
		t.Fatalf("FindingID not stable or not 12 hex digits: %q", id)
	}
	// The id is a contract: it is stored in Finding objects and logs.
	sum := sha256.Sum256([]byte("OrphanHotplugVolume/default/VirtualMachineInstance/a/u1/v1"))
	if want := hex.EncodeToString(sum[:])[:12]; id != want {
		t.Errorf("FindingID = %s, want %s", id, want)
	}
	for _, other := range []string{
		drift.FindingID(OrphanAttachmentPod, "default", obj, "v1"),
		drift.FindingID(OrphanHotplugVolume, "other", obj, "v1"),
		drift.FindingID(OrphanHotplugVolume, "default", drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "a", UID: "u2"}, "v1"),
		drift.FindingID(OrphanHotplugVolume, "default", obj, "v2"),
	} {
		if other == id {
			t.Errorf("different findings share id %s", id)
		}
	}
}

// TestFindingJSON pins the JSON shape of a finding (contract).
func TestFindingJSON(t *testing.T) {
	vm := f.VM("vm-a")
	p := DefaultPolicy()
	p.AllowVMIOnlyDetach = true
	fs := only(Run(f.Snapshot(vm, f.VMI("vm-a", f.OwnedBy(vm), f.WithHotplug("v1")), bothGatesOff()), p, now), OrphanHotplugVolume, "vm-a", "v1")
	if len(fs) != 1 {
		t.Fatalf("want 1 finding, got %d", len(fs))
	}
	raw, err := json.Marshal(fs[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "check", "namespace", "object", "volume", "severity", "message", "evidence", "action"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, raw)
		}
	}
	obj, _ := m["object"].(map[string]any)
	act, _ := m["action"].(map[string]any)
	if obj["kind"] != "VirtualMachineInstance" || obj["name"] != "vm-a" || obj["uid"] != string(fs[0].Object.UID) {
		t.Errorf("object = %v", obj)
	}
	if act["type"] != "VMIRemoveVolume" || act["safe"] != false || act["blockedBy"] != "HotplugGateDisabled" || act["remedy"] == "" {
		t.Errorf("action = %v", act)
	}
	if m["check"] != "OrphanHotplugVolume" || m["severity"] != "warning" || m["volume"] != "v1" {
		t.Errorf("finding = %s", raw)
	}
	safeJSON, _ := json.Marshal(drift.Action{Type: VMRemoveVolume, Safe: true, Remedy: "r"})
	if strings.Contains(string(safeJSON), "blockedBy") {
		t.Errorf("blockedBy must be omitted when empty: %s", safeJSON)
	}
}

// TestEvidenceIsCheckable: the evidence of a typical orphan names what a
// human compares with kubectl.
func TestEvidenceIsCheckable(t *testing.T) {
	vm := f.VM("vm-a", f.Running())
	vmi := f.VMI("vm-a", f.OwnedBy(vm), f.WithHotplug("v1", f.AttachPod("hp-volume-abcde")))
	worker := snapshot.TenantNode{Name: "worker-0", ProviderID: "kubevirt://vm-a", ClusterNamespace: "default"}
	fs := only(Run(f.Snapshot(vm, vmi, f.Tenant("t1", f.WithNode(worker), f.Volumes("v1")), hotplugGate()), DefaultPolicy(), now), OrphanHotplugVolume, "vm-a", "")
	if len(fs) != 1 {
		t.Fatalf("want 1 finding, got %+v", fs)
	}
	want := []string{
		`VMI default/vm-a lists hot-plug volume "v1" (claim v1, attachment pod hp-volume-abcde, phase Ready)`,
		`VM default/vm-a spec does not list volume "v1"`,
		`tenant "t1" node worker-0 -> infra VM default/vm-a by providerID kubevirt://vm-a with annotation cluster.x-k8s.io/cluster-namespace=default`,
		`tenant "t1" has a PV of driver csi.kubevirt.io with volume handle "v1", and neither a VolumeAttachment nor the kubelet of node worker-0 wants it`,
	}
	if !reflect.DeepEqual(fs[0].Evidence, want) {
		t.Errorf("evidence:\n got %q\nwant %q", fs[0].Evidence, want)
	}
	// virtctl 1.9 cannot make a VMI-level call on a VM-owned VMI
	// (pkg/virtctl/vm/remove_volume.go:49,73-101): a raw PUT, dry run first.
	put := "kubectl replace --raw /apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/vm-a/removevolume -f -"
	if want := `echo '{"name":"v1","dryRun":["All"]}' | ` + put + ` && echo '{"name":"v1"}' | ` + put + "; "; !strings.HasPrefix(fs[0].Action.Remedy, want) {
		t.Errorf("remedy = %q, want it to start with %q", fs[0].Action.Remedy, want)
	}
}

// TestEveryBlockHasARemedy: each blocked finding explains what to do.
func TestEveryBlockHasARemedy(t *testing.T) {
	seen := map[drift.BlockReason]string{}
	forEachCombo(func(c combo) {
		s, p := c.build()
		for _, fd := range Run(s, p, now) {
			if fd.Action.BlockedBy != "" && seen[fd.Action.BlockedBy] == "" {
				seen[fd.Action.BlockedBy] = fd.Action.Remedy
			}
		}
	})
	for r, remedy := range seen {
		if !strings.Contains(remedy, "kubectl") && !strings.Contains(remedy, "virtctl") {
			t.Errorf("remedy for %s names no command: %q", r, remedy)
		}
	}
	if len(seen) < 10 {
		t.Errorf("only %d block reasons reached: %v", len(seen), seen)
	}
}

func TestChecksAcceptAHandBuiltInput(t *testing.T) {
	down := snapshot.TenantNode{Name: "worker-9", ProviderID: snapshot.ProviderIDPrefix + "vm-down", ClusterNamespace: f.Namespace,
		Ready: corev1.ConditionUnknown, ReadySince: now.Add(-time.Hour)}
	items := append(append(append(orphanWorld(), storageChecksWorld()...), tenantAttachWorld()...), reportItems()...)
	drained, hp := drainVMI("vm-drained")
	migrated, source := volumeMigrated("vm-migrated", f.InNamespace("volmig"))
	s := f.Snapshot(append(items, f.Tenant("t-down", f.WithNode(down)), serialVMI("vm-serial", longSerial), drained, hp, guardNoWebhook, migrated, source)...)
	for _, c := range All() {
		got := c.Run(Input{Snapshot: s, Policy: DefaultPolicy(), Now: now})
		want := c.Run(NewInput(s, DefaultPolicy(), now))
		if !reflect.DeepEqual(got, want) || len(got) == 0 {
			t.Errorf("%s: hand-built input gave %d findings, NewInput %d", c.Name, len(got), len(want))
		}
	}
}
