package dot

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	fx "github.com/tether-dev/tether/internal/testing/fixture"
)

var svg = flag.String("svg", "", "also render the picture of the test world to this SVG file (needs Graphviz's dot)")

// world is an orphan hot-plug: VM db no longer lists volume data, its VMI
// on node-a still has it, attached by pod hp-volume-abc on node-a, through
// claim data-pvc, PV pv-data and a VolumeAttachment to node-a.
func world(t *testing.T) (*snapshot.Snapshot, []drift.Finding) {
	t.Helper()
	vm := fx.VM("db")
	vmi := fx.VMI("db", fx.OwnedBy(vm), fx.Running(), fx.OnNode("node-a"),
		fx.WithHotplug("data", fx.Claim("data-pvc"), fx.AttachPod("hp-volume-abc"), fx.VolumePhase("Ready")))
	s := fx.Snapshot(vm, vmi,
		fx.AttachmentPod("hp-volume-abc", fx.LaunchedBy(vmi), fx.Claims("data-pvc"), fx.BoundTo("node-a")),
		fx.PVC("data-pvc", fx.ClaimRef("", "pv-data")),
		fx.PV("pv-data", "handle-data", fx.ClaimRef(fx.Namespace, "data-pvc")),
		fx.VolumeAttachment("csi-data-node-a", "node-a", "pv-data"),
		fx.NodeObject("node-a"))
	p := check.DefaultPolicy()
	p.Checks = []string{check.OrphanHotplugVolume}
	fs := check.Run(s, p, fx.Epoch())
	if len(fs) != 1 {
		t.Fatalf("the world has %d findings, want the one orphan hot-plug: %+v", len(fs), fs)
	}
	return s, fs
}

// parsed is a DOT graph read back: node ids with their attributes, edges
// as "from -> to" with theirs, and cluster labels.
type parsed struct {
	nodes    map[string]string
	edges    map[string]string
	clusters []string
}

var (
	nodeLine    = regexp.MustCompile(`^\s+(\w+) \[(.*)\];$`)
	edgeLine    = regexp.MustCompile(`^\s+(\w+) -> (\w+) \[(.*)\];$`)
	clusterLine = regexp.MustCompile(`^\s+subgraph (cluster_\d+) \{$`)
)

// parse reads the subset of DOT that Write writes, and fails on any other
// line, on an edge whose ends are not declared, and on unbalanced braces.
func parse(t *testing.T, src string) parsed {
	t.Helper()
	p := parsed{nodes: map[string]string{}, edges: map[string]string{}}
	depth := 0
	for i, line := range strings.Split(strings.TrimSuffix(src, "\n"), "\n") {
		switch {
		case i == 0 && line == "digraph tether {":
			depth++
		case clusterLine.MatchString(line):
			p.clusters = append(p.clusters, clusterLine.FindStringSubmatch(line)[1])
			depth++
		case strings.TrimSpace(line) == "}":
			depth--
		case edgeLine.MatchString(line):
			m := edgeLine.FindStringSubmatch(line)
			for _, end := range m[1:3] {
				if _, ok := p.nodes[end]; !ok {
					t.Errorf("line %d: edge to undeclared node %s", i+1, end)
				}
			}
			p.edges[m[1]+" -> "+m[2]] = m[3]
		case nodeLine.MatchString(line):
			m := nodeLine.FindStringSubmatch(line)
			p.nodes[m[1]] = m[2]
		case strings.HasPrefix(strings.TrimSpace(line), "label="), strings.HasSuffix(line, ";") && depth > 0:
			// graph and cluster attributes
		default:
			t.Errorf("line %d not understood: %q", i+1, line)
		}
	}
	if depth != 0 {
		t.Errorf("unbalanced braces (depth %d at the end)", depth)
	}
	return p
}

