package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/plan"
	"github.com/tether-dev/tether/internal/report/dot"
	"github.com/tether-dev/tether/internal/report/policyreport"
)

// APIVersion of tether's report objects (contract).
const APIVersion = plan.APIVersion

// AuditReport is the `audit -o json|yaml` document (contract).
type AuditReport struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Source     *bundleSource   `json:"source,omitempty"`
	Tenants    []tenantStatus  `json:"tenants,omitempty"`
	Warnings   []string        `json:"warnings,omitempty"`
	Findings   []drift.Finding `json:"findings"`
}

type tenantStatus struct {
	Name      string `json:"name"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// DriverMissing: the tenant has no CSIDriver of its driver's name.
	DriverMissing bool `json:"driverMissing,omitempty"`
	// UnmappedNodes says why each node that cannot be tied to one infra VM
	// cannot (see docs/checks/OrphanHotplugVolume.md).
	UnmappedNodes []string `json:"unmappedNodes,omitempty"`
}

// FixPlan is the `fix -o json|yaml` document (contract).
type FixPlan = plan.Document

// encode writes v as indented JSON, or as YAML when format is "yaml".
func encode(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintln(w, strings.TrimRight(string(data), "\n"))
	return err
}

// streamAuditJSON writes r as encode does, byte for byte, one finding at
// a time: the whole document is never held in memory (tens of thousands of
// findings are over a hundred megabytes of JSON), nor the words of every
// finding (a deferred finding's are written for its turn only).
func streamAuditJSON(w io.Writer, r AuditReport) error {
	fs := r.Findings
	r.Findings = nil
	head, err := json.MarshalIndent(struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Source     *bundleSource  `json:"source,omitempty"`
		Tenants    []tenantStatus `json:"tenants,omitempty"`
		Warnings   []string       `json:"warnings,omitempty"`
	}{r.APIVersion, r.Kind, r.Source, r.Tenants, r.Warnings}, "", "  ")
	if err != nil {
		return err
	}
	// The head ends "\n}": the findings go in its place, at the depth
	// MarshalIndent gives a field's array elements.
	if _, err := w.Write(head[:len(head)-2]); err != nil {
		return err
	}
	if len(fs) == 0 {
		_, err = io.WriteString(w, ",\n  \"findings\": []\n}\n")
		return err
	}
	sep := ",\n  \"findings\": [\n    "
	var b []byte
	err = drift.EachWritten(fs, func(f *drift.Finding) error {
		b = appendFinding(append(b[:0], sep...), f)
		sep = ",\n    "
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n  ]\n}\n")
	return err
}

// printAudit writes the audit report: an AuditReport document for json and
// yaml; for table, the tenant and snapshot warnings, one row per finding,
// then each finding's evidence and remedy.
func printAudit(out io.Writer, p auditPrint, s *snapshot.Snapshot, fs []drift.Finding) error {
	if fs == nil {
		fs = []drift.Finding{}
	}
	// One write per 64 KiB, not one per line: an audit may print hundreds
	// of thousands of lines.
	w := bufio.NewWriterSize(out, 64<<10)
	if err := writeAudit(w, p, s, fs); err != nil {
		return err
	}
	return w.Flush()
}

func writeAudit(w io.Writer, p auditPrint, s *snapshot.Snapshot, fs []drift.Finding) error {
	if p.format != "json" && p.format != "table" {
		drift.WriteAll(fs) // json and table write each finding's words in its turn
	}
	switch format := p.format; format {
	case "policyreport":
		return writePolicyReports(w, p, fs, check.BlockClassOf)
	case "dot":
		return dot.Write(w, s, fs)
	case "table":
	default:
		r := AuditReport{APIVersion: APIVersion, Kind: "AuditReport", Source: p.source, Findings: fs, Warnings: s.Warnings}
		for _, t := range s.Tenants {
			r.Tenants = append(r.Tenants, tenantStatus{Name: t.Name, Reachable: t.Reachable, Error: t.Error,
				DriverMissing: t.DriverMissing, UnmappedNodes: t.UnmappedNodes()})
		}
		if format == "json" {
			return streamAuditJSON(w, r)
		}
		return encode(w, format, r)
	}
	for _, t := range s.Tenants {
		switch {
		case !t.Reachable:
			fmt.Fprintf(w, "warning: tenant %q is unreachable (%s): its evidence counts as unknown\n", t.Name, t.Error)
		case t.DriverMissing:
			fmt.Fprintf(w, "warning: tenant %q has no CSIDriver %q: its evidence counts as unknown (is the driver name right?)\n", t.Name, t.CSIDriver())
		}
		if un := t.UnmappedNodes(); t.Reachable && len(un) > 0 {
			fmt.Fprintf(w, "warning: tenant %q: %d node(s) cannot be tied to an infra VM, so evidence that may concern them counts as unknown: %s",
				t.Name, len(un), strings.Join(un[:min(len(un), 3)], "; "))
			if len(un) > 3 {
				fmt.Fprintf(w, "; ... (-o json lists all)")
			}
			fmt.Fprintln(w)
		}
	}
	for _, msg := range s.Warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
	if p.source != nil {
		writeSource(w, p.source)
	}
	if len(fs) == 0 {
		fmt.Fprintf(w, "No findings (%d VMs, %d VMIs, %d attachment pods checked).\n", len(s.VMs), len(s.VMIs), len(s.AttachmentPods))
		return nil
	}
	if p.source != nil {
		return writeFindingTableAs(w, "NAMESPACE", "remedy (a live command: check on the live cluster first)", fs)
	}
	return writeFindingTable(w, "NAMESPACE", fs)
}

// writeFindingTable writes the findings' table, then each one's why (the
// words of a deferred finding written for its turn only). scope
// heads the column of f.Namespace (NAMESPACE, or PROJECT in OpenStack).
func writeFindingTable(w io.Writer, scope string, fs []drift.Finding) error {
	return writeFindingTableAs(w, scope, "remedy", fs)
}

// writeFindingTableAs is writeFindingTable whose remedies are labelled
// remedy.
func writeFindingTableAs(w io.Writer, scope, remedy string, fs []drift.Finding) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tCHECK\t%s\tOBJECT\tVOLUME\tSEVERITY\tACTION\tSTATUS\n", scope)
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\n", f.ID, f.Check, f.Namespace, kindShort(f.Object.Kind), f.Object.Name,
			orDash(f.Volume), f.Severity, f.Action.Type, status(f.Action))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return drift.EachWritten(fs, func(f *drift.Finding) error {
		printWhy(w, *f, remedy)
		return nil
	})
}

// printWhy writes a finding's message, evidence and remedy, labelled
// remedy.
func printWhy(w io.Writer, f drift.Finding, remedy string) {
	fmt.Fprintf(w, "\n[%s] %s\n", f.ID, f.Message)
	for _, e := range f.Evidence {
		fmt.Fprintf(w, "  - %s\n", e)
	}
	if f.Action.Remedy != "" {
		fmt.Fprintf(w, "  %s: %s\n", remedy, strings.ReplaceAll(f.Action.Remedy, "\n", "\n"+strings.Repeat(" ", len(remedy)+4)))
	}
}

// printPlan writes the fix plan: a FixPlan document for json and yaml; for
// table, one row per finding with what was or would be done, and after a dry
// run how to apply it. scope heads the column of the findings' namespace
// (NAMESPACE, or PROJECT in OpenStack).
func printPlan(w io.Writer, format, scope string, items []plan.Item, applied bool) error {
	if format != "table" {
		if items == nil {
			items = []plan.Item{}
		}
		return encode(w, format, FixPlan{APIVersion: APIVersion, Kind: "FixPlan", Applied: applied, Items: items})
	}
	if len(items) == 0 {
		fmt.Fprintln(w, "Nothing to fix.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\t%s\tOBJECT\tVOLUME\tACTION\tPLAN\n", scope)
	planned := 0
	for _, it := range items {
		f := it.Finding
		var what string
		switch {
		case it.Result != nil && it.Result.Cause != "":
			what = fmt.Sprintf("%s (%s): %s", it.Result.Outcome, it.Result.Cause, it.Result.Message)
		case it.Result != nil:
			what = fmt.Sprintf("%s: %s", it.Result.Outcome, it.Result.Message)
		case it.Planned:
			what = "would apply"
		case it.Skipped != "":
			what = "skipped: " + it.Skipped
		default:
			what = "no action: " + status(f.Action)
		}
		if it.Planned {
			planned++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\t%s\n", f.ID, f.Namespace, kindShort(f.Object.Kind), f.Object.Name, orDash(f.Volume), f.Action.Type, what)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !applied {
		fmt.Fprintf(w, "\n%d action(s) planned. This was a dry run: nothing changed. Re-run with --apply to carry them out.\n", planned)
	}
	return nil
}

// status says in a word or two whether an action is safe, and if not why.
func status(a drift.Action) string { return policyreport.Status(a) }

// kindShort is the short, kubectl-style name the tables show for kind;
// other kinds in lower case.
func kindShort(kind string) string {
	switch kind {
	case "VirtualMachineInstance":
		return "vmi"
	case "VirtualMachine":
		return "vm"
	case "Pod":
		return "pod"
	case "PersistentVolumeClaim":
		return "pvc"
	case "PersistentVolume":
		return "pv"
	case "VolumeAttachment":
		return "volumeattachment"
	case "DataVolume":
		return "dv"
	}
	return strings.ToLower(kind)
}

// orDash shows an empty table cell as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
