package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/attachments"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/tether-dev/tether/internal/openstack/check"
	"github.com/tether-dev/tether/internal/openstack/observe"
	ostest "github.com/tether-dev/tether/internal/testing/openstack"
)

// osOptions are the openstack mode's flags.
type osOptions struct {
	servers, volumes int
	drift            float64
	runs             int
	// tether is the binary to run; empty builds ./cmd/tether.
	tether string
	// parallel and batch shape the seeding (ostest.ScaleOptions).
	parallel, batch int
	// hold keeps the world up after the runs, for measuring by hand.
	hold bool
	// out receives the table (stdout); progress goes to stderr.
	out *os.File
}

// validate checks the flags alone.
func (o *osOptions) validate() error {
	switch {
	case o.servers <= 0:
		return fmt.Errorf("-servers %d: want at least one server", o.servers)
	case o.volumes <= 0 || o.volumes%o.servers != 0:
		return fmt.Errorf("-volumes %d: want a positive multiple of -servers (%d): every server gets the same number of volumes", o.volumes, o.servers)
	case o.drift < 0 || o.drift > 1:
		return fmt.Errorf("-drift %v: want a share from 0 to 1 (0.01 is one attachment in a hundred)", o.drift)
	case o.runs <= 0:
		return fmt.Errorf("-runs %d: want at least one run", o.runs)
	case o.parallel < 0 || o.batch < 0:
		return fmt.Errorf("-parallel %d, -batch %d: want 0 (the default) or more", o.parallel, o.batch)
	}
	return nil
}

// osCloud is the cloud in the clouds.yaml every contestant reads.
const osCloud = "bench"

// runOpenStack starts an OpenStack test world at scale (Nova's quotas
// off), seeds o.servers servers with o.volumes volumes attached through
// Nova and o.drift of the attachments drifted, and measures side by side,
// interleaved, o.runs times: the per-server loop an operator's script makes
// (servers paged, then os-volume_attachments of each server and a GET of
// each volume), the pages alone (the list requests tether reads, thrown
// away), observe + checks in process and `tether openstack audit` end to
// end. Every request goes through a counting proxy in front of each
// service, so the counts do not depend on the clients' own code.
func runOpenStack(o osOptions) (*osReport, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	// An interrupt stops the world too: its services run on after the
	// benchmark unless Stop stops them.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tmp, err := os.MkdirTemp("", "tether-bench-openstack-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := o.tether
	if bin == "" {
		if bin, err = buildTether(tmp); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	w, err := ostest.StartWorld(ostest.Options{Scale: true})
	if err != nil {
		return nil, err
	}
	failed := true // a failed run leaves the world's logs
	defer func() {
		if err := w.Stop(failed); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		if failed {
			fmt.Fprintf(os.Stderr, "the world's logs are in %s/logs\n", w.Dir)
		}
	}()
	fmt.Fprintf(os.Stderr, "world: %s (%s) up in %s in %s\n", w.Line, w.Release, time.Since(t0).Round(100*time.Millisecond), w.Dir)
	t0 = time.Now()
	seeded, err := w.SeedScale(ctx, ostest.ScaleOptions{
		Servers: o.servers, VolumesPerServer: o.volumes / o.servers, Drift: o.drift, Parallel: o.parallel, Batch: o.batch,
		Progress: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%s seeding %s\n", time.Since(t0).Round(time.Second), fmt.Sprintf(format, args...))
		},
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.out, "seeded %d servers, %d volumes attached through Nova, drift in %d (%d dangling, %d forgotten, %d leftover) in %s (boot %s, volumes %s, attach %s, drift %s)\n",
		len(seeded.Servers), len(seeded.Volumes), len(seeded.Dangling)+len(seeded.Forgotten)+len(seeded.Leftover),
		len(seeded.Dangling), len(seeded.Forgotten), len(seeded.Leftover), time.Since(t0).Round(time.Second),
		seeded.Boot.Round(time.Second), seeded.Create.Round(time.Second), seeded.Attach.Round(time.Second), seeded.Drift.Round(time.Second))

	px, err := startCounting(map[string]string{"identity": w.Identity, "compute": w.Compute, "block-storage": w.BlockStorage})
	if err != nil {
		return nil, err
	}
	defer px.close()
	clouds := filepath.Join(tmp, "clouds.yaml")
	if err := px.writeCloudsYAML(clouds, w.Project); err != nil {
		return nil, err
	}
	want := map[string]int{
		check.DanglingNovaAttachment:   len(seeded.Dangling),
		check.StaleCinderAttachment:    len(seeded.Forgotten),
		check.LeftoverCinderAttachment: len(seeded.Leftover),
	}
	cs := []osContestant{
		{"per-server loop", func(ctx context.Context) (result, error) { return perServerLoop(ctx, clouds) }},
		{"pages alone", func(ctx context.Context) (result, error) { return pagesAlone(ctx, clouds) }},
		{"observe+checks in process", func(ctx context.Context) (result, error) { return osInProcess(ctx, clouds, want) }},
		{"tether openstack audit -o json", func(ctx context.Context) (result, error) {
			return measureProcess(ctx, []string{bin, "openstack", "audit", "--os-cloud", osCloud, "-o", "json", "OS_CLIENT_CONFIG_FILE=" + clouds})
		}},
	}
	all := make([][]osResult, len(cs))
	for r := range o.runs {
		for i, c := range cs {
			px.reset()
			res, err := c.run(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.name, err)
			}
			counts := px.reset()
			all[i] = append(all[i], osResult{result: res, counts: counts})
			fmt.Fprintf(os.Stderr, "run %d/%d %s: %s, %d requests\n", r+1, o.runs, c.name, res.wall.Round(time.Millisecond), counts.total())
		}
	}
	report := &osReport{seeded: seeded}
	for i, c := range cs {
		report.names = append(report.names, c.name)
		report.medians = append(report.medians, medianOS(all[i]))
	}
	failed = false
	printOpenStack(o, seeded, cs, all)
	if o.hold {
		fmt.Fprintf(os.Stderr, "holding the world: OS_CLIENT_CONFIG_FILE=%s OS_CLOUD=%s (through the counting proxies; interrupt to stop)\n", clouds, osCloud)
		<-ctx.Done()
	}
	return report, nil
}