func TestWrite_chainAndHighlight(t *testing.T) {
	s, fs := world(t)
	var b bytes.Buffer
	if err := Write(&b, s, fs); err != nil {
		t.Fatal(err)
	}
	g := parse(t, b.String())
	if len(g.clusters) != 1 {
		t.Fatalf("clusters %v, want one per finding", g.clusters)
	}
	want := []string{
		"f0_VirtualMachine_default_db -> f0_VirtualMachineInstance_default_db",
		"f0_VirtualMachineInstance_default_db -> f0_Node__node_a",
		"f0_VirtualMachineInstance_default_db -> f0_Volume_default_data",
		"f0_Volume_default_data -> f0_Pod_default_hp_volume_abc",
		"f0_Pod_default_hp_volume_abc -> f0_Node__node_a",
		"f0_Volume_default_data -> f0_PersistentVolumeClaim_default_data_pvc",
		"f0_PersistentVolumeClaim_default_data_pvc -> f0_PersistentVolume__pv_data",
		"f0_PersistentVolume__pv_data -> f0_VolumeAttachment__csi_data_node_a",
		"f0_VolumeAttachment__csi_data_node_a -> f0_Node__node_a",
	}
	for _, e := range want {
		if _, ok := g.edges[e]; !ok {
			t.Errorf("missing edge %s; have %v", e, g.edges)
		}
	}
	if a := g.nodes["f0_VirtualMachineInstance_default_db"]; !strings.Contains(a, `color="red"`) {
		t.Errorf("the subject VMI is not highlighted: %s", a)
	}
	if a := g.edges["f0_VirtualMachineInstance_default_db -> f0_Volume_default_data"]; !strings.Contains(a, `color="red"`) {
		t.Errorf("the drifted hot-plug edge is not highlighted: %s", a)
	}
	if a := g.nodes["f0_Volume_default_data"]; !strings.Contains(a, `color="red"`) {
		t.Errorf("the orphaned volume is not highlighted: %s", a)
	}
	for _, e := range []string{
		"f0_PersistentVolume__pv_data -> f0_VolumeAttachment__csi_data_node_a",
		"f0_VirtualMachine_default_db -> f0_VirtualMachineInstance_default_db",
		"f0_VirtualMachineInstance_default_db -> f0_Node__node_a",
	} {
		if a := g.edges[e]; strings.Contains(a, "red") {
			t.Errorf("%s is highlighted, but nothing drifted there: %s", e, a)
		}
	}
	if !strings.Contains(b.String(), "report only") && !strings.Contains(b.String(), "blocked: ") && !strings.Contains(b.String(), "safe to ") {
		t.Error("the cluster label does not say what tether would do")
	}
	if !strings.Contains(b.String(), fs[0].ID+" OrphanHotplugVolume") {
		t.Error("the cluster label does not name the finding's id and check")
	}
	var again bytes.Buffer
	if err := Write(&again, s, fs); err != nil {
		t.Fatal(err)
	}
	if again.String() != b.String() {
		t.Error("two renderings of the same world differ")
	}
}

func TestWrite_missingClaimDashed(t *testing.T) {
	vm := fx.VM("db")
	vmi := fx.VMI("db", fx.OwnedBy(vm), fx.Running(), fx.OnNode("node-a"), fx.WithHotplug("data", fx.Claim("gone-pvc"), fx.VolumePhase("Ready")))
	f := drift.Finding{ID: "x1", Check: check.DanglingVolumeReference, Namespace: fx.Namespace, Volume: "data", Severity: drift.SeverityCritical,
		Object: drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "db"}, Message: `claim "gone-pvc" is missing`}
	var b bytes.Buffer
	if err := Write(&b, fx.Snapshot(vm, vmi), []drift.Finding{f}); err != nil {
		t.Fatal(err)
	}
	g := parse(t, b.String())
	if a := g.nodes["f0_PersistentVolumeClaim_default_gone_pvc"]; !strings.Contains(a, "dashed") || !strings.Contains(a, "(missing)") {
		t.Errorf("a missing claim is drawn %q, want dashed and marked missing", a)
	}
	if a := g.edges["f0_Volume_default_data -> f0_PersistentVolumeClaim_default_gone_pvc"]; !strings.Contains(a, `color="red"`) {
		t.Errorf("the edge to the missing claim is not highlighted: %s", a)
	}
	if !strings.Contains(b.String(), `claim \"gone-pvc\" is missing`) {
		t.Error("quotes in the message are not escaped")
	}
}

