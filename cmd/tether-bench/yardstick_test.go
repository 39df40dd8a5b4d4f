package main

import (
	"os"
	"testing"
	"time"
)

// The CPU times of a /proc/PID/stat line are fields 14 and 15, counted
// after the command name, which may hold spaces and parentheses.
func TestStatCPU(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       time.Duration
		wantErr    bool
	}{
		{"plain name -> utime + stime", "4242 (kube-apiserver) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 100 0 0", 3250 * time.Millisecond, false},
		{"name with spaces and parens -> counted after the last paren", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0", 70 * time.Millisecond, false},
		{"too few fields -> error", "7 (x) R 1 2 3", 0, true},
		{"no name -> error", "garbage", 0, true},
		{"a time that is no number -> error", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 x 4 0", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := statCPU(c.line)
			if (err != nil) != c.wantErr || got != c.want {
				t.Errorf("statCPU = %v, %v; want %v, error %v", got, err, c.want, c.wantErr)
			}
		})
	}
	// This process has spent some CPU: the reading works on a real file.
	if d, err := processCPU(os.Getpid()); err != nil || d < 0 {
		t.Errorf("processCPU(self) = %v, %v", d, err)
	}
}

// The API server's requests are the sum of apiserver_request_total but
// those for Leases, which the control plane renews on its own clock.
func TestServerRequests(t *testing.T) {
	body := `# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="virtualmachineinstances",verb="LIST"} 21
apiserver_request_total{code="200",resource="virtualmachines",verb="GET"} 10000
apiserver_request_total{code="200",resource="leases",verb="PUT"} 77
apiserver_request_total{code="200",resource="",verb="GET"} 3
# TYPE other_total counter
other_total 5
`
	got, gcs, err := serverCounts([]byte(body))
	if err != nil || got != 10024 || gcs != -1 {
		t.Errorf("serverCounts = %d, %d, %v; want 10024 requests and -1 (no collections said)", got, gcs, err)
	}
	withGC := body + `# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 3.1e-05
go_gc_duration_seconds{quantile="1"} 0.0012
go_gc_duration_seconds_sum 0.25
go_gc_duration_seconds_count 412
`
	if got, gcs, err := serverCounts([]byte(withGC)); err != nil || got != 10024 || gcs != 412 {
		t.Errorf("serverCounts = %d, %d, %v; want 10024 requests and 412 collections", got, gcs, err)
	}
	if _, _, err := serverCounts([]byte("# TYPE other_total counter\nother_total 5\n")); err == nil {
		t.Error("metrics without apiserver_request_total: want an error")
	}
	// One job: the request that read the first count is not the job's.
	if s := spent(sample{apiCPU: time.Second, requests: 10, gcs: 7}, sample{apiCPU: 3 * time.Second, requests: 15, gcs: 9}); s.apiCPU != 2*time.Second || s.requests != 4 || s.gcs != 2 {
		t.Errorf("spent = %+v, want 2s, 4 requests and 2 collections", s)
	}
}
