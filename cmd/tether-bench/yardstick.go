package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// yardstick reads what the control plane spent on one job: the CPU time of
// the API server's and etcd's processes (from /proc: the bench started
// them), and the requests the API server counted (apiserver_request_total
// from its /metrics), so that a tether binary's requests are counted the
// same way as the benchmark's own. What a job costs the control plane is
// the difference of a sample after it and one before it.
type yardstick struct {
	apiPID, etcdPID int
	// hc reads the API server's /metrics at host.
	hc   *http.Client
	host string
}

// sample is the yardstick's reading at one moment.
type sample struct {
	apiCPU, etcdCPU time.Duration
	requests        int
	// gcs is the API server's garbage collections so far (its Go
	// runtime's go_gc_duration_seconds count): most of what it spends on a
	// list is collecting, and whether one more collection falls inside a
	// job moves its CPU by about a second at 10,000 VMIs.
	gcs int
}

// newYardstick reads the processes apiPID and etcdPID and the API server
// at cfg.
func newYardstick(cfg *rest.Config, apiPID, etcdPID int) (*yardstick, error) {
	if apiPID == 0 || etcdPID == 0 {
		return nil, fmt.Errorf("the yardstick needs the API server's and etcd's processes (pids %d and %d)", apiPID, etcdPID)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &yardstick{apiPID: apiPID, etcdPID: etcdPID, hc: hc, host: strings.TrimSuffix(cfg.Host, "/")}, nil
}

// before samples before a job: the requests first, so that reading them
// is not charged to the job's CPU.
func (y *yardstick) before(ctx context.Context) (sample, error) {
	n, gcs, err := y.counts(ctx)
	if err != nil {
		return sample{}, err
	}
	s, err := y.cpu()
	s.requests, s.gcs = n, gcs
	return s, err
}

// after samples after a job: the CPU first, then the requests.
func (y *yardstick) after(ctx context.Context) (sample, error) {
	s, err := y.cpu()
	if err != nil {
		return s, err
	}
	s.requests, s.gcs, err = y.counts(ctx)
	return s, err
}

// settle waits until the API server is quiet (a few requests in two
// seconds, as in a world nobody writes), for at most a minute: after a
// seed the emulator and the server's own loops may still be busy, and
// what they spend would be charged to the first jobs measured.
func (y *yardstick) settle(ctx context.Context) error {
	const quiet, every = 10, 2 * time.Second
	last, err := y.requests(ctx)
	if err != nil {
		return err
	}
	for end := time.Now().Add(time.Minute); time.Now().Before(end); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
		n, err := y.requests(ctx)
		if err != nil {
			return err
		}
		if n-last <= quiet {
			return nil
		}
		last = n
	}
	return nil
}

// spent is what the control plane spent between b and a. The request that
// read b's count is counted in a's; it is not the job's.
func spent(b, a sample) sample {
	return sample{apiCPU: a.apiCPU - b.apiCPU, etcdCPU: a.etcdCPU - b.etcdCPU, requests: max(a.requests-b.requests-1, 0), gcs: a.gcs - b.gcs}
}

func (y *yardstick) cpu() (sample, error) {
	api, err := processCPU(y.apiPID)
	if err != nil {
		return sample{}, err
	}
	etcd, err := processCPU(y.etcdPID)
	return sample{apiCPU: api, etcdCPU: etcd}, err
}

func (y *yardstick) requests(ctx context.Context) (int, error) {
	n, _, err := y.counts(ctx)
	return n, err
}

// counts reads the API server's requests and garbage collections so far.
func (y *yardstick) counts(ctx context.Context) (requests, gcs int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, y.host+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := y.hc.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("reading the API server's metrics: %s %v", resp.Status, err)
	}
	return serverCounts(body)
}

// serverCounts sums apiserver_request_total of a /metrics body: every
// request the API server answered, but those for Leases, which its own
// loops and the control plane's renew on their own clock; and says how
// many garbage collections its Go runtime has completed
// (go_gc_duration_seconds's count; -1 when it does not say).
func serverCounts(body []byte) (requests, gcs int, err error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return 0, 0, fmt.Errorf("the API server's metrics do not parse: %w", err)
	}
	gcs = -1
	if g := mfs["go_gc_duration_seconds"]; g != nil && len(g.GetMetric()) == 1 && g.GetMetric()[0].GetSummary() != nil {
		gcs = int(g.GetMetric()[0].GetSummary().GetSampleCount())
	}
	mf := mfs["apiserver_request_total"]
	if mf == nil {
		return 0, 0, fmt.Errorf("the API server's metrics have no apiserver_request_total")
	}
	total := 0.0
	for _, m := range mf.GetMetric() {
		if label(m, "resource") == "leases" {
			continue
		}
		total += m.GetCounter().GetValue()
	}
	return int(total), gcs, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux the bench runs on (the kernel's ABI fixes it for user space).
const clockTicks = 100

// processCPU is the CPU time (user and system, all threads) process pid
// has spent so far, from /proc/PID/stat.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return statCPU(string(b))
}

// statCPU reads utime and stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name (field 2) is in parentheses and may hold spaces
// and parentheses itself: the fields are counted after its last ')'.
func statCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("not a /proc/PID/stat line: %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (the state): utime and stime are f[11] and f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("a /proc/PID/stat line of %d fields", len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("a /proc/PID/stat time %q: %v", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