// TestWrite_tenantEvidence draws what the tenants say of the claim: a
// dashed, red "none" when a reachable tenant attaches nothing of it, its
// VolumeAttachment when it does, and an unreachable tenant as unknown.
func TestWrite_tenantEvidence(t *testing.T) {
	vm := fx.VM("db")
	vmi := fx.VMI("db", fx.OwnedBy(vm), fx.Running(), fx.OnNode("node-a"),
		fx.WithHotplug("data", fx.Claim("data"), fx.AttachPod("hp-volume-abc"), fx.VolumePhase("Ready")))
	f := drift.Finding{ID: "x2", Check: check.OrphanHotplugVolume, Namespace: fx.Namespace, Volume: "data", Severity: drift.SeverityWarning,
		Object: drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "db"}, Action: drift.Action{Type: check.VMIRemoveVolume, Safe: true}}
	for _, tc := range []struct {
		name, tenant string
		opts         []fx.TenantOption
		node, edge   string
		red          bool
	}{
		{"attaches nothing", "quiet", nil,
			"f0_VolumeAttachment_tenant_quiet_of_tenant_quiet", "f0_PersistentVolumeClaim_default_data -> f0_VolumeAttachment_tenant_quiet_of_tenant_quiet", true},
		{"attaches it", "busy", []fx.TenantOption{fx.Attaches("node-x", "data")},
			"f0_Node_tenant_busy_node_x", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			s := fx.Snapshot(vm, vmi, fx.PVC("data"), fx.Tenant(tc.tenant, tc.opts...))
			if err := Write(&b, s, []drift.Finding{f}); err != nil {
				t.Fatal(err)
			}
			g := parse(t, b.String())
			if _, ok := g.nodes[tc.node]; !ok {
				t.Fatalf("no node %s in %v", tc.node, g.nodes)
			}
			if tc.edge != "" && strings.Contains(g.edges[tc.edge], "red") != tc.red {
				t.Errorf("edge %s drawn %q, want red=%v", tc.edge, g.edges[tc.edge], tc.red)
			}
			if !strings.Contains(b.String(), "safe to VMIRemoveVolume") {
				t.Error("the label does not say the action is safe")
			}
		})
	}
}

