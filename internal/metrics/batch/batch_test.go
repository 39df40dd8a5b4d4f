package batch

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/testing/promtext"
)

// aRun is a run with three findings (one repaired, one refused, one held
// until seen twice), a tripped breaker and the objects it read.
func aRun() *Run {
	r := New()
	f := func(id string, blocked drift.BlockReason) drift.Finding {
		return drift.Finding{ID: id, Check: "StaleCinderAttachment", Severity: drift.SeverityWarning,
			Action: drift.Action{Type: "DeleteCinderAttachment", Safe: blocked == "", BlockedBy: blocked}}
	}
	r.Finding(f("a", ""), &drift.Result{Outcome: drift.Applied})
	r.Finding(f("b", ""), &drift.Result{Outcome: drift.Refused})
	r.Finding(f("c", drift.NotSeenTwice), nil)
	r.Objects("server", 12)
	r.Tripped(true)
	start := time.Unix(1_790_000_000, 0)
	r.End(start, start.Add(1500*time.Millisecond), true)
	return r
}

// value finds the metric of name whose labels include want.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range mf.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		}
	}
	t.Fatalf("no %s with labels %v", name, want)
	return 0
}

// checkRun asserts the figures of aRun in parsed metric families.
func checkRun(t *testing.T, mfs map[string]*dto.MetricFamily, extra map[string]string) {
	t.Helper()
	with := func(l map[string]string) map[string]string {
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"tether_findings", map[string]string{"check": "StaleCinderAttachment", "phase": "Resolved", "severity": "warning"}, 1},
		{"tether_findings", map[string]string{"phase": "Blocked"}, 1},
		{"tether_findings", map[string]string{"phase": "Waiting"}, 1},
		{"tether_actions_total", map[string]string{"check": "StaleCinderAttachment", "action": "DeleteCinderAttachment", "result": "Applied"}, 1},
		{"tether_actions_total", map[string]string{"result": "Refused"}, 1},
		{"tether_run_findings_blocked", map[string]string{"reason": "NotSeenTwice"}, 1},
		{"tether_blast_radius_tripped", nil, 1},
		{"tether_anomaly_guard_tripped", nil, 0},
		{"tether_run_objects_read", map[string]string{"kind": "server"}, 12},
		{"tether_run_duration_seconds", nil, 1.5},
		{"tether_run_last_timestamp_seconds", nil, 1_790_000_001},
		{"tether_run_success", nil, 1},
	} {
		if got := value(t, mfs, c.name, with(map[string]string{})); c.labels == nil && got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
		if c.labels != nil {
			if got := value(t, mfs, c.name, with(c.labels)); got != c.want {
				t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
			}
		}
	}
}

// The textfile parses with Prometheus' text parser, carries every metric
// with the command label, replaces the file whole and leaves nothing
// beside it that the collector would read.
func TestWriteTextfile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tether-openstack.prom")
	if err := os.WriteFile(path, []byte("old content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := aRun().WriteTextfile(path, "fix"); err != nil {
		t.Fatal(err)
	}
	checkRun(t, promtext.Parse(t, path), map[string]string{"command": "fix"})
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files beside the textfile: %v", entries)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v: the collector runs as another user", st.Mode().Perm())
	}
	for _, bad := range []struct{ path, want string }{
		{filepath.Join(dir, "x.txt"), "ending in .prom"},
		{filepath.Join(dir, "nope", "x.prom"), "create it"},
	} {
		if err := CheckTextfile(bad.path); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("CheckTextfile(%s): %v, want %q", bad.path, err, bad.want)
		}
	}
}

// pushgateway plays the Pushgateway's PUT contract: PUT
// /metrics/job/<job>{/<label>/<value>}, a label@base64 component for a
// value with a '/', a body in the format the Content-Type names; it
// answers 200 and keeps the group's metrics (replacing them), or fails
// with status when set.
type pushgateway struct {
	status int
	groups map[string]map[string]*dto.MetricFamily
	method string
}

func (g *pushgateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.method = r.Method
	if r.Method != http.MethodPut {
		http.Error(w, "want PUT", http.StatusMethodNotAllowed)
		return
	}
	if g.status != 0 {
		http.Error(w, "refused", g.status)
		return
	}
	dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
	mfs := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mfs[mf.GetName()] = &mf
	}
	key, err := groupKey(r.URL.Path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.groups[key] = mfs
	w.WriteHeader(http.StatusOK)
}

// groupKey reads the grouping key of a push path,
// /metrics/job/<job>{/<label>[@base64]/<value>}, in any order of labels,
// as "job=J,label=value,..." sorted by label.
func groupKey(path string) (string, error) {
	parts := strings.Split(strings.TrimPrefix(path, "/metrics/"), "/")
	if len(parts)%2 != 0 || parts[0] != "job" {
		return "", fmt.Errorf("not a push path: %s", path)
	}
	var kv []string
	for i := 0; i < len(parts); i += 2 {
		name, value := parts[i], parts[i+1]
		if n, ok := strings.CutSuffix(name, "@base64"); ok {
			v, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(value, "="))
			if err != nil {
				return "", err
			}
			name, value = n, string(v)
		}
		kv = append(kv, name+"="+value)
	}
	sort.Strings(kv)
	return strings.Join(kv, ","), nil
}

// A push is a PUT to the group of the job, the cloud and the command; a
// cloud name with '/' is base64-encoded in the path; the body carries the
// run's figures; a refusal is an error naming the URL.
func TestPush(t *testing.T) {
	g := &pushgateway{groups: map[string]map[string]*dto.MetricFamily{}}
	srv := httptest.NewServer(g)
	defer srv.Close()
	if err := aRun().Push(context.Background(), srv.URL, "prod", "fix", srv.Client()); err != nil {
		t.Fatal(err)
	}
	mfs, ok := g.groups["cloud=prod,command=fix,job=tether-openstack"]
	if !ok || g.method != http.MethodPut {
		t.Fatalf("groups %v, method %s", g.groups, g.method)
	}
	checkRun(t, mfs, nil)
	if err := aRun().Push(context.Background(), srv.URL, "a/b", "audit", srv.Client()); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.groups["cloud=a/b,command=audit,job=tether-openstack"]; !ok {
		t.Fatalf("a cloud with '/': groups %v", g.groups)
	}
	g.status = http.StatusBadRequest
	if err := aRun().Push(context.Background(), srv.URL, "prod", "fix", srv.Client()); err == nil || !strings.Contains(err.Error(), "--metrics-push "+srv.URL) {
		t.Fatalf("refused push: %v", err)
	}
}

// A finding's phase is the one its Finding record would show.
func TestPhase(t *testing.T) {
	safe := drift.Finding{Action: drift.Action{Safe: true}}
	held := drift.Finding{Action: drift.Action{BlockedBy: "ServerRunning"}}
	once := drift.Finding{Action: drift.Action{BlockedBy: drift.NotSeenTwice}}
	for _, c := range []struct {
		f    drift.Finding
		r    *drift.Result
		want string
	}{
		{safe, nil, "Observed"}, {held, nil, "Blocked"}, {once, nil, "Waiting"},
		{safe, &drift.Result{Outcome: drift.Applied}, "Resolved"}, {safe, &drift.Result{Outcome: drift.Pending}, "Acting"},
		{safe, &drift.Result{Outcome: drift.Refused}, "Blocked"}, {safe, &drift.Result{Outcome: drift.Failed}, "Failed"},
	} {
		if got := string(Phase(c.f, c.r)); got != c.want {
			t.Errorf("%+v %+v: %s, want %s", c.f.Action, c.r, got, c.want)
		}
	}
}
