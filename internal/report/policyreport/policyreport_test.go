package policyreport

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/report/reportapi"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var seen = time.Date(2026, 11, 3, 10, 4, 5, 600, time.UTC)

// world is one finding of each shape: a namespaced VMI, a pod in another
// namespace, a cluster-scoped VolumeAttachment tied to a claim.
func world() []Entry {
	return []Entry{
		{Seen: seen, Finding: drift.Finding{ID: "va1", Check: check.StaleVolumeAttachment, Namespace: "db",
			Object: drift.ObjectRef{Kind: "VolumeAttachment", Name: "csi-abc", UID: "u-va"}, Volume: "pv-1", Severity: drift.SeverityWarning,
			Message: "VolumeAttachment csi-abc is stale", Evidence: []string{"node n1 is gone"},
			Action: drift.Action{Type: check.DeletePodsOnFencedNode, BlockedBy: check.NodeNotFenced, Remedy: "fence the node"}}},
		{Seen: seen, Finding: drift.Finding{ID: "hp2", Check: check.OrphanHotplugVolume, Namespace: "web",
			Object: drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm-b", UID: "u-b"}, Volume: "data", Severity: drift.SeverityWarning,
			Message: "orphan hot-plug", Evidence: []string{"e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8", "e9", "e10"},
			Action: drift.Action{Type: check.VMRemoveVolume, Safe: true, Remedy: "virtctl removevolume vm-b --volume-name=data --persist"}}},
		{Seen: seen, Finding: drift.Finding{ID: "hp1", Check: check.OrphanHotplugVolume, Namespace: "db",
			Object: drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm-a", UID: "u-a"}, Volume: "scratch", Severity: drift.SeverityInfo,
			Message: "VMI-only hot-plug", Evidence: []string{"not in the VM spec"},
			Action: drift.Action{Type: check.VMIRemoveVolume, BlockedBy: check.VMIOnlyHotplug, Remedy: "check with the tenant"}}},
	}
}

func TestBuild_golden(t *testing.T) {
	for _, api := range reportapi.All() {
		t.Run(api.Group(), func(t *testing.T) {
			got, err := yaml.Marshal(Build(world(), Options{API: api, Classify: check.BlockClassOf, Namespaces: []string{"empty"}, Cluster: true}))
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", api.Group()+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("output differs from %s (go test -update rewrites it after review):\n%s", golden, got)
			}
		})
	}
}

func TestBuild_structure(t *testing.T) {
	rs := Build(world(), Options{API: reportapi.WGPolicy, Namespaces: []string{"empty"}})
	var where []string
	for _, r := range rs {
		where = append(where, r.Kind+"/"+r.Metadata.Namespace)
		if r.Metadata.Name != Name || r.Metadata.Labels[LabelManagedBy] != ManagedBy {
			t.Errorf("%s/%s: name %q labels %v: every report is %q with %s=%s", r.Kind, r.Metadata.Namespace, r.Metadata.Name, r.Metadata.Labels, Name, LabelManagedBy, ManagedBy)
		}
		if r.Source != "" {
			t.Errorf("%s has a report-level source, which wgpolicyk8s.io/v1alpha2 does not define", r.Kind)
		}
		for _, res := range r.Results {
			ref := res.Resources[0]
			if (r.Kind == "ClusterPolicyReport") != (ref.Namespace == "") {
				t.Errorf("%s/%s holds %s %s/%s: cluster-scoped subjects belong in the cluster report, namespaced ones in their namespace's", r.Kind, r.Metadata.Namespace, ref.Kind, ref.Namespace, ref.Name)
			}
			if r.Kind == "PolicyReport" && ref.Namespace != r.Metadata.Namespace {
				t.Errorf("report of %s holds a result of %s", r.Metadata.Namespace, ref.Namespace)
			}
		}
	}
	want := []string{"PolicyReport/db", "PolicyReport/empty", "PolicyReport/web", "ClusterPolicyReport/"}
	if len(where) != len(want) {
		t.Fatalf("reports %v, want %v", where, want)
	}
	for i := range want {
		if where[i] != want[i] {
			t.Fatalf("reports %v, want %v (namespaces sorted, cluster report last)", where, want)
		}
	}
	if n := len(rs[1].Results); n != 0 || rs[1].Summary != (Summary{}) {
		t.Errorf("a namespace asked for without findings gets an empty report, got %d results, summary %+v", n, rs[1].Summary)
	}
	db := rs[0]
	if db.Summary != (Summary{Warn: 1}) {
		t.Errorf("db summary %+v, want one warn (the info finding)", db.Summary)
	}
	va := rs[3].Results[0]
	if va.Properties["namespace"] != "db" || va.Properties["findingID"] != "va1" || va.Properties["blockedBy"] != "NodeNotFenced" {
		t.Errorf("cluster result properties %v: want the claim's namespace, the finding id and the block reason", va.Properties)
	}
	web := rs[2].Results[0]
	if web.Properties["evidence.01"] != "e1" || web.Properties["evidence.10"] != "e10" {
		t.Errorf("evidence properties %v: want evidence.01..evidence.10 (sorted as written)", web.Properties)
	}
	if web.Timestamp != (Timestamp{Seconds: seen.Unix(), Nanos: 600}) {
		t.Errorf("timestamp %+v, want %v", web.Timestamp, seen)
	}
	if _, ok := web.Properties["blockedBy"]; ok {
		t.Error("a safe finding has no blockedBy property")
	}
	// No cluster findings and not asked for: no cluster report.
	if rs := Build(world()[1:], Options{}); rs[len(rs)-1].Kind == "ClusterPolicyReport" {
		t.Error("a cluster report was built with no cluster-scoped finding and Cluster unset")
	}
}

func TestBuild_openReports(t *testing.T) {
	rs := Build(world(), Options{API: reportapi.OpenReports})
	data, err := json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	if err := json.Unmarshal(data, &objs); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o["apiVersion"] != "openreports.io/v1alpha1" || o["source"] != "tether" {
			t.Errorf("apiVersion %v source %v: want openreports.io/v1alpha1 and a report-level source", o["apiVersion"], o["source"])
		}
	}
	if objs[0]["kind"] != "Report" || objs[len(objs)-1]["kind"] != "ClusterReport" {
		t.Errorf("kinds %v ... %v, want Report ... ClusterReport", objs[0]["kind"], objs[len(objs)-1]["kind"])
	}
}