// TestWrite_graphvizRenders renders the picture with Graphviz itself, which
// refuses any syntax error; -svg keeps the result. (docs/images/audit.svg
// is drawn by make demo from its world.)
func TestWrite_graphvizRenders(t *testing.T) {
	bin, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("Graphviz's dot is not installed (apt-get install graphviz): the structural tests above still ran")
	}
	s, fs := world(t)
	var b bytes.Buffer
	if err := Write(&b, s, fs); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-Tsvg")
	cmd.Stdin = &b
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("dot -Tsvg: %v\n%s", err, stderr.String())
	}
	if !bytes.Contains(out, []byte("<svg")) {
		t.Fatal("dot wrote no SVG")
	}
	if *svg != "" {
		if err := os.MkdirAll(filepath.Dir(*svg), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*svg, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkWorld runs one check on a fixture world and draws its one finding.
func checkWorld(t *testing.T, name string, items ...any) (parsed, string, drift.Finding) {
	t.Helper()
	s := fx.Snapshot(items...)
	p := check.DefaultPolicy()
	p.Checks = []string{name}
	fs := check.Run(s, p, fx.Epoch().Add(time.Hour))
	if len(fs) != 1 {
		t.Fatalf("the world has %d %s findings, want one: %+v", len(fs), name, fs)
	}
	var b bytes.Buffer
	if err := Write(&b, s, fs); err != nil {
		t.Fatal(err)
	}
	return parse(t, b.String()), b.String(), fs[0]
}

// red reports whether attrs draw the drift.
func red(attrs string) bool { return strings.Contains(attrs, `color="red"`) }

// wantEdges fails for each edge (from, to, label part, drifted) that is
// missing or drawn otherwise.
func wantEdges(t *testing.T, g parsed, edges ...[4]any) {
	t.Helper()
	for _, e := range edges {
		key := e[0].(string) + " -> " + e[1].(string)
		attrs, ok := g.edges[key]
		switch {
		case !ok:
			t.Errorf("missing edge %s; have %v", key, g.edges)
		case !strings.Contains(attrs, e[2].(string)):
			t.Errorf("edge %s is labelled %s, want %q in it", key, attrs, e[2])
		case red(attrs) != e[3].(bool):
			t.Errorf("edge %s drawn %s, want drift=%v", key, attrs, e[3])
		}
	}
}

// nodeOf returns the id of the node whose id starts with prefix.
func nodeOf(t *testing.T, g parsed, prefix string) string {
	t.Helper()
	for id := range g.nodes {
		if strings.HasPrefix(id, prefix) {
			return id
		}
	}
	t.Fatalf("no node %s*; have %v", prefix, g.nodes)
	return ""
}

// StuckHotplugPhase: the VMI and the volume its status still lists after
// the unplug, the edge saying so; the attachment pod the evidence dates
// the state by, terminating; the node whose virt-handler must act.
func TestWrite_stuckHotplugPhase(t *testing.T) {
	vmi := fx.VMI("db", fx.Running(), fx.OnNode("node-a"), fx.WithHotplug("data", fx.StatusOnly(), fx.Claim("data-pvc"), fx.AttachPod("hp-volume-old")))
	g, _, _ := checkWorld(t, check.StuckHotplugPhase, vmi, fx.PVC("data-pvc"), fx.NodeObject("node-a"),
		fx.AttachmentPod("hp-volume-old", fx.BoundTo("node-a"), fx.Terminating(fx.Epoch())))
	wantEdges(t, g,
		[4]any{"f0_VirtualMachineInstance_default_db", "f0_Volume_default_data", "hot-plug, Ready, not in the VMI spec", true},
		[4]any{"f0_Volume_default_data", "f0_Pod_default_hp_volume_old", "attached by", false},
		[4]any{"f0_Pod_default_hp_volume_old", "f0_Node__node_a", "on", false},
		[4]any{"f0_VirtualMachineInstance_default_db", "f0_Node__node_a", "runs on", false},
		[4]any{"f0_Volume_default_data", "f0_PersistentVolumeClaim_default_data_pvc", "claim", false})
	if a := g.nodes["f0_Pod_default_hp_volume_old"]; !strings.Contains(a, "terminating since 2024-01-01T00:00:00Z") {
		t.Errorf("the dying attachment pod is drawn %s, want its deletion time", a)
	}
}

// SharedClaimConflict: the claim, and every VM and VMI that references it,
// each reference drawn as the drift: the holder's VMI (run by its VM) and
// the VM that waits.
func TestWrite_sharedClaimConflict(t *testing.T) {
	holder := fx.VM("holder", fx.Running(), fx.WithVolume("data", fx.PVC("shared")))
	waiter := fx.VM("waiter", fx.WithVolume("disk", fx.PVC("shared")))
	vmi := fx.VMI("holder", fx.OwnedBy(holder), fx.OnNode("node-a"), fx.WithVolume("data", fx.PVC("shared")))
	g, _, _ := checkWorld(t, check.SharedClaimConflict, holder, waiter, vmi, fx.PVC("shared"), fx.PVC("unrelated"), fx.NodeObject("node-a"))
	claim := "f0_PersistentVolumeClaim_default_shared"
	if !red(g.nodes[claim]) {
		t.Errorf("the subject claim is drawn %s", g.nodes[claim])
	}
	wantEdges(t, g,
		[4]any{"f0_VirtualMachine_default_waiter", claim, "volume disk", true},
		[4]any{"f0_VirtualMachine_default_holder", claim, "volume data", true},
		[4]any{"f0_VirtualMachineInstance_default_holder", claim, "volume data", true},
		[4]any{"f0_VirtualMachine_default_holder", "f0_VirtualMachineInstance_default_holder", "runs", false},
		[4]any{"f0_VirtualMachineInstance_default_holder", "f0_Node__node_a", "runs on", false})
	if _, ok := g.nodes["f0_PersistentVolumeClaim_default_unrelated"]; ok {
		t.Error("a claim nobody shares is drawn")
	}
}

// InterruptedVolumeMigration: the VM and its migrated volume, the source
// claim that holds the data, and the destination claim its spec names,
// drawn as the drift; a source that is gone is missing, dashed.
func TestWrite_interruptedVolumeMigration(t *testing.T) {
	g, _, _ := checkWorld(t, check.InterruptedVolumeMigration, interruptedVM(), fx.PVC("src"), fx.PVC("dst"))
	if !red(g.nodes["f0_VirtualMachine_default_db"]) {
		t.Errorf("the subject VM is drawn %s", g.nodes["f0_VirtualMachine_default_db"])
	}
	wantEdges(t, g,
		[4]any{"f0_VirtualMachine_default_db", "f0_Volume_default_d", "migrated volume", false},
		[4]any{"f0_Volume_default_d", "f0_PersistentVolumeClaim_default_src", "source: the consistent data", false},
		[4]any{"f0_Volume_default_d", "f0_PersistentVolumeClaim_default_dst", "destination: may be partly copied; the VM spec names it", true})
	g, _, _ = checkWorld(t, check.InterruptedVolumeMigration, interruptedVM(), fx.PVC("dst"))
	if a := g.nodes["f0_PersistentVolumeClaim_default_src"]; !strings.Contains(a, "dashed") || !strings.Contains(a, "(missing)") {
		t.Errorf("a source claim that is gone is drawn %s", a)
	}
	wantEdges(t, g, [4]any{"f0_Volume_default_d", "f0_PersistentVolumeClaim_default_src", "source", true})
}

// interruptedVM is VM db, stopped by an interrupted migration of its
// volume d from claim src to claim dst, its spec naming dst.
func interruptedVM() *kubevirtv1.VirtualMachine {
	vm := fx.VM("db", fx.WithVolume("d", fx.PVC("dst")))
	mig := kubevirtv1.UpdateVolumesStrategyMigration
	vm.Spec.UpdateVolumesStrategy = &mig
	vm.Status.VolumeUpdateState = &kubevirtv1.VolumeUpdateState{VolumeMigrationState: &kubevirtv1.VolumeMigrationState{
		MigratedVolumes: []kubevirtv1.StorageMigratedVolumeInfo{{VolumeName: "d",
			SourcePVCInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: "src"}, DestinationPVCInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: "dst"}}}}}
	vm.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineManualRecoveryRequired, Status: corev1.ConditionTrue}}
	return vm
}

