package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ostest "github.com/tether-dev/tether/internal/testing/openstack"
)

// TestMain makes the test binary a measuring child when the benchmark
// starts one (measureProcess runs its own executable), as main does.
func TestMain(m *testing.M) {
	if os.Getenv(measureEnv) != "" {
		measureChild(os.Args[1:])
	}
	os.Exit(m.Run())
}

func TestOpenStackFlagsAreChecked(t *testing.T) {
	ok := osOptions{servers: 10, volumes: 20, drift: 0.01, runs: 1}
	if err := ok.validate(); err != nil {
		t.Fatalf("%+v: %v", ok, err)
	}
	for _, tc := range []struct {
		change func(*osOptions)
		want   string
	}{
		{func(o *osOptions) { o.servers = 0 }, "-servers 0"},
		{func(o *osOptions) { o.volumes = 15 }, "multiple of -servers"},
		{func(o *osOptions) { o.volumes = 0 }, "-volumes 0"},
		{func(o *osOptions) { o.drift = 1.5 }, "from 0 to 1"},
		{func(o *osOptions) { o.drift = -0.1 }, "from 0 to 1"},
		{func(o *osOptions) { o.runs = 0 }, "-runs 0"},
		{func(o *osOptions) { o.parallel = -1 }, "-parallel -1"},
	} {
		o := ok
		tc.change(&o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one that says %q", o, err, tc.want)
		}
	}
}

// The openstack mode at a small size: six servers, twelve volumes, one
// drifted attachment of each kind. tether finds what was seeded (the mode
// itself fails otherwise), the binary reads what observe reads in process,
// and its requests are the pages, Nova's version document and at most two
// per drifted attachment, where the loop's grow with servers and volumes.
func TestOpenStackModeAtSmallSize(t *testing.T) {
	if testing.Short() {
		t.Skip("the OpenStack test world does not run under -short")
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "table"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	r, err := runOpenStack(osOptions{servers: 6, volumes: 12, drift: 0.25, runs: 1, out: out})
	var cannot *ostest.CannotRunError
	if errors.As(err, &cannot) {
		t.Skip(cannot.Why)
	}
	if err != nil {
		t.Fatal(err)
	}
	table, _ := os.ReadFile(out.Name())
	t.Logf("\n%s", table)
	s := r.seeded
	drifted := len(s.Dangling) + len(s.Forgotten) + len(s.Leftover)
	if len(s.Servers) != 6 || len(s.Volumes) != 12 || len(s.Dangling) != 1 || len(s.Forgotten) != 1 || len(s.Leftover) != 1 {
		t.Fatalf("seeded %d servers, %d volumes, drift %d/%d/%d; want 6, 12 and one of each kind", len(s.Servers), len(s.Volumes), len(s.Dangling), len(s.Forgotten), len(s.Leftover))
	}
	got := map[string]osResult{}
	for i, name := range r.names {
		got[name] = r.medians[i]
	}
	loop, pages, inProcess, binary := got["per-server loop"], got["pages alone"], got["observe+checks in process"], got["tether openstack audit -o json"]
	// The loop: the token, one page of servers, each server's mappings and
	// each volume Nova lists (the forgotten one it does not).
	if want := 1 + 1 + 6 + 12 - len(s.Forgotten); loop.counts.total() != want {
		t.Errorf("the loop sent %d requests (%s), want %d", loop.counts.total(), loop.counts, want)
	}
	if binary.findings != drifted {
		t.Errorf("tether openstack audit printed %d findings, want %d", binary.findings, drifted)
	}
	if binary.counts.total() != inProcess.counts.total() {
		t.Errorf("the binary sent %d requests (%s), observe in process %d (%s)", binary.counts.total(), binary.counts, inProcess.counts.total(), inProcess.counts)
	}
	if most := pages.counts.total() + 1 + 2*drifted; binary.counts.total() > most {
		t.Errorf("tether sent %d requests (%s), want at most the %d pages (%s), the version document and 2 a drifted attachment: %d",
			binary.counts.total(), binary.counts, pages.counts.total(), pages.counts, most)
	}
}
