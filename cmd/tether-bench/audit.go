package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/testing/controlplane"
	"github.com/tether-dev/tether/internal/testing/distance"
	"github.com/tether-dev/tether/internal/testing/localenv"
)

// auditOptions are the audit mode's flags.
type auditOptions struct {
	sizes    string
	hotplugs int
	runs     int
	// loopMax skips the list-and-get loop above this many VMIs (it takes
	// minutes there); its ratio is then not printed.
	loopMax int
	// tether is the binary to run; empty builds ./cmd/tether.
	tether string
	// base, when set, is another tether binary (e.g. an older build) whose
	// jobs run beside tether's, in the same runs.
	base string
	// hold keeps the world up after the last size until interrupted, with
	// its kubeconfig printed, for profiling by hand.
	hold bool
	// rtts, when set, are the round trips at which every contestant talks
	// to the API server, through a proxy of package distance (0: through
	// the proxy without delay); empty talks to it directly.
	rtts []time.Duration
	// levers measures, instead of the usual jobs, each lever of issue 49
	// on and off (raw reads of all checks' kinds) beside tether's all
	// checks and the base's; cbor adds CBOR for custom resources, which
	// needs the API server's CBOR feature gates (apiServerArgs).
	levers, cbor bool
	// storage seeds, besides the VMIs, this many volumes of the storage
	// world (a claim, a PV, a VolumeAttachment and a pod each): built-in
	// kinds for the levers that concern them.
	storage int
	// apiServerArgs are added to the API server's flags.
	apiServerArgs []string
	// dump writes the world, once seeded, as kubectl dumps it (a file a
	// kind) and measures `tether audit --from` it beside the live jobs.
	dump bool
}

// distanceSet is one distance of the audit: its contestants talk to the
// server through a proxy of package distance that adds rtt, a new one for
// each job, or directly.
type distanceSet struct {
	rtt    time.Duration
	direct bool
	// cfg talks to the server directly; dir holds the kubeconfigs.
	cfg *rest.Config
	dir string
	cs  []contestant
	// proxies are the proxies opened so far, closed by close.
	proxies []*distance.Proxy
}

// label is the set's RTT column.
func (d *distanceSet) label() string {
	if d.direct {
		return "direct"
	}
	return d.rtt.String()
}

// endpoint is where one job talks to the server.
type endpoint struct {
	cfg        *rest.Config
	kubeconfig string
	// proxy, at a distance, counts the job's bytes on the wire.
	proxy *distance.Proxy
}

// open returns the endpoint of one job. At a distance it is a new proxy
// (a new port), so that the job opens its own connection and pays its
// handshakes, as a new process does, however the client pools its
// connections; the proxy stays up until close (a pooled connection to a
// closed proxy would be reused if its port came back).
func (d *distanceSet) open() (endpoint, error) {
	if d.direct {
		return endpoint{d.cfg, filepath.Join(d.dir, "kubeconfig"), nil}, nil
	}
	u, err := url.Parse(d.cfg.Host)
	if err != nil {
		return endpoint{}, err
	}
	p, err := distance.Start(u.Host, d.rtt)
	if err != nil {
		return endpoint{}, err
	}
	d.proxies = append(d.proxies, p)
	cfg := rest.CopyConfig(d.cfg)
	cfg.Host = "https://" + p.Addr()
	kc := filepath.Join(d.dir, "kubeconfig-"+strings.ReplaceAll(p.Addr(), ":", "-"))
	return endpoint{cfg, kc, p}, controlplane.WriteKubeconfig(kc, cfg)
}

// close closes the proxies opened so far.
func (d *distanceSet) close() {
	for _, p := range d.proxies {
		p.Close()
	}
	d.proxies = nil
}

// contestant is one way of doing the audit's job against the same server.
type contestant struct {
	name string
	// run does the job once; it returns the requests it sent (0: not
	// counted), the bytes it printed and, for a process, its peak RSS.
	run func(ctx context.Context, at endpoint) (result, error)
}

