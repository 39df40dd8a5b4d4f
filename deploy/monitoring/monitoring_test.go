package monitoring

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/api/equality"
)

func parseRules(t *testing.T, name string, b []byte) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("%s: %v", name, err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatalf("%s: no rule groups", name)
	}
	return groups
}

// The PrometheusRule's groups and the plain rule file are valid Prometheus
// rules (rulefmt checks every expression and template), and the same.
func TestRules_parseAndAgree(t *testing.T) {
	spec, err := RuleGroups()
	if err != nil {
		t.Fatal(err)
	}
	fromCR := parseRules(t, "prometheusrule.yaml spec.groups", spec)
	plain, err := File("rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fromFile := parseRules(t, "rules.yaml", plain)
	if !equality.Semantic.DeepEqual(fromCR.Groups, fromFile.Groups) {
		t.Error("rules.yaml differs from prometheusrule.yaml's spec.groups: regenerate one from the other")
	}
}

// Every alert has a severity, a summary, a description and a runbook_url
// whose anchor is a heading of docs/operations.md; every heading exists once.
func TestRules_everyAlertHasARunbook(t *testing.T) {
	spec, err := RuleGroups()
	if err != nil {
		t.Fatal(err)
	}
	groups := parseRules(t, "prometheusrule.yaml", spec)
	anchors := headingAnchors(t, filepath.Join("..", "..", "docs", "operations.md"))
	const prefix = "https://github.com/tether-dev/tether/blob/main/docs/operations.md#"
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if s := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
				t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, prefix)
			switch {
			case !ok:
				t.Errorf("%s: runbook_url %q does not point into %s", r.Alert, url, prefix)
			case !anchors[anchor]:
				t.Errorf("%s: runbook anchor #%s is no heading of docs/operations.md (add a section \"### %s\")", r.Alert, anchor, r.Alert)
			case anchor != strings.ToLower(r.Alert):
				t.Errorf("%s: runbook anchor #%s, want #%s (the section named after the alert)", r.Alert, anchor, strings.ToLower(r.Alert))
			}
		}
	}
	if n < 5 {
		t.Errorf("only %d alerts", n)
	}
}

// headingAnchors returns the GitHub anchors of a Markdown file's headings.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}

// The dashboard imports anywhere: its data source is a variable of type
// datasource (Prometheus), which every panel and target uses; each panel
// that is not a row has a query.
func TestDashboard_datasourceVariableAndPanels(t *testing.T) {
	d, err := ReadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	if d.SchemaVersion < 39 || d.UID == "" || d.Title == "" {
		t.Errorf("schemaVersion %d, uid %q, title %q: want a current schema (39 or later), a uid and a title", d.SchemaVersion, d.UID, d.Title)
	}
	if !slices.ContainsFunc(d.Templating.List, func(v Variable) bool {
		return v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
	}) {
		t.Error("no templating variable \"datasource\" of type datasource, query prometheus")
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want uid ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q target %s: datasource %+v, want uid ${datasource}", p.Title, tg.RefID, tg.Datasource)
			}
			if _, err := Parse(tg.Expr); err != nil {
				t.Errorf("panel %q target %s: %q: %v", p.Title, tg.RefID, tg.Expr, err)
			}
		}
	}
	if queries < 10 {
		t.Errorf("only %d queries", queries)
	}
}

// Every metric the alerts and the dashboard use is tether's and is in the
// metrics table of docs/operations.md (histograms by their base name).
// That the controller exports each is tested against a running controller
// (test/e2e, TestMonitoring_everyMetricUsedIsExported).
func TestUsedMetrics_areDocumented(t *testing.T) {
	used, err := UsedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, where := range used {
		if !strings.HasPrefix(name, "tether_") {
			t.Errorf("%s uses %s, which is not one of tether's metrics", where, name)
			continue
		}
		base := name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && strings.HasSuffix(b, "_seconds") {
				base = b
			}
		}
		if !strings.Contains(string(doc), "| `"+base+"` |") {
			t.Errorf("%s uses %s, which the metrics table of docs/operations.md does not list", where, base)
		}
	}
	for _, want := range []string{"tether_blast_radius_tripped", "tether_tenant_up", "tether_findings_oldest_timestamp_seconds", "tether_protection_deleting_oldest_timestamp_seconds", "tether_actions_total"} {
		if _, ok := used[want]; !ok {
			t.Errorf("nothing uses %s", want)
		}
	}
}

// MetricNames finds every selected metric, however nested, and rejects
// what is not PromQL.
func TestMetricNames(t *testing.T) {
	got, err := MetricNames(`time() - min by (kind) (a_seconds{state="x"}) > 0 or histogram_quantile(0.9, sum by (le) (rate(b_bucket[$__rate_interval]))) / on() group_left {__name__="c"}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a_seconds", "b_bucket", "c"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := MetricNames(`sum(rate(x[5m])`); err == nil {
		t.Error("an unbalanced expression parsed")
	}
}
