// Package promtext reads metrics files in Prometheus' text format for
// tests, with Prometheus' own text parser.
package promtext

import (
	"os"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse parses the file at path, failing the test when it does not parse.
func Parse(t testing.TB, path string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s does not parse as Prometheus' text format: %v", path, err)
	}
	return mfs
}
