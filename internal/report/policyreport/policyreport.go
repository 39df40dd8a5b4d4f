// Package policyreport renders tether's findings as the policy report
// objects that policy tools read (Kyverno's Policy Reporter and its UI,
// Kubewarden, dashboards built on them): one namespaced report per
// namespace with findings, and one cluster report for the findings about
// cluster-scoped objects (VolumeAttachments, PersistentVolumes, Nodes).
//
// Two APIs carry the same shape: wgpolicyk8s.io/v1alpha2 PolicyReport and
// ClusterPolicyReport (what Kyverno writes by default and every Policy
// Reporter reads) and openreports.io/v1alpha1 Report and ClusterReport (their
// successor, opt-in in Kyverno since 1.15, read by Policy Reporter since
// 3.2). docs/reports.md says which to pick.
//
// The package is pure: findings in, objects out. It never talks to a
// cluster and never decides about findings (that is package check).
package policyreport

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/report/reportapi"
)

// Names and labels of tether's reports (contract: reruns and the controller
// replace the objects of these names, and find theirs by the label).
const (
	// Name is the name of every report tether writes: one per namespace
	// and one cluster report.
	Name = "tether"
	// Source, Policy: every result's source and policy.
	Source = "tether"
	Policy = "tether"
	// LabelManagedBy, ManagedBy: the label on every report tether writes.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "tether"
)

// Report is one PolicyReport, ClusterPolicyReport, Report or ClusterReport.
type Report struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	// Source is set for openreports.io only (its report-level field).
	Source  string   `json:"source,omitempty"`
	Summary Summary  `json:"summary"`
	Results []Result `json:"results"`
}

// Metadata is the part of ObjectMeta tether sets.
type Metadata struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels"`
}

// Summary counts the results by outcome.
type Summary struct {
	Pass  int `json:"pass"`
	Fail  int `json:"fail"`
	Warn  int `json:"warn"`
	Error int `json:"error"`
	Skip  int `json:"skip"`
}

// Result is one finding.
type Result struct {
	Source     string            `json:"source"`
	Policy     string            `json:"policy"`
	Rule       string            `json:"rule"`
	Category   string            `json:"category"`
	Severity   string            `json:"severity"`
	Result     string            `json:"result"`
	Scored     bool              `json:"scored"`
	Message    string            `json:"message"`
	Timestamp  Timestamp         `json:"timestamp"`
	Resources  []Resource        `json:"resources"`
	Properties map[string]string `json:"properties"`
}

// Timestamp is the protobuf Timestamp the CRDs use.
type Timestamp struct {
	Seconds int64 `json:"seconds"`
	Nanos   int32 `json:"nanos"`
}

// Resource is the subject of a result (an ObjectReference).
type Resource struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
	UID        string `json:"uid,omitempty"`
}

// Category of every result.
const Category = "Volume attachments"

// Entry is a finding and when it was observed (the result's timestamp).
type Entry struct {
	Finding drift.Finding
	Seen    time.Time
	// Properties are added to the result's properties (the controller's
	// phase and record of the finding); they never replace the finding's.
	Properties map[string]string
}

// clusterScoped are the kinds of finding subjects that have no namespace;
// their findings go to the cluster report.
var clusterScoped = map[string]bool{
	"VolumeAttachment": true, "PersistentVolume": true, "Node": true, "CSIDriver": true, "StorageClass": true,
}

// apiVersions of the kinds findings are about.
var apiVersions = map[string]string{
	"VirtualMachineInstance": "kubevirt.io/v1", "VirtualMachine": "kubevirt.io/v1",
	"DataVolume":       "cdi.kubevirt.io/v1beta1",
	"VolumeAttachment": "storage.k8s.io/v1", "CSIDriver": "storage.k8s.io/v1", "StorageClass": "storage.k8s.io/v1",
	"ControllerRevision": "apps/v1",
}

// ClusterScoped says whether findings about kind go to the cluster report.
func ClusterScoped(kind string) bool { return clusterScoped[kind] }

// APIVersionOf is the apiVersion of a subject kind (core "v1" for the
// kinds not listed).
func APIVersionOf(kind string) string {
	if v, ok := apiVersions[kind]; ok {
		return v
	}
	return "v1"
}

// Options say what to build.
type Options struct {
	// API is the report API to write (empty: reportapi.Default).
	API reportapi.API
	// Classify classifies the platform's block reasons (its
	// check.BlockClassOf): a finding that could not be judged is an error
	// or skip result, not a failure.
	Classify Classifier
	// Namespaces always get a report, empty when they have no findings, so
	// that applying the output replaces an earlier report there.
	Namespaces []string
	// Cluster always gets a cluster report, empty when there are no
	// cluster-scoped findings.
	Cluster bool
	// ClusterName names the cluster report (default Name). An audit of one
	// namespace names its own (ClusterNameFor), so that it replaces only
	// what an earlier audit of that namespace wrote.
	ClusterName string
}