type osContestant struct {
	name string
	run  func(ctx context.Context) (result, error)
}

// osReport is what runOpenStack measured: the median run of each
// contestant, in the order of names.
type osReport struct {
	seeded  *ostest.Scale
	names   []string
	medians []osResult
}

type osResult struct {
	result
	counts requestCounts
}

// printOpenStack prints the median run of each contestant, with its
// requests by service and its speed-up over the loop, then the requests of
// the last run of each by kind.
func printOpenStack(o osOptions, s *ostest.Scale, cs []osContestant, all [][]osResult) {
	fmt.Fprintf(o.out, "%-8s %-8s %-32s %10s %9s %9s %8s %8s %10s %9s %8s\n",
		"SERVERS", "VOLUMES", "CONTESTANT", "WALL", "REQUESTS", "IDENTITY", "NOVA", "CINDER", "PEAK RSS", "FINDINGS", "VS LOOP")
	loop := medianOS(all[0]).wall
	for i, c := range cs {
		m := medianOS(all[i])
		fmt.Fprintf(o.out, "%-8d %-8d %-32s %10s %9d %9d %8d %8d %10s %9d %8s\n", len(s.Servers), len(s.Volumes), c.name,
			m.wall.Round(time.Millisecond), m.counts.total(), m.counts.service("identity"), m.counts.service("compute"), m.counts.service("block-storage"),
			orDash(m.rssKiB, fmt.Sprintf("%d MiB", m.rssKiB/1024)), m.findings, fmt.Sprintf("%.1fx", float64(loop)/float64(m.wall)))
	}
	fmt.Fprintf(o.out, "expected findings: %d (%d %s, %d %s, %d %s)\n", len(s.Dangling)+len(s.Forgotten)+len(s.Leftover),
		len(s.Dangling), check.DanglingNovaAttachment, len(s.Forgotten), check.StaleCinderAttachment, len(s.Leftover), check.LeftoverCinderAttachment)
	for i, c := range cs {
		fmt.Fprintf(o.out, "requests of %s: %s\n", c.name, all[i][len(all[i])-1].counts)
	}
}