type result struct {
	wall     time.Duration
	requests int
	output   int64
	rssKiB   int64
	findings int
	// apiCPU and etcdCPU are what the API server and etcd spent on the
	// job; clientCPU what a tether process spent (user and system).
	apiCPU, etcdCPU, clientCPU time.Duration
	// wire is the bytes that crossed the proxy both ways (0: direct).
	wire int64
	// apiGCs is the API server's garbage collections during the job.
	apiGCs int
}

// runAudit seeds N VMIs per size and measures, side by side on one server,
// the list-and-get loop (the reference: LIST the VMIs, GET each one's VM,
// no client rate limit), the API server's own share (the LIST pages tether
// reads, fetched and thrown away), tether's observe + check in process,
// and the tether binary end to end with three jobs. Each contestant runs
// o.runs times, interleaved; the median is printed with its speed-up over
// the loop.
func runAudit(o auditOptions) error {
	// An interrupt ends a held world (-hold) and stops the control plane:
	// nothing else would, and it would run on after the benchmark.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin := o.tether
	tmp, err := os.MkdirTemp("", "tether-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		if bin, err = buildTether(tmp); err != nil {
			return err
		}
	}
	env, err := localenv.Start(ctx, localenv.Options{APIServerArgs: o.apiServerArgs})
	if err != nil {
		return err
	}
	defer env.Stop()
	y, err := newYardstick(env.Config(), env.Infra.PID("kube-apiserver"), env.Infra.PID("etcd"))
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, env.Config()); err != nil {
		return err
	}
	c, err := clients.New(env.Config())
	if err != nil {
		return err
	}
	sets := distances(env.Config(), tmp, o.rtts)
	err = growing(o.sizes, "-vmis", func(from, to int) error {
		t0 := time.Now()
		if err := seed(ctx, c, from, to, o.hotplugs, true, false); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "seeded %d VMIs in %s\n", to, time.Since(t0).Round(time.Millisecond))
		if from == 0 && o.storage > 0 {
			t0 = time.Now()
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: storageNS}}); err != nil {
				return err
			}
			if err := seedStorage(ctx, c, 0, o.storage); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "seeded %d volumes in %s\n", o.storage, time.Since(t0).Round(time.Millisecond))
		}
		var dumped string
		if o.dump {
			dumped = filepath.Join(tmp, fmt.Sprintf("dump-%d", to))
			t0 = time.Now()
			n, err := dumpWorld(ctx, env.Config(), dumped)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "dumped %d VMIs as kubectl does into %s: %.1f MB in %s\n", to, dumped, float64(n)/1e6, time.Since(t0).Round(time.Millisecond))
		}
		if err := y.settle(ctx); err != nil {
			return err
		}
		for i := range sets {
			sets[i].cs = contestants(o, to, bin)
			if o.levers {
				sets[i].cs = leverContestants(o, to, bin)
			}
			if dumped != "" {
				sets[i].cs = append(sets[i].cs, offline(bin, dumped)...)
			}
		}
		return measureAll(ctx, y, to, sets, o.runs)
	})
	if err != nil || !o.hold {
		return err
	}
	fmt.Fprintf(os.Stderr, "holding the world: KUBECONFIG=%s (interrupt to stop)\n", kubeconfig)
	<-ctx.Done()
	return nil
}

// buildTether builds cmd/tether into dir and returns the binary's path.
func buildTether(dir string) (string, error) {
	bin := filepath.Join(dir, "tether")
	build := exec.Command("go", "build", "-o", bin, "github.com/tether-dev/tether/cmd/tether")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building tether: %w", err)
	}
	return bin, nil
}