// tenantVMWorld is VM vm-a's VMI on node-1 and tenant t1, whose node
// worker-0 is that VM and which attaches handle dv-1 there (opts).
func tenantVMWorld(vmiOpts []fx.Option, opts ...fx.Option) []any {
	vm := fx.VM("vm-a", fx.Running())
	vmi := fx.VMI("vm-a", append([]fx.Option{fx.OwnedBy(vm)}, vmiOpts...)...)
	node := snapshot.TenantNode{Name: "worker-0", ProviderID: snapshot.ProviderIDPrefix + "vm-a", ClusterNamespace: fx.Namespace}
	tn := fx.Tenant("t1", fx.WithNode(node), fx.Attaches("worker-0", "dv-1", append([]fx.Option{fx.AttachedToID(fx.Namespace + "/vm-a")}, opts...)...))
	return []any{vm, vmi, tn, fx.PVC("dv-1")}
}

// PhantomAttach: the tenant VolumeAttachment that says attached, on the
// tenant node that is the VM, and the volume the VMI lacks, missing.
func TestWrite_phantomAttach(t *testing.T) {
	g, _, _ := checkWorld(t, check.PhantomAttach, tenantVMWorld(nil, fx.Attached())...)
	vmi, vol := "f0_VirtualMachineInstance_default_vm_a", "f0_Volume_default_dv_1"
	va := nodeOf(t, g, "f0_VolumeAttachment_tenant_t1_csi")
	if a := g.nodes[vol]; !strings.Contains(a, "(missing)") || !red(a) {
		t.Errorf("the volume the VMI lacks is drawn %s, want the drift, missing", a)
	}
	if a := g.nodes[va]; !strings.Contains(a, `\n(tenant t1)\nattached`) {
		t.Errorf("the tenant's VolumeAttachment is drawn %s, want it to name its tenant and say attached", a)
	}
	wantEdges(t, g,
		[4]any{vmi, vol, "no such volume", true},
		[4]any{vol, "f0_PersistentVolumeClaim_default_dv_1", "claim of its name", false},
		[4]any{va, "f0_PersistentVolumeClaim_default_dv_1", "tenant wants", false},
		[4]any{va, "f0_Node_tenant_t1_worker_0", "on", false},
		[4]any{"f0_Node_tenant_t1_worker_0", vmi, "is this VM (providerID kubevirt://vm-a", false})
}

