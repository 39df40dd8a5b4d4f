package policyreport_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/crdinstall"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/report/policyreport"
	"github.com/tether-dev/tether/internal/report/reportapi"
	"github.com/tether-dev/tether/internal/testing/reportcrds"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

// list is what `tether audit -o policyreport` prints.
func list(t *testing.T, api reportapi.API, ns string, fs []drift.Finding) string {
	t.Helper()
	es := make([]policyreport.Entry, len(fs))
	for i, f := range fs {
		es[i] = policyreport.Entry{Finding: f, Seen: time.Unix(1_790_000_000, 5)}
	}
	items := policyreport.Build(es, policyreport.Options{API: api, Classify: check.BlockClassOf, Namespaces: []string{ns}, Cluster: true, ClusterName: policyreport.ClusterNameFor(ns)})
	data, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "reports.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestApply_realAPIServer: the reports are accepted by the API server under
// the report CRDs' schema (a server-side dry run, then a real apply as a
// user would pipe them to kubectl), read back with every field kept, and a
// second apply with fewer findings replaces the results and the summary.
func TestApply_realAPIServer(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	for _, api := range reportapi.All() {
		t.Run(api.Group(), func(t *testing.T) {
			if err := crdinstall.Install(ctx, env.Config, reportcrds.For(api)...); err != nil {
				t.Fatal(err)
			}
			ns := env.Namespace(t)
			fs := []drift.Finding{
				{ID: "f1", Check: check.OrphanHotplugVolume, Namespace: ns, Object: drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm-a", UID: "u-a"},
					Volume: "data", Severity: drift.SeverityWarning, Message: "orphan", Evidence: []string{"not in the VM spec"},
					Action: drift.Action{Type: check.VMRemoveVolume, Safe: true, Remedy: "virtctl removevolume vm-a --volume-name=data --persist"}},
				{ID: "f2", Check: check.OrphanHotplugVolume, Namespace: ns, Object: drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm-b", UID: "u-b"},
					Volume: "x", Severity: drift.SeverityInfo, Message: "VMI-only", Action: drift.Action{Type: check.VMIRemoveVolume, BlockedBy: check.VMIOnlyHotplug}},
				{ID: "f3", Check: check.StaleVolumeAttachment, Namespace: ns, Object: drift.ObjectRef{Kind: "VolumeAttachment", Name: "csi-" + ns, UID: "u-va"},
					Volume: "pv-1", Severity: drift.SeverityWarning, Message: "stale", Action: drift.Action{Type: check.DeletePodsOnFencedNode, BlockedBy: check.NodeNotFenced}},
			}
			file := list(t, api, ns, fs)
			if out, err := env.Kubectl(t, "apply", "--server-side", "--field-manager=tether", "--dry-run=server", "-f", file); err != nil {
				t.Fatalf("server-side dry run: %v\n%s", err, out)
			}
			if out, err := env.Kubectl(t, "apply", "-f", file); err != nil {
				t.Fatalf("kubectl apply: %v\n%s", err, out)
			}
			nsRes, clRes := api.Resources()
			nsGVR := schema.GroupVersionResource{Group: api.Group(), Version: api.Version(), Resource: nsRes}
			clGVR := schema.GroupVersionResource{Group: api.Group(), Version: api.Version(), Resource: clRes}
			got, err := env.Dynamic.Resource(nsGVR).Namespace(ns).Get(ctx, policyreport.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			results := got.Object["results"].([]any)
			if len(results) != 2 || got.Object["summary"].(map[string]any)["fail"] != int64(1) || got.Object["summary"].(map[string]any)["warn"] != int64(1) {
				t.Fatalf("namespace report read back: %d results, summary %v; want 2 results, 1 fail and 1 warn", len(results), got.Object["summary"])
			}
			first := results[0].(map[string]any)
			props := first["properties"].(map[string]any)
			if props["remedy"] == nil || first["timestamp"].(map[string]any)["nanos"] != int64(5) || first["resources"].([]any)[0].(map[string]any)["uid"] != "u-a" {
				t.Errorf("a field was pruned on the way in: %v", first)
			}
			if got.GetLabels()[policyreport.LabelManagedBy] != policyreport.ManagedBy {
				t.Errorf("labels %v", got.GetLabels())
			}
			if api == reportapi.OpenReports && got.Object["source"] != "tether" {
				t.Errorf("openreports report-level source %v, want tether", got.Object["source"])
			}
			cl, err := env.Dynamic.Resource(clGVR).Get(ctx, policyreport.ClusterNameFor(ns), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rs := cl.Object["results"].([]any); len(rs) != 1 || rs[0].(map[string]any)["result"] != "fail" {
				t.Fatalf("cluster report results %v, want the VolumeAttachment's fail", rs)
			}

			// A rerun after one finding went away replaces the report.
			if out, err := env.Kubectl(t, "apply", "-f", list(t, api, ns, fs[1:2])); err != nil {
				t.Fatalf("second apply: %v\n%s", err, out)
			}
			got, err = env.Dynamic.Resource(nsGVR).Namespace(ns).Get(ctx, policyreport.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rs := got.Object["results"].([]any); len(rs) != 1 || got.Object["summary"].(map[string]any)["fail"] != int64(0) {
				t.Errorf("after the rerun: %d results, summary %v; want the one warn left", len(rs), got.Object["summary"])
			}
			cl, err = env.Dynamic.Resource(clGVR).Get(ctx, policyreport.ClusterNameFor(ns), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rs := cl.Object["results"].([]any); len(rs) != 0 {
				t.Errorf("cluster report after the rerun holds %d results, want none", len(rs))
			}
			_ = env.Dynamic.Resource(clGVR).Delete(ctx, policyreport.ClusterNameFor(ns), metav1.DeleteOptions{})

			// The schema is enforced: a result outside the enum is refused.
			bad := strings.Replace(readFile(t, file), "result: warn", "result: maybe", 1)
			badFile := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(badFile, []byte(bad), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := env.Kubectl(t, "apply", "--dry-run=server", "-f", badFile); err == nil || !strings.Contains(out, "Unsupported value") {
				t.Errorf("a result outside the enum was accepted (err %v):\n%s", err, out)
			}
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