// ClusterNameFor is the name of the cluster report of an audit of
// namespace ns ("" = all namespaces): Name, or Name-ns.
func ClusterNameFor(ns string) string {
	if ns == "" {
		return Name
	}
	return Name + "-" + ns
}

// Build returns the reports of es: the namespaced reports sorted by
// namespace, then the cluster report; in each, the results sorted by
// check, subject and id. Summary counts match the results.
func Build(es []Entry, o Options) []Report {
	o.API = o.API.OrDefault()
	byNS := map[string][]Result{}
	var cluster []Result
	for _, ns := range o.Namespaces {
		byNS[ns] = nil
	}
	for _, e := range sortedEntries(es) {
		r := ResultFor(e, o.Classify)
		if ClusterScoped(e.Finding.Object.Kind) || e.Finding.Namespace == "" {
			cluster = append(cluster, r)
			continue
		}
		byNS[e.Finding.Namespace] = append(byNS[e.Finding.Namespace], r)
	}
	namespaced, clusterKind := o.API.Kinds()
	var out []Report
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		out = append(out, newReport(o.API, namespaced, ns, byNS[ns]))
	}
	if o.Cluster || len(cluster) > 0 {
		r := newReport(o.API, clusterKind, "", cluster)
		if o.ClusterName != "" {
			r.Metadata.Name = o.ClusterName
		}
		out = append(out, r)
	}
	return out
}

// sortedEntries returns es sorted by namespace, check, kind, name, volume
// and id: the order of the results.
func sortedEntries(es []Entry) []Entry {
	es = slices.Clone(es)
	slices.SortStableFunc(es, func(a, b Entry) int {
		x, y := a.Finding, b.Finding
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Check, y.Check), cmp.Compare(x.Object.Kind, y.Object.Kind),
			cmp.Compare(x.Object.Name, y.Object.Name), cmp.Compare(x.Volume, y.Volume), cmp.Compare(x.ID, y.ID))
	})
	return es
}

func newReport(api reportapi.API, kind, ns string, results []Result) Report {
	if results == nil {
		results = []Result{}
	}
	r := Report{
		APIVersion: string(api), Kind: kind,
		Metadata: Metadata{Name: Name, Namespace: ns, Labels: map[string]string{LabelManagedBy: ManagedBy}},
		Results:  results,
	}
	if api == reportapi.OpenReports {
		r.Source = Source
	}
	for _, res := range results {
		r.Summary.add(res.Result)
	}
	return r
}

func (s *Summary) add(result string) {
	switch result {
	case Pass:
		s.Pass++
	case Fail:
		s.Fail++
	case Warn:
		s.Warn++
	case Error:
		s.Error++
	case Skip:
		s.Skip++
	}
}

// ResultFor is the result of one finding, its block reason classified by
// classify.
func ResultFor(e Entry, classify Classifier) Result {
	f := e.Finding
	result := ResultOf(f, classify)
	ref := Resource{APIVersion: APIVersionOf(f.Object.Kind), Kind: f.Object.Kind, Name: f.Object.Name, UID: string(f.Object.UID)}
	if !ClusterScoped(f.Object.Kind) {
		ref.Namespace = f.Namespace
	}
	return Result{
		Source: Source, Policy: Policy, Rule: f.Check, Category: Category,
		Severity: SeverityOf(f), Result: result, Scored: Scored(result),
		Message:    f.Message,
		Timestamp:  Timestamp{Seconds: e.Seen.Unix(), Nanos: int32(e.Seen.Nanosecond())},
		Resources:  []Resource{ref},
		Properties: properties(f, e.Properties),
	}
}

// properties is a finding's evidence as the result's string properties,
// and the entry's extra ones.
func properties(f drift.Finding, extra map[string]string) map[string]string {
	p := map[string]string{}
	for k, v := range extra {
		p[k] = v
	}
	for k, v := range map[string]string{
		"findingID":      f.ID,
		"tetherSeverity": string(f.Severity),
		"action":         string(f.Action.Type),
		"status":         Status(f.Action),
	} {
		p[k] = v
	}
	set := func(k, v string) {
		if v != "" {
			p[k] = v
		}
	}
	set("volume", f.Volume)
	set("blockedBy", string(f.Action.BlockedBy))
	set("remedy", f.Action.Remedy)
	if ClusterScoped(f.Object.Kind) {
		set("namespace", f.Namespace)
	}
	width := len(strconv.Itoa(len(f.Evidence)))
	for i, e := range f.Evidence {
		p[fmt.Sprintf("evidence.%0*d", width, i+1)] = e
	}
	return p
}

// Status says in a word or two whether an action is safe, and if not why
// (as `tether audit`'s STATUS column).
func Status(a drift.Action) string {
	if a.Safe {
		return "safe"
	}
	if a.BlockedBy == "" {
		return "report only"
	}
	return "blocked: " + string(a.BlockedBy)
}