// AttachAlreadyPresent: the VMI's Ready hot-plug, and the tenant attach
// that fails although the VM has the volume, drawn as the drift with its
// error.
func TestWrite_attachAlreadyPresent(t *testing.T) {
	msg := `Unable to add volume [dv-1] because volume with that name already exists`
	g, _, _ := checkWorld(t, check.AttachAlreadyPresent, tenantVMWorld([]fx.Option{fx.WithHotplug("dv-1")}, fx.AttachError(msg, fx.Epoch()))...)
	vmi, vol := "f0_VirtualMachineInstance_default_vm_a", "f0_Volume_default_dv_1"
	va := nodeOf(t, g, "f0_VolumeAttachment_tenant_t1_csi")
	if a := g.nodes[va]; !strings.Contains(a, "attach fails: Unable to add volume [dv-1] because volume with that name a…") {
		t.Errorf("the failing tenant VolumeAttachment is drawn %s, want its error, cut", a)
	}
	wantEdges(t, g,
		[4]any{vmi, vol, "hot-plug, Ready", true},
		[4]any{va, "f0_PersistentVolumeClaim_default_dv_1", "its attach fails", true},
		[4]any{"f0_Node_tenant_t1_worker_0", vmi, "is this VM", false})
}

// The pictures of the six checks above render with Graphviz.
func TestWrite_newChecksRender(t *testing.T) {
	bin, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("Graphviz's dot is not installed (apt-get install graphviz): the structural tests above still ran")
	}
	vm := fx.VM("holder", fx.Running(), fx.WithVolume("data", fx.PVC("shared")))
	for name, items := range map[string][]any{
		check.StuckHotplugPhase:          {fx.VMI("db", fx.Running(), fx.WithHotplug("data", fx.StatusOnly(), fx.AttachPod("hp-1"))), fx.AttachmentPod("hp-1", fx.Terminating(fx.Epoch()))},
		check.SharedClaimConflict:        {vm, fx.VM("waiter", fx.WithVolume("data", fx.PVC("shared"))), fx.VMI("holder", fx.OwnedBy(vm), fx.WithVolume("data", fx.PVC("shared"))), fx.PVC("shared")},
		check.InterruptedVolumeMigration: {interruptedVM(), fx.PVC("dst")},
		check.PhantomAttach:              tenantVMWorld(nil, fx.Attached()),
		check.AttachAlreadyPresent:       tenantVMWorld([]fx.Option{fx.WithHotplug("dv-1")}, fx.AttachError(`"already exists"`, fx.Epoch())),
		check.TenantNodeDown: {fx.Tenant("t1", fx.WithNode(snapshot.TenantNode{Name: "worker-0", ProviderID: snapshot.ProviderIDPrefix + "vm-a",
			ClusterNamespace: fx.Namespace, Ready: corev1.ConditionUnknown, ReadySince: fx.Epoch()}))},
	} {
		_, src, _ := checkWorld(t, name, items...)
		cmd := exec.Command(bin, "-Tsvg")
		cmd.Stdin = strings.NewReader(src)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil || stderr.Len() > 0 || !bytes.Contains(out, []byte("<svg")) {
			t.Errorf("%s: dot -Tsvg: %v\n%s", name, err, stderr.String())
		}
	}
}

