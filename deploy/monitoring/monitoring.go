// Package monitoring holds tether's Grafana dashboard and Prometheus alerts
// (prometheusrule.yaml, and rules.yaml, the same groups as a plain rule
// file), and reads back the PromQL they contain, so that tests can hold
// them to what the controller exports and to the runbooks.
package monitoring

import (
	"embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

//go:embed prometheusrule.yaml rules.yaml grafana-dashboard.json
var files embed.FS

// File returns one of the embedded files by name.
func File(name string) ([]byte, error) { return files.ReadFile(name) }

// RuleGroups returns the spec.groups of the PrometheusRule as a Prometheus
// rule file (YAML with a top-level groups key).
func RuleGroups() ([]byte, error) {
	b, err := File("prometheusrule.yaml")
	if err != nil {
		return nil, err
	}
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &pr); err != nil {
		return nil, fmt.Errorf("prometheusrule.yaml: %w", err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("prometheusrule.yaml: %s %s, want monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind)
	}
	return yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
}

// Expr is one PromQL expression and where it is.
type Expr struct {
	// Where names the alert or the dashboard panel and target.
	Where string
	Expr  string
}

// Dashboard is the part of the dashboard JSON model the tests read.
type Dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []Panel `json:"panels"`
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Variable is a dashboard template variable.
type Variable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

// Panel is a dashboard panel (a row has no targets).
type Panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *Datasource `json:"datasource"`
	Targets    []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *Datasource `json:"datasource"`
	} `json:"targets"`
}

// Datasource is a panel's or target's data source reference.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// ReadDashboard decodes grafana-dashboard.json.
func ReadDashboard() (Dashboard, error) {
	var d Dashboard
	b, err := File("grafana-dashboard.json")
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("grafana-dashboard.json: %w", err)
	}
	return d, nil
}

// Exprs returns every expression of the alerts and of the dashboard's
// panel targets.
func Exprs() ([]Expr, error) {
	b, err := RuleGroups()
	if err != nil {
		return nil, err
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert  string `json:"alert"`
				Record string `json:"record"`
				Expr   string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &rf); err != nil {
		return nil, err
	}
	var out []Expr
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			out = append(out, Expr{Where: "alert " + r.Alert + r.Record, Expr: r.Expr})
		}
	}
	d, err := ReadDashboard()
	if err != nil {
		return nil, err
	}
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, Expr{Where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Expr: t.Expr})
		}
	}
	return out, nil
}

// grafanaVariables are the dashboard variables an expression may use, with
// a value that makes it PromQL.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// Parse parses expr as PromQL (the dashboard's interval variables
// replaced by durations).
func Parse(expr string) (parser.Expr, error) {
	return parser.NewParser(parser.Options{}).ParseExpr(grafanaVariables.Replace(expr))
}

// MetricNames returns the sorted metric names that expr selects.
func MetricNames(expr string) ([]string, error) {
	e, err := Parse(expr)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			seen[name] = true
		}
		return nil
	})
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// UsedMetrics returns every metric name the alerts and the dashboard use,
// each with the first place that uses it.
func UsedMetrics() (map[string]string, error) {
	exprs, err := Exprs()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range exprs {
		names, err := MetricNames(e.Expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", e.Where, e.Expr, err)
		}
		for _, n := range names {
			if _, ok := out[n]; !ok {
				out[n] = e.Where
			}
		}
	}
	return out, nil
}
