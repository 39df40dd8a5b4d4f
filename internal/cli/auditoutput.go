package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/report/dot"
	"github.com/tether-dev/tether/internal/report/policyreport"
	"github.com/tether-dev/tether/internal/report/reportapi"
)

// auditFormats are the output formats of `tether audit` beyond table, json
// and yaml: policy report objects and a Graphviz picture.
var auditFormats = []string{"policyreport", "dot"}

// dotReads are the kinds -o dot shows around each finding, whatever the
// checks read.
const dotReads = dot.Reads

// reportFlags are audit's flags of the report formats.
type reportFlags struct {
	api string
}

// register binds the flags to fs.
func (r *reportFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&r.api, "report-api", "", fmt.Sprintf("with -o policyreport, the API to write: %s (PolicyReport, the default) or %s (Report)", reportapi.WGPolicy, reportapi.OpenReports))
}

// parse checks --report-api against --output.
func (r *reportFlags) parse(output string) (reportapi.API, error) {
	if r.api != "" && output != "policyreport" {
		return "", fmt.Errorf("--report-api is for -o policyreport: drop it, or pass -o policyreport")
	}
	api, err := reportapi.Parse(r.api)
	if err != nil {
		return "", fmt.Errorf("--report-api: %v", err)
	}
	return api, nil
}

// auditPrint says how to print an audit.
type auditPrint struct {
	format string
	// api is the policy report API (-o policyreport).
	api reportapi.API
	// namespace is the one namespace in scope, "" for all.
	namespace string
	// now is the timestamp of policy report results.
	now time.Time
	// source, when set, is the support bundle read (audit --from).
	source *bundleSource
}

// reportList is the `audit -o policyreport` document: a List that
// `kubectl apply -f -` takes.
type reportList struct {
	APIVersion string                `json:"apiVersion"`
	Kind       string                `json:"kind"`
	Items      []policyreport.Report `json:"items"`
}

// writePolicyReports writes fs as a YAML List of policy reports: one per
// namespace with findings (and the one namespace in scope, so that a rerun
// with no findings there empties it) and the cluster report of the scope.
// classify is the platform's classification of its block reasons.
func writePolicyReports(w io.Writer, p auditPrint, fs []drift.Finding, classify policyreport.Classifier) error {
	es := make([]policyreport.Entry, len(fs))
	seen, extra := p.now, map[string]string(nil)
	if p.source != nil {
		// Seen when the bundle was collected, and read from it: its
		// remedies are live commands to check on the cluster first.
		seen, extra = p.source.Collected, map[string]string{"offline": p.source.Bundle, "offlineNote": offlineNote}
	}
	for i, f := range fs {
		es[i] = policyreport.Entry{Finding: f, Seen: seen, Properties: extra}
	}
	o := policyreport.Options{API: p.api, Classify: classify, Cluster: true, ClusterName: policyreport.ClusterNameFor(p.namespace)}
	if p.namespace != "" {
		o.Namespaces = []string{p.namespace}
	}
	return encode(w, "yaml", reportList{APIVersion: "v1", Kind: "List", Items: policyreport.Build(es, o)})
}