// TenantNodeDown: the tenant Node, NotReady, the infra VM it is, and that
// VM's VMI missing, drawn as the drift; with the VMI back and tether's taint
// on the node, the un-fence shows the taint and the VMI's phase.
func TestWrite_tenantNodeDown(t *testing.T) {
	node := func(mod func(*snapshot.TenantNode)) fx.TenantOption {
		n := snapshot.TenantNode{Name: "worker-0", ProviderID: snapshot.ProviderIDPrefix + "vm-a", ClusterNamespace: fx.Namespace,
			Ready: corev1.ConditionUnknown, ReadySince: fx.Epoch()}
		if mod != nil {
			mod(&n)
		}
		return fx.WithNode(n)
	}
	halted := kubevirtv1.RunStrategyHalted
	vm := fx.VM("vm-a")
	vm.Spec.RunStrategy = &halted
	g, src, f := checkWorld(t, check.TenantNodeDown, vm, fx.Tenant("t1", node(nil)))
	if f.Action.Type != check.TaintOutOfService || !f.Action.Safe {
		t.Fatalf("the world's finding: %+v", f)
	}
	tn, vmi := "f0_Node_tenant_t1_worker_0", "f0_VirtualMachineInstance_default_vm_a"
	if a := g.nodes[tn]; !red(a) || !strings.Contains(a, `Ready=Unknown since 2`) {
		t.Errorf("the tenant node is drawn %s, want the subject with its Ready state", a)
	}
	if a := g.nodes[vmi]; !strings.Contains(a, "(missing)") {
		t.Errorf("the VMI is drawn %s, want missing", a)
	}
	wantEdges(t, g,
		[4]any{tn, "f0_VirtualMachine_default_vm_a", "is (providerID kubevirt://vm-a", false},
		[4]any{"f0_VirtualMachine_default_vm_a", vmi, "runs", true})
	if !strings.Contains(src, "safe to TaintOutOfService") {
		t.Errorf("the cluster label does not say what tether would do:\n%s", src)
	}

	back := fx.VMI("vm-a", fx.OwnedBy(vm), fx.Running())
	g, _, f = checkWorld(t, check.TenantNodeDown, vm, back, fx.Tenant("t1", node(func(n *snapshot.TenantNode) {
		n.Ready, n.OutOfService, n.FencedBy = corev1.ConditionTrue, true, "infra VM default/vm-a down"
	})))
	if f.Action.Type != check.RemoveOutOfServiceTaint {
		t.Fatalf("the world's finding: %+v", f)
	}
	if a := g.nodes[tn]; !strings.Contains(a, "out-of-service taint (tether's)") {
		t.Errorf("the fenced node is drawn %s, want tether's taint", a)
	}
	if a := g.nodes[vmi]; !strings.Contains(a, "phase Running") {
		t.Errorf("the VMI is drawn %s, want its phase", a)
	}
	wantEdges(t, g, [4]any{"f0_VirtualMachine_default_vm_a", vmi, "runs", false})
}
