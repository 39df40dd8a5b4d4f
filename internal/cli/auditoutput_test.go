package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/report/policyreport"
	"github.com/tether-dev/tether/internal/report/reportapi"
)

func TestReportFlags(t *testing.T) {
	cases := []struct {
		name, output, api string
		want              reportapi.API
		err               string
	}{
		{"policyreport, no api -> wgpolicyk8s.io", "policyreport", "", reportapi.WGPolicy, ""},
		{"policyreport, openreports -> openreports.io", "policyreport", "openreports.io/v1alpha1", reportapi.OpenReports, ""},
		{"policyreport, unknown api -> error naming both", "policyreport", "reports.x-k8s.io/v1beta2", "", "use wgpolicyk8s.io/v1alpha2 (default) or openreports.io/v1alpha1"},
		{"api with table -> error naming -o", "table", "openreports.io/v1alpha1", "", "--report-api is for -o policyreport"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rf := reportFlags{api: c.api}
			got, err := rf.parse(c.output)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestCheckOutput_auditFormatsOnlyForAudit(t *testing.T) {
	audit := clusterFlags{output: "policyreport", formats: auditFormats}
	if err := audit.checkOutput(); err != nil {
		t.Errorf("audit refused -o policyreport: %v", err)
	}
	fix := clusterFlags{output: "policyreport"}
	if err := fix.checkOutput(); err == nil {
		t.Error("a command without report formats took -o policyreport")
	}
}

func TestWritePolicyReports_namespaceScope(t *testing.T) {
	fs := []drift.Finding{{ID: "a1", Check: check.OrphanAttachmentPod, Namespace: "ns1", Severity: drift.SeverityWarning,
		Object: drift.ObjectRef{Kind: "Pod", Name: "hp-volume-x", UID: "u"}},
		// KubeVirt's block reasons are classified: a migrating VMI is
		// skipped, not failed.
		{ID: "a2", Check: check.OrphanHotplugVolume, Namespace: "ns1", Severity: drift.SeverityWarning,
			Object: drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm", UID: "v"}, Action: drift.Action{BlockedBy: check.VMIMigrating}}}
	var b bytes.Buffer
	p := auditPrint{format: "policyreport", api: reportapi.WGPolicy, namespace: "ns1", now: time.Unix(100, 0)}
	if err := printAudit(&b, p, &snapshot.Snapshot{}, fs); err != nil {
		t.Fatal(err)
	}
	var list struct {
		APIVersion, Kind string
		Items            []policyreport.Report
	}
	if err := yaml.Unmarshal(b.Bytes(), &list); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != 2 {
		t.Fatalf("got %s %s with %d items, want a v1 List of the namespace's report and the scope's cluster report:\n%s", list.APIVersion, list.Kind, len(list.Items), b.String())
	}
	ns, cl := list.Items[0], list.Items[1]
	if ns.Metadata.Namespace != "ns1" || ns.Summary.Fail != 1 || ns.Summary.Skip != 1 || len(ns.Results) != 2 {
		t.Errorf("namespace report %+v", ns)
	}
	if cl.Kind != "ClusterPolicyReport" || cl.Metadata.Name != "tether-ns1" || len(cl.Results) != 0 {
		t.Errorf("an audit of one namespace writes its own, empty cluster report tether-ns1; got %s %s with %d results", cl.Kind, cl.Metadata.Name, len(cl.Results))
	}
}