// distances returns one set per round trip of rtts, or one direct set.
func distances(cfg *rest.Config, dir string, rtts []time.Duration) []distanceSet {
	if len(rtts) == 0 {
		return []distanceSet{{direct: true, cfg: cfg, dir: dir}}
	}
	out := make([]distanceSet, 0, len(rtts))
	for _, rtt := range rtts {
		out = append(out, distanceSet{rtt: rtt, cfg: cfg, dir: dir})
	}
	return out
}

// contestants are the jobs measured at n VMIs.
func contestants(o auditOptions, n int, bin string) []contestant {
	var cs []contestant
	if o.loopMax <= 0 || n <= o.loopMax {
		cs = append(cs, contestant{"list-and-get loop", func(ctx context.Context, at endpoint) (result, error) { return listAndGet(ctx, at.cfg) }})
	}
	cs = append(cs,
		contestant{serverShare, func(ctx context.Context, at endpoint) (result, error) {
			return rawPages(ctx, at.cfg, hotplugReads, observe.DefaultPageSize)
		}},
		contestant{"raw, one LIST a kind", func(ctx context.Context, at endpoint) (result, error) {
			return rawPages(ctx, at.cfg, hotplugReads, 0)
		}},
		contestant{"observe+check in process", func(ctx context.Context, at endpoint) (result, error) { return inProcess(ctx, at.cfg) }},
		binary(bin, "tether one check -o json", "--checks", check.OrphanHotplugVolume, "-o", "json"),
		binary(bin, "same, --chunk-size 0", "--checks", check.OrphanHotplugVolume, "-o", "json", "--chunk-size", "0"),
		binary(bin, "same, GOMEMLIMIT=900MiB", "--checks", check.OrphanHotplugVolume, "-o", "json", "GOMEMLIMIT=900MiB"),
		binary(bin, "tether all checks -o json", "-o", "json"),
		binary(bin, "tether all checks -o table", "-o", "table"),
	)
	if o.base != "" {
		cs = append(cs,
			binary(o.base, "base one check -o json", "--checks", check.OrphanHotplugVolume, "-o", "json"),
			binary(o.base, "base all checks -o json", "-o", "json"),
			binary(o.base, "base all checks -o table", "-o", "table"),
		)
	}
	return cs
}