func medianOS(rs []osResult) osResult {
	m := median(resultsOf(rs))
	for _, r := range rs {
		if r.result == m {
			return r
		}
	}
	return rs[0]
}

func resultsOf(rs []osResult) []result {
	out := make([]result, len(rs))
	for i, r := range rs {
		out[i] = r.result
	}
	return out
}

// connectBench connects as every contestant does: the bench cloud of
// clouds (password authentication against the Keystone stub, the services
// at their counting proxies), at tether's microversions.
func connectBench(ctx context.Context, clouds string) (*observe.Clients, error) {
	return observe.Connect(ctx, observe.ConnectOptions{Cloud: osCloud, CloudsYAML: clouds})
}

// perServerLoop is the operator's script: list the servers (all projects,
// paged), then for each server GET its os-volume_attachments and, for each
// volume there, GET the volume, and count the mappings whose volume Cinder
// does not show attached to that server, and the volumes Cinder shows
// attached to a server that does not list them.
func perServerLoop(ctx context.Context, clouds string) (result, error) {
	t0 := time.Now()
	c, err := connectBench(ctx, clouds)
	if err != nil {
		return result{}, err
	}
	var ids []string
	err = servers.List(c.Compute, servers.ListOpts{AllTenants: true}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		var page []struct {
			ID string `json:"id"`
		}
		if err := p.(servers.ServerPage).ExtractIntoSlicePtr(&page, "servers"); err != nil {
			return false, err
		}
		for _, s := range page {
			ids = append(ids, s.ID)
		}
		return true, nil
	})
	if err != nil {
		return result{}, fmt.Errorf("listing servers: %w", err)
	}
	findings := 0
	for _, id := range ids {
		pages, err := volumeattach.List(c.Compute, id).AllPages(ctx)
		if err != nil {
			return result{}, fmt.Errorf("listing the volume attachments of server %s: %w", id, err)
		}
		mappings, err := volumeattach.ExtractVolumeAttachments(pages)
		if err != nil {
			return result{}, err
		}
		for _, m := range mappings {
			var v struct {
				Status      string `json:"status"`
				Attachments []struct {
					ServerID string `json:"server_id"`
				} `json:"attachments"`
			}
			if err := volumes.Get(ctx, c.BlockStorage, m.VolumeID).ExtractIntoStructPtr(&v, "volume"); err != nil {
				return result{}, fmt.Errorf("reading volume %s: %w", m.VolumeID, err)
			}
			attached := false
			for _, a := range v.Attachments {
				if a.ServerID == id {
					attached = true
				} else {
					findings++ // attached to another server than the one that lists it
				}
			}
			if !attached {
				findings++
			}
		}
	}
	return result{wall: time.Since(t0), findings: findings}, nil
}

// pagesAlone fetches the list pages tether reads, one list after the
// other, and throws them away: the services' own share of an audit.
func pagesAlone(ctx context.Context, clouds string) (result, error) {
	t0 := time.Now()
	c, err := connectBench(ctx, clouds)
	if err != nil {
		return result{}, err
	}
	drain := func(pagination.Page) error { return nil }
	if err := eachPage(ctx, servers.List(c.Compute, servers.ListOpts{AllTenants: true}), drain); err != nil {
		return result{}, fmt.Errorf("listing servers: %w", err)
	}
	if err := eachPage(ctx, volumes.List(c.BlockStorage, volumes.ListOpts{AllTenants: true}), drain); err != nil {
		return result{}, fmt.Errorf("listing volumes: %w", err)
	}
	// Cinder's attachment list has no next link: page by marker until a
	// page is empty or shorter than the first (Cinder's limit).
	opts := attachments.ListOpts{AllTenants: true}
	first := 0
	for {
		var page []attachments.Attachment
		err := eachPage(ctx, attachments.List(c.BlockStorage, opts), func(p pagination.Page) error {
			var err error
			page, err = attachments.ExtractAttachments(p)
			return err
		})
		if err != nil {
			return result{}, fmt.Errorf("listing attachments: %w", err)
		}
		if first == 0 {
			first = len(page)
		}
		if len(page) == 0 || len(page) < first {
			break
		}
		opts.Marker = page[len(page)-1].ID
	}
	return result{wall: time.Since(t0)}, nil
}

