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