// runOrder is the order in which run r visits n contestants: the first
// run in the order listed, every later one shuffled (seeded by r, so that a
// run can be repeated). What one job leaves behind on the API server (a
// heap grown by an unpaged LIST, a warm cache) then falls on different
// contestants from run to run, not always on the one listed after it.
func runOrder(n, r int) []int {
	if r == 0 {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	return rand.New(rand.NewPCG(uint64(r), 0x7e7e)).Perm(n)
}

// serverShare names the contestant the others are compared with besides
// the loop: the API server's own share of tether's reads.
const serverShare = "raw pages (server share)"

// measureAll runs every contestant of every set runs times, interleaved
// (each run visits every distance in turn, and its contestants in the
// order runOrder gives), and prints the median of each figure with the
// speed-up over the loop (the first contestant, when it ran), the loop's
// API server CPU over the contestant's, and the wall time's ratio to the
// server's share at the same distance. The yardstick y reads what the
// control plane spent on each job. Between two jobs the proxy drops its
// connections: every job opens its own and pays its handshakes, as a new
// process does.
func measureAll(ctx context.Context, y *yardstick, vmis int, sets []distanceSet, runs int) error {
	all := make([][][]result, len(sets))
	defer func() {
		for i := range sets {
			sets[i].close()
		}
	}()
	for r := 0; r < max(runs, 1); r++ {
		for s := range sets {
			d := &sets[s]
			if all[s] == nil {
				all[s] = make([][]result, len(d.cs))
			}
			for _, i := range runOrder(len(d.cs), r) {
				c := d.cs[i]
				at, err := d.open()
				if err != nil {
					return err
				}
				res, err := measureOne(ctx, y, c, at)
				if err != nil {
					return fmt.Errorf("%s at %s: %w", c.name, d.label(), err)
				}
				fmt.Fprintf(os.Stderr, "run %d/%d %s %s: %s, API server CPU %s in %d collections\n", r+1, max(runs, 1), d.label(), c.name, res.wall.Round(time.Millisecond), res.apiCPU, res.apiGCs)
				all[s][i] = append(all[s][i], res)
			}
		}
	}
	fmt.Printf("%-8s %-7s %-30s %9s %8s %7s %8s %8s %8s %10s %9s %9s %8s %8s %7s %s\n", "VMIS", "RTT", "CONTESTANT", "WALL", "API-CPU", "API-GCS", "ETCD-CPU", "CLI-CPU", "REQUESTS", "WIRE", "PEAK RSS", "OUTPUT", "FINDINGS", "VS LOOP", "CPU/LOOP", "VS SHARE")
	for s, d := range sets {
		var loop, share result
		for i, c := range d.cs {
			if i == 0 && strings.HasPrefix(c.name, "list-and-get") {
				loop = medians(all[s][i])
			}
			if c.name == serverShare || c.name == newShare {
				share = medians(all[s][i])
			}
		}
		for i, c := range d.cs {
			m := medians(all[s][i])
			fmt.Printf("%-8d %-7s %-30s %9s %8s %7d %8s %8s %8d %10s %9s %9s %8d %8s %7s %s\n", vmis, d.label(), c.name, m.wall.Round(time.Millisecond),
				seconds(m.apiCPU), m.apiGCs, seconds(m.etcdCPU), orDash(int64(m.clientCPU), seconds(m.clientCPU)), m.requests,
				orDash(m.wire, fmt.Sprintf("%.1f MB", float64(m.wire)/1e6)), orDash(m.rssKiB, fmt.Sprintf("%d MiB", m.rssKiB/1024)),
				orDash(m.output, fmt.Sprintf("%.1f MB", float64(m.output)/1e6)), m.findings,
				ratio(loop.wall, m.wall, "%.1fx"), ratio(loop.apiCPU, m.apiCPU, "%.1fx"), ratio(m.wall, share.wall, "%.2f"))
		}
	}
	return nil
}

// measureOne runs c once at at and adds what the control plane spent on
// it (the yardstick's reading; the requests the server counted replace the
// job's own count, which a process cannot give) and the bytes on the wire.
func measureOne(ctx context.Context, y *yardstick, c contestant, at endpoint) (result, error) {
	b, err := y.before(ctx)
	if err != nil {
		return result{}, err
	}
	res, err := c.run(ctx, at)
	if err != nil {
		return result{}, err
	}
	a, err := y.after(ctx)
	if err != nil {
		return result{}, err
	}
	sp := spent(b, a)
	res.apiCPU, res.etcdCPU, res.requests, res.apiGCs = sp.apiCPU, sp.etcdCPU, sp.requests, sp.gcs
	if at.proxy != nil {
		up, down := at.proxy.Bytes()
		res.wire = up + down
	}
	return res, nil
}

// medians is the median of each figure of rs, each taken on its own.
func medians(rs []result) result {
	if len(rs) == 0 {
		return result{}
	}
	dur := func(f func(result) time.Duration) time.Duration { return medianOf(rs, f) }
	num := func(f func(result) int64) int64 { return medianOf(rs, f) }
	return result{
		wall: dur(func(r result) time.Duration { return r.wall }), apiCPU: dur(func(r result) time.Duration { return r.apiCPU }),
		etcdCPU: dur(func(r result) time.Duration { return r.etcdCPU }), clientCPU: dur(func(r result) time.Duration { return r.clientCPU }),
		requests: int(num(func(r result) int64 { return int64(r.requests) })), output: num(func(r result) int64 { return r.output }),
		rssKiB: num(func(r result) int64 { return r.rssKiB }), findings: int(num(func(r result) int64 { return int64(r.findings) })),
		wire: num(func(r result) int64 { return r.wire }), apiGCs: int(num(func(r result) int64 { return int64(r.apiGCs) })),
	}
}

func medianOf[T int64 | time.Duration](rs []result, f func(result) T) T {
	v := make([]T, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// ratio formats a/b, or "-" when either is unknown.
func ratio[T int64 | time.Duration](a, b T, format string) string {
	if a <= 0 || b <= 0 {
		return "-"
	}
	return fmt.Sprintf(format, float64(a)/float64(b))
}

// median is the run with the median wall time.
func median(rs []result) result {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b result) int { return int(a.wall - b.wall) })
	return s[len(s)/2]
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func orDash(n int64, s string) string {
	if n == 0 {
		return "-"
	}
	return s
}

// unlimited returns cfg counted by ctr, without client-side rate limit.
func unlimited(cfg *rest.Config, ctr *clients.Counter) *rest.Config {
	out := ctr.Wrap(cfg)
	out.QPS, out.Burst, out.RateLimiter = -1, 0, nil
	return out
}

// listAndGet is the reference: one LIST of every VMI, then one GET of each
// VMI's VM, comparing the VMI's hot-plugged volumes with the VM spec. It
// finds the same orphans as OrphanHotplugVolume's simplest rule.
func listAndGet(ctx context.Context, cfg *rest.Config) (result, error) {
	var ctr clients.Counter
	c, err := clients.New(unlimited(cfg, &ctr))
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	var vmis kubevirtv1.VirtualMachineInstanceList
	if err := c.List(ctx, &vmis); err != nil {
		return result{}, err
	}
	orphans := 0
	for i := range vmis.Items {
		vmi := &vmis.Items[i]
		var vm kubevirtv1.VirtualMachine
		if err := c.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: vmi.Name}, &vm); err != nil {
			return result{}, err
		}
		want := map[string]bool{}
		if vm.Spec.Template != nil {
			for _, v := range vm.Spec.Template.Spec.Volumes {
				want[v.Name] = true
			}
		}
		for _, vs := range vmi.Status.VolumeStatus {
			if vs.HotplugVolume != nil && !want[vs.Name] {
				orphans++
			}
		}
	}
	return result{wall: time.Since(t0), requests: ctr.Total(), findings: orphans}, nil
}