func eachPage(ctx context.Context, pager pagination.Pager, do func(pagination.Page) error) error {
	return pager.EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) { return true, do(p) })
}

// osInProcess is tether's observe + all checks in this process, connected
// as the CLI connects. It fails when the findings by check differ from
// want: a benchmark of wrong answers measures nothing.
func osInProcess(ctx context.Context, clouds string, want map[string]int) (result, error) {
	t0 := time.Now()
	c, err := connectBench(ctx, clouds)
	if err != nil {
		return result{}, err
	}
	s, err := observe.Observe(ctx, c, observe.Options{})
	if err != nil {
		return result{}, err
	}
	fs := check.Run(s, check.Policy{}, time.Now())
	wall := time.Since(t0)
	got := map[string]int{}
	for _, f := range fs {
		got[f.Check]++
	}
	for name, n := range want {
		if got[name] != n {
			return result{}, fmt.Errorf("tether found %v, the seeding made %v", got, want)
		}
	}
	if len(fs) != sum(want) {
		return result{}, fmt.Errorf("tether found %v, the seeding made %v", got, want)
	}
	return result{wall: wall, findings: len(fs)}, nil
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// counting is a reverse proxy in front of each service that counts the
// requests it passes by service, method and path (IDs replaced by {id}).
type counting struct {
	mu      sync.Mutex
	counts  requestCounts
	servers []*http.Server
	// urls are the proxies' endpoints by service, with the upstream's path.
	urls map[string]string
}

// requestCounts are requests by "service METHOD path".
type requestCounts map[string]int

func (c requestCounts) total() int { return sum(c) }

func (c requestCounts) service(name string) int {
	n := 0
	for k, v := range c {
		if strings.HasPrefix(k, name+" ") {
			n += v
		}
	}
	return n
}

func (c requestCounts) String() string {
	return joinCounts(c, ", ", func(k string) string { return k })
}

// idSegment matches the IDs in a path: UUIDs, with or without dashes.
var idSegment = regexp.MustCompile(`[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}`)

func startCounting(upstreams map[string]string) (*counting, error) {
	c := &counting{counts: requestCounts{}, urls: map[string]string{}}
	for name, raw := range upstreams {
		u, err := url.Parse(raw)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("%s endpoint %q: %v", name, raw, err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.close()
			return nil, err
		}
		rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
		srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			key := name + " " + r.Method + " " + idSegment.ReplaceAllString(r.URL.Path, "{id}")
			c.mu.Lock()
			c.counts[key]++
			c.mu.Unlock()
			rp.ServeHTTP(rw, r)
		}), ReadHeaderTimeout: time.Minute}
		go func() { _ = srv.Serve(l) }()
		c.servers = append(c.servers, srv)
		c.urls[name] = fmt.Sprintf("http://%s%s", l.Addr(), u.Path)
	}
	return c, nil
}

// reset returns the counts so far and starts again.
func (c *counting) reset() requestCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = requestCounts{}
	return out
}

func (c *counting) close() {
	for _, s := range c.servers {
		_ = s.Close()
	}
}

// writeCloudsYAML writes a clouds.yaml whose cloud osCloud authenticates
// at the identity proxy, as the world's own clouds.yaml does at Keystone's
// stub, and reaches Nova and Cinder at their proxies (endpoint overrides:
// the stub's catalog names the services themselves).
func (c *counting) writeCloudsYAML(path, project string) error {
	yaml := fmt.Sprintf(`clouds:
  %s:
    auth_type: password
    auth:
      auth_url: %s
      username: admin
      password: admin
      project_id: %s
      user_domain_name: Default
    region_name: RegionOne
    interface: public
    identity_api_version: 3
    compute_endpoint_override: %s
    block_storage_endpoint_override: %s
`, osCloud, c.urls["identity"], project, c.urls["compute"], c.urls["block-storage"])
	return os.WriteFile(path, []byte(yaml), 0o600)
}
