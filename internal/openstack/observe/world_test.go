package observe

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/check"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
	ostest "github.com/tether-dev/tether/internal/testing/openstack"
)

// These tests read real Nova and Cinder (hack/openstack.sh); what they
// expect comes from the services' own answers through the harness.

func TestMain(m *testing.M) { ostest.Main(m) }

// counter counts the requests it carries, by path suffix, and fails the
// GETs of the paths that end in a key of fail: with that status, or with a
// transport error (as a timeout does) for 0.
type counter struct {
	mu    sync.Mutex
	paths []string
	fail  map[string]int
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.paths = append(c.paths, r.Method+" "+r.URL.Path)
	fail := c.fail
	c.mu.Unlock()
	for suffix, code := range fail {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, suffix) {
			continue
		}
		if code == 0 {
			return nil, errors.New("read tcp: i/o timeout")
		}
		return &http.Response{StatusCode: code, Status: http.StatusText(code), Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"error": "injected by the test"}`)), Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (c *counter) reset() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.paths
	c.paths = nil
	return p
}

func count(paths []string, suffix string) int {
	n := 0
	for _, p := range paths {
		if strings.HasSuffix(p, suffix) {
			n++
		}
	}
	return n
}

// counted connects to the world through a counter.
func counted(t *testing.T, w *ostest.World) (*Clients, *counter) {
	t.Helper()
	cnt := &counter{}
	c, err := Connect(context.Background(), ConnectOptions{Cloud: w.Cloud, CloudsYAML: w.CloudsYAML, Transport: cnt})
	if err != nil {
		t.Fatal(err)
	}
	return c, cnt
}

func TestObserveTheRealServices(t *testing.T) {
	w := ostest.Start(t)
	c, cnt := counted(t, w)
	s1, s2 := w.Server(t, "observed-1"), w.Server(t, "observed-2")
	healthy, dangling, stale, forgotten := w.Volume(t, "healthy"), w.Volume(t, "dangling"), w.Volume(t, "stale"), w.Volume(t, "forgotten")
	healthyAt := w.Attach(t, s1, healthy)
	danglingAt := w.Attach(t, s1, dangling)
	w.DeleteAttachmentAsNova(t, danglingAt)
	w.WaitVolume(t, dangling, "available")
	staleAt, ghost := w.StaleAttachment(t, stale)
	forgottenAt := w.Attach(t, s2, forgotten)
	w.ForgetBDM(t, s2, forgotten)
	cnt.reset()

	s, err := Observe(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := cnt.reset()
	ix := s.Index()
	if want := map[string]string{ostest.LineZed: "2.93", ostest.Line2025_1: "2.100"}[w.Line]; s.NovaMaxMicroversion != want {
		t.Errorf("Nova's maximum microversion on the %s line: %q, want %q", w.Line, s.NovaMaxMicroversion, want)
	}

	// Nova: s1 lists both its volumes (the dangling one too), with the
	// attachment id Nova records; s2 lists nothing.
	srv := ix.Servers[s1]
	if srv == nil || srv.Name != "observed-1" || srv.Project != w.Project || srv.Status != "ACTIVE" || srv.VMState != "active" || srv.TaskState != "" {
		t.Fatalf("server %s: %+v", s1, srv)
	}
	if m, ok := srv.Lists(healthy); !ok || m.AttachmentID != healthyAt || m.BDM == "" || m.Device == "" {
		t.Fatalf("server %s's mapping of %s: %+v (Nova records attachment %s)", s1, healthy, m, healthyAt)
	}
	if _, ok := srv.Lists(dangling); !ok {
		t.Fatalf("server %s does not list the dangling volume %s: %+v", s1, dangling, srv.Volumes)
	}
	if _, ok := ix.Servers[s2].Lists(forgotten); ok {
		t.Fatalf("server %s lists the forgotten volume", s2)
	}
	// Cinder: statuses as its API shows them, and every attachment with
	// its server.
	for id, want := range map[string]string{healthy: "in-use", dangling: "available", stale: "in-use", forgotten: "in-use"} {
		v := ix.Volumes[id]
		if v == nil || v.Status != want || v.Project != w.Project || v.Updated.IsZero() {
			t.Errorf("volume %s: %+v, want status %s in project %s", id, v, want, w.Project)
		}
	}
	for id, want := range map[string]snapshot.Attachment{
		healthyAt:   {ID: healthyAt, VolumeID: healthy, Instance: s1, Status: "attached", Connected: true},
		staleAt:     {ID: staleAt, VolumeID: stale, Instance: ghost, Status: "attached", Connected: true},
		forgottenAt: {ID: forgottenAt, VolumeID: forgotten, Instance: s2, Status: "attached", Connected: true},
	} {
		if got := ix.Attachments[id]; got == nil || *got != want {
			t.Errorf("attachment %s: %+v, want %+v", id, got, want)
		}
	}
	if len(ix.AttachmentsByVolume[dangling]) != 0 {
		t.Errorf("the dangling volume has attachments: %+v", ix.AttachmentsByVolume[dangling])
	}
	// Read by ID: the stale attachment's server and the dangling mapping's
	// attachment are gone (404), and nothing else was read.
	if !s.Direct.Gone[ghost] || !s.Direct.Gone[danglingAt] || len(s.Direct.Gone) != 2 || len(s.Direct.Unread) != 0 ||
		len(s.Direct.Servers)+len(s.Direct.Volumes)+len(s.Direct.Attachments) != 0 {
		t.Errorf("direct reads: %+v, want %s and %s gone and nothing else", s.Direct, ghost, danglingAt)
	}

	// Requests: Nova's version document (its maximum microversion), one
	// list each of servers and volumes, the attachment list
	// and the empty page that ends it, os-volume_attachments only for s1,
	// the one server whose mappings Cinder does not all hold, and a read
	// by ID of each object a record names that the lists did not show: the
	// server of the stale attachment and the attachment the dangling
	// mapping records (both answer 404).
	want := []string{"/v2.1/", "/servers/detail", "/volumes/detail", "/attachments/detail", "/attachments/detail", "/servers/" + s1 + "/os-volume_attachments",
		"/servers/" + ghost, "/attachments/" + danglingAt}
	if len(reqs) != len(want) {
		t.Fatalf("requests: %v, want %d (%v)", reqs, len(want), want)
	}
	for _, suffix := range want {
		if count(reqs, suffix) != count(want, suffix) {
			t.Fatalf("requests: %v, want %v", reqs, want)
		}
	}

	// More servers with attached volumes add no request.
	for i := range 3 {
		name := "more-" + string(rune('a'+i))
		w.Attach(t, w.Server(t, name), w.Volume(t, name))
	}
	cnt.reset()
	more, err := Observe(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cnt.reset(); len(got) != len(want) || len(more.Servers) != len(s.Servers)+3 {
		t.Fatalf("with 3 more servers: %d servers, requests %v, want %d requests", len(more.Servers), got, len(want))
	}

	// Page by page (limit 1) the snapshot is the same; Cinder's attachment
	// list, which has no next link, takes one request per attachment and
	// the empty one after.
	paged, err := Observe(context.Background(), c, Options{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := cnt.reset()
	if n := count(got, "/attachments/detail"); n != len(more.Attachments)+1 {
		t.Errorf("paged: %d attachment requests for %d attachments, want one more than attachments", n, len(more.Attachments))
	}
	same(t, "servers", ids(more.Servers, func(s snapshot.Server) string { return s.ID }), ids(paged.Servers, func(s snapshot.Server) string { return s.ID }))
	same(t, "volumes", ids(more.Volumes, func(v snapshot.Volume) string { return v.ID }), ids(paged.Volumes, func(v snapshot.Volume) string { return v.ID }))
	same(t, "attachments", ids(more.Attachments, func(a snapshot.Attachment) string { return a.ID }), ids(paged.Attachments, func(a snapshot.Attachment) string { return a.ID }))
}

func ids[T any](xs []T, id func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = id(x)
	}
	slices.Sort(out)
	return out
}

func same(t *testing.T, what string, a, b []string) {
	t.Helper()
	if !slices.Equal(a, b) {
		t.Errorf("%s differ page by page: %v vs %v", what, a, b)
	}
}

func TestSubjectReadsOneServerAndVolumeLive(t *testing.T) {
	w := ostest.Start(t)
	c, err := Connect(context.Background(), ConnectOptions{Cloud: w.Cloud, CloudsYAML: w.CloudsYAML})
	if err != nil {
		t.Fatal(err)
	}
	s, v := w.Server(t, "subject"), w.Volume(t, "subject")
	at := w.Attach(t, s, v)
	snap, err := Subject(context.Background(), c, s, v)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Servers) != 1 || len(snap.Volumes) != 1 || len(snap.Attachments) != 1 {
		t.Fatalf("subject snapshot: %+v", snap)
	}
	if m, ok := snap.Servers[0].Lists(v); !ok || m.AttachmentID != at {
		t.Fatalf("mapping: %+v, want attachment %s", snap.Servers[0].Volumes, at)
	}
	// A server and a volume that do not exist read as absent, not as errors.
	gone, err := Subject(context.Background(), c, "00000000-0000-4000-8000-000000000000", "00000000-0000-4000-8000-000000000001")
	if err != nil || len(gone.Servers)+len(gone.Volumes)+len(gone.Attachments) != 0 {
		t.Fatalf("absent subject: %+v, %v", gone, err)
	}
	// Their 404s are recorded: the checks may call them gone.
	if !gone.Direct.Gone["00000000-0000-4000-8000-000000000000"] || !gone.Direct.Gone["00000000-0000-4000-8000-000000000001"] {
		t.Fatalf("absent subject: gone %v, want the server and the volume", gone.Direct.Gone)
	}
}

func TestConnectErrorsNameTheFix(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, cloud, want string
	}{
		{"no cloud named", "clouds: {}\n", "", "--os-cloud"},
		{"unknown cloud", "clouds:\n  a: {}\n", "b", `cloud "b" is not in`},
		{"noauth without endpoints", "clouds:\n  a:\n    auth_type: none\n    auth: {token: 'x:y'}\n", "a", "compute_endpoint_override"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir() + "/clouds.yaml"
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Connect(context.Background(), ConnectOptions{Cloud: tc.cloud, CloudsYAML: path})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestUnsupportedMicroversionIsNamed: Nova and Cinder answer 406 to a
// microversion they do not speak (api-ref "Microversions"); the error says
// which ones tether needs.
func TestUnsupportedMicroversionIsNamed(t *testing.T) {
	w := ostest.Start(t)
	c, err := Connect(context.Background(), ConnectOptions{Cloud: w.Cloud, CloudsYAML: w.CloudsYAML})
	if err != nil {
		t.Fatal(err)
	}
	c.Compute.Microversion = "2.999"
	_, err = Observe(context.Background(), c, Options{})
	if err == nil || !strings.Contains(err.Error(), "does not support microversion 2.999") || !strings.Contains(err.Error(), "Nova Xena or later") {
		t.Fatalf("compute 2.999: %v", err)
	}
	c.Compute.Microversion = ComputeMicroversion
	c.BlockStorage.Microversion = "3.999"
	_, err = Observe(context.Background(), c, Options{})
	if err == nil || !strings.Contains(err.Error(), "Cinder does not support microversion 3.999") {
		t.Fatalf("block-storage 3.999: %v", err)
	}
}

// TestOtherProjectsObjectsAreReadByID (issue 32): with --project, Cinder's
// lists leave out a volume of another project that a server of the
// project uses, and its attachment (Cinder filters attachments by their
// volume's project). Both are read by ID, one request each, and found:
// the checks see them as present, outside the lists, and find nothing
// about them. A ghost server's 404 is read the same way; a read that
// fails (503, a timeout) is recorded as unread, never as gone, and the
// finding resting on it is held.
func TestOtherProjectsObjectsAreReadByID(t *testing.T) {
	w := ostest.Start(t)
	c, cnt := counted(t, w)
	s, theirs := w.Server(t, "uses-demo-volume"), w.VolumeIn(t, "demo", "of-demo")
	at := w.Attach(t, s, theirs)
	w.StopServer(t, s)
	stale, ghost := w.StaleAttachment(t, w.Volume(t, "of-a-ghost"))
	cnt.reset()

	snap, err := Observe(context.Background(), c, Options{Project: w.Project})
	if err != nil {
		t.Fatal(err)
	}
	reqs := cnt.reset()
	for _, path := range []string{"/volumes/" + theirs, "/attachments/" + at, "/servers/" + ghost} {
		if n := count(reqs, path); n != 1 {
			t.Errorf("%d reads of %s, want 1: %v", n, path, reqs)
		}
	}
	ix := snap.Index()
	if v := ix.Volumes[theirs]; v == nil || v.Project != "demo" || v.Status != "in-use" || !ix.Outside[theirs] {
		t.Errorf("volume %s of project demo: %+v (outside %t)", theirs, v, ix.Outside[theirs])
	}
	if a := ix.Attachments[at]; a == nil || a.Instance != s || a.Status != "attached" || !ix.Outside[at] {
		t.Errorf("attachment %s: %+v (outside %t)", at, a, ix.Outside[at])
	}
	if !snap.Direct.Gone[ghost] || snap.Direct.Gone[theirs] {
		t.Errorf("gone: %v, want %s and not %s", snap.Direct.Gone, ghost, theirs)
	}
	byVolume := func(snap *snapshot.Snapshot) map[string]drift.Finding {
		out := map[string]drift.Finding{}
		for _, f := range check.Run(snap, check.Policy{}, snap.Taken) {
			out[f.Volume] = f
		}
		return out
	}
	fs := byVolume(snap)
	if f, ok := fs[theirs]; ok {
		t.Errorf("a finding about volume %s of project demo: %+v", theirs, f)
	}
	if f := fs[ix.Attachments[stale].VolumeID]; f.Action.Type != check.DeleteCinderAttachment || !f.Action.Safe {
		t.Errorf("attachment %s of server %s that Nova answers 404 for: %+v, want a safe delete", stale, ghost, f)
	}

	// Failed reads by ID are not 404s: the finding is held Unconfirmed.
	for name, code := range map[string]int{"503": http.StatusServiceUnavailable, "timeout": 0} {
		cnt.mu.Lock()
		cnt.fail = map[string]int{"/servers/" + ghost: code, "/volumes/" + theirs: code}
		cnt.mu.Unlock()
		snap, err := Observe(context.Background(), c, Options{Project: w.Project})
		if err != nil {
			t.Fatalf("%s: a failed read by ID failed the observation: %v", name, err)
		}
		if _, ok := snap.Direct.Unread[ghost]; !ok || snap.Direct.Gone[ghost] {
			t.Errorf("%s: server %s: gone %t, unread %v", name, ghost, snap.Direct.Gone[ghost], snap.Direct.Unread)
		}
		fs := byVolume(snap)
		if f := fs[ix.Attachments[stale].VolumeID]; f.Action.Safe || f.Action.BlockedBy != check.Unconfirmed {
			t.Errorf("%s: the stale attachment's finding: %+v, want held Unconfirmed", name, f.Action)
		}
		if f, ok := fs[theirs]; ok && (f.Action.Safe || f.Action.BlockedBy == check.VolumeGone) {
			t.Errorf("%s: volume %s called gone or repairable: %+v", name, theirs, f)
		}
	}
	cnt.mu.Lock()
	cnt.fail = nil
	cnt.mu.Unlock()
	w.DeleteAttachmentAsNova(t, stale)
}