// hotplugReads are the LISTs tether sends for --checks OrphanHotplugVolume.
var hotplugReads = []string{
	"/apis/kubevirt.io/v1/virtualmachineinstances",
	"/apis/kubevirt.io/v1/virtualmachines",
	"/api/v1/pods?labelSelector=kubevirt.io%3Dhotplug-disk",
	"/apis/cdi.kubevirt.io/v1beta1/datavolumes",
	"/apis/kubevirt.io/v1/kubevirts",
}

// rawPages fetches every page of each path in turn (limit 0: in one LIST)
// in JSON, as Go's transport asks (compressed), and throws the bytes away:
// what the API server alone takes to serve tether's LISTs, one kind after
// the other.
func rawPages(ctx context.Context, cfg *rest.Config, paths []string, limit int) (result, error) {
	return rawRead(ctx, cfg, paths, wire{gzip: true, builtin: mediaJSON, custom: mediaJSON, limit: limit})
}

// continueToken finds metadata.continue in a list body without decoding
// the items: the bench's objects never hold that key themselves.
func continueToken(body []byte) string {
	const key = `"continue":"`
	i := bytes.LastIndex(body, []byte(key))
	if i < 0 {
		return ""
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// inProcess is tether's observe + check in this process, all checks, read
// as the CLI reads (page reader, lean objects).
func inProcess(ctx context.Context, cfg *rest.Config) (result, error) {
	var ctr clients.Counter
	c, err := clients.New(ctr.Wrap(cfg))
	if err != nil {
		return result{}, err
	}
	pages, err := observe.NewPageReader(ctr.Wrap(cfg))
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	snap, err := observe.Observe(ctx, c, observe.Options{Pages: pages, Lean: true})
	if err != nil {
		return result{}, err
	}
	fs := check.Run(snap, check.DefaultPolicy(), time.Now())
	return result{wall: time.Since(t0), requests: ctr.Total(), findings: len(fs)}, nil
}

// binary runs the tether binary with args on kubeconfig through a small
// measuring child (see measureChild), which reports its peak RSS.
func binary(bin, name string, args ...string) contestant {
	return contestant{name, func(ctx context.Context, at endpoint) (result, error) {
		return measureProcess(ctx, append([]string{bin, "audit", "-A", "--kubeconfig", at.kubeconfig}, args...))
	}}
}

// measureProcess runs argv (an argument NAME=VALUE after the first is the
// binary's environment, not a flag) through a measuring child and returns
// its wall time, output, findings and peak RSS. Exit codes 0 and 1 (no
// findings, findings) are success.
func measureProcess(ctx context.Context, args []string) (result, error) {
	self, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	env := append(os.Environ(), measureEnv+"=1")
	argv := args[:1:1]
	for _, a := range args[1:] {
		if strings.Contains(a, "=") && !strings.HasPrefix(a, "-") {
			env = append(env, a)
		} else {
			argv = append(argv, a)
		}
	}
	cmd := exec.CommandContext(ctx, self, argv...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%v: %s", err, errb.String())
	}
	var m measured
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		return result{}, fmt.Errorf("measuring child said %q: %v", out.String(), err)
	}
	if m.Exit != 0 && m.Exit != 1 {
		return result{}, fmt.Errorf("%s exited %d: %s", filepath.Base(argv[0]), m.Exit, m.Stderr)
	}
	return result{wall: m.Wall, output: m.Output, rssKiB: m.MaxRSSKiB, findings: m.Findings, clientCPU: m.CPU}, nil
}

// measureEnv makes tether-bench a measuring child.
const measureEnv = "TETHER_BENCH_MEASURE"

// measured is what a measuring child reports on stdout.
type measured struct {
	Wall      time.Duration `json:"wall"`
	MaxRSSKiB int64         `json:"maxRSSKiB"`
	Output    int64         `json:"output"`
	Findings  int           `json:"findings"`
	Exit      int           `json:"exit"`
	// CPU is the user and system time the process spent.
	CPU    time.Duration `json:"cpu"`
	Stderr string        `json:"stderr,omitempty"`
}

// measureChild runs argv, counts the bytes and findings it prints and
// reports its wall time and peak RSS. It is a process of its own because
// Linux charges a child, at exec, with the peak RSS of the process that
// started it: measured from the benchmark (gigabytes of caches), tether's
// figure would be the benchmark's. This process is small, so the peak
// is tether's own.
func measureChild(argv []string) {
	cmd := exec.Command(argv[0], argv[1:]...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cw := &countWriter{}
	_, _ = io.Copy(cw, stdout)
	err = cmd.Wait()
	m := measured{Wall: time.Since(t0), Output: cw.n, Findings: cw.findings, Stderr: errb.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		m.Exit = ee.ExitCode()
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.MaxRSSKiB = ru.Maxrss
	}
	m.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	_ = json.NewEncoder(os.Stdout).Encode(m)
	os.Exit(0)
}

// countWriter counts bytes, and findings by their "check" key (JSON) or
// their evidence header (table).
type countWriter struct {
	n        int64
	findings int
	tail     []byte
}

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	// The tail of the last write is counted again with p, so that a marker
	// split between two writes is found; what it held alone was counted.
	buf := append(w.tail, p...)
	w.findings += markers(buf) - markers(w.tail)
	w.tail = append([]byte(nil), buf[len(buf)-min(len(buf), 16):]...)
	return len(p), nil
}

func markers(b []byte) int {
	return bytes.Count(b, []byte(`"check": "`)) + bytes.Count(b, []byte("\n["))
}
