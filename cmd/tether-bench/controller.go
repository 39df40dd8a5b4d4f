package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/config/crd"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/localenv"
)

// runController measures `tether controller` over N seeded VMIs: the heap its
// caches take per VMI, the API requests per minute once it has settled
// (watches aside), and how late it acts after a grace period ends. also
// names checks run besides OrphanHotplugVolume (comma-separated); with
// claims, every hot-plugged volume has its claim. A non-empty profile is
// the file of a heap profile per size (profile.N), written where the heap
// is measured.
func runController(sizes string, hotplugs int, window time.Duration, also string, claims bool, profile string) error {
	var checks []string
	if also != "" {
		checks = strings.Split(also, ",")
	}
	ctx := context.Background()
	env, c, err := controllerEnv(ctx)
	if err != nil {
		return err
	}
	defer env.Stop()
	if err := env.Emulator.SetFeatureGates(ctx, "HotplugVolumes"); err != nil {
		return err
	}
	fmt.Printf("%-6s %-14s %-16s %-22s %-24s %s\n", "VMIS", "HEAP/VMI", "FIRST PASS", "REQUESTS/MIN (steady)", "GRACE->ACTION avg (max)", "STEADY-STATE REQUESTS")
	err = growing(sizes, "-vmis", func(from, to int) error {
		if err := seed(ctx, c, from, to, hotplugs, false, claims); err != nil {
			return err
		}
		return measure(ctx, env, c, to, window, checks, profile)
	})
	fmt.Printf("typed floor: the empty Go structs of one VMI and its VM with %d volumes take %d B (see typedFloor); the controller's caches hold them compact (snapshot.CompactVMI, CompactVM)\n", hotplugs, typedFloor(hotplugs))
	return err
}

// typedFloor is what the typed objects of one cached VMI and its VM with
// volumes volumes take before any field holds a value: the VMI, the VM
// and its template, and one spec volume of each plus one volume status per
// volume. No transform that keeps the typed objects can make a cached
// object smaller; the controller's caches hold VMs and VMIs compact
// instead (snapshot.Compact).
func typedFloor(volumes int) uintptr {
	vmi := unsafe.Sizeof(kubevirtv1.VirtualMachineInstance{}) + uintptr(volumes)*(unsafe.Sizeof(kubevirtv1.Volume{})+unsafe.Sizeof(kubevirtv1.VolumeStatus{}))
	vm := unsafe.Sizeof(kubevirtv1.VirtualMachine{}) + unsafe.Sizeof(kubevirtv1.VirtualMachineInstanceTemplateSpec{}) + uintptr(volumes)*unsafe.Sizeof(kubevirtv1.Volume{})
	return vmi + vm
}

// controllerEnv starts a local environment with the Finding CRD installed,
// and a client of it.
func controllerEnv(ctx context.Context) (*localenv.Env, client.Client, error) {
	env, err := localenv.Start(ctx, localenv.Options{})
	if err != nil {
		return nil, nil, err
	}
	c, err := clients.New(env.Config())
	if err == nil {
		err = crd.Install(ctx, env.Config())
	}
	if err != nil {
		env.Stop()
		return nil, nil, err
	}
	return env, c, nil
}

// growing calls step for each count of sizes, a comma-separated growing
// list, with the previous count (0 at first).
func growing(sizes, flag string, step func(from, to int) error) error {
	seeded := 0
	for _, s := range strings.Split(sizes, ",") {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n <= seeded {
			return fmt.Errorf("%s: %q must be a growing list of counts", flag, s)
		}
		if err := step(seeded, n); err != nil {
			return err
		}
		seeded = n
	}
	return nil
}

// writeHeapProfile writes the heap profile (in use since the last GC) to
// path: `go tool pprof -sample_index=inuse_space` reads it.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func measure(ctx context.Context, env *localenv.Env, c client.Client, n int, window time.Duration, also []string, profile string) error {
	cfg := config.Default()
	cfg.Checks = map[string]config.CheckConfig{check.OrphanHotplugVolume: {Enabled: true, GracePeriod: metav1.Duration{Duration: 2 * time.Second}}}
	for _, name := range also {
		cfg.Checks[name] = config.CheckConfig{Enabled: true}
	}
	cfg.Scope.Namespaces = []string{"bench", liveNamespace}
	cfg.AllowVMIOnlyDetach = true
	// Every size acts three times on one server, and the blast-radius
	// window is durable (the records' attempts): with the default limit of
	// 5 actions per 10 minutes, the second size's third action would be
	// refused (Blocked BlastRadiusExceeded) and never time anything.
	cfg.BlastRadius.MaxActions = 1000
	nsSum, nsPasses := reconcileTime("namespace")
	var atStart string
	if profile != "" {
		atStart = fmt.Sprintf("%s.%d.before", profile, n)
	}
	// The yardstick from before the start until the first pass is done:
	// what the controller's start-up costs the control plane.
	y, err := newYardstick(env.Config(), env.Infra.PID("kube-apiserver"), env.Infra.PID("etcd"))
	if err != nil {
		return err
	}
	if err := y.settle(ctx); err != nil {
		return err
	}
	y0, err := y.before(ctx)
	if err != nil {
		return err
	}
	run, err := startController(ctx, env, &cfg, atStart)
	if err != nil {
		return err
	}
	cctx, before, t0 := run.ctx, run.heapBefore, run.synced
	base := reconciles()
	if err := waitFor(cctx, 10*time.Minute, func() bool { return reconciles()-base >= float64(n) && queueEmpty("hotplug") }); err != nil { // the first reconcile of every VMI
		return fmt.Errorf("initial reconciles: %w", err)
	}
	if slices.ContainsFunc(also, func(c string) bool { return slices.Contains(check.InLoop(check.LoopNamespace), c) }) {
		if err := waitFor(cctx, 10*time.Minute, func() bool {
			_, passes := reconcileTime("namespace")
			return passes > nsPasses && queueEmpty("namespace")
		}); err != nil {
			return fmt.Errorf("first namespace pass: %w", err)
		}
	}
	initial := time.Since(t0)
	startup := run.counter.By()
	y1, err := y.after(ctx)
	if err != nil {
		return err
	}
	server := spent(y0, y1)
	perVMI := float64(heap()-before) / float64(n)
	if profile != "" {
		// go tool pprof -sample_index=inuse_space -diff_base PROFILE.N.before PROFILE.N
		if err := writeHeapProfile(fmt.Sprintf("%s.%d", profile, n)); err != nil {
			return err
		}
	}

	perMin, detail := run.steady(window, func(k string) string { return k })
	seen := run.acting.count()
	late, lateErr := graceToAction(ctx, env.Config(), c, n)
	action := fmt.Sprintf("%s (max %s)", late.Round(time.Millisecond), run.acting.maxSince(seen).Round(time.Millisecond))
	if lateErr != nil {
		// The other columns are measured: print them, then fail.
		action = "failed"
	}
	fmt.Printf("%-6d %-14s %-16s %-22.1f %-24s %s\n", n, fmt.Sprintf("%.1f KiB", perVMI/1024), initial.Round(10*time.Millisecond), perMin, action, detail)
	fmt.Printf("       start-up, until the first pass was done: %s; the API server's CPU %s, etcd's %s, %d requests the server counted\n",
		startupRequests(startup), seconds(server.apiCPU), seconds(server.etcdCPU), server.requests)
	if sum, passes := reconcileTime("namespace"); passes > nsPasses {
		sum, passes = sum-nsSum, passes-nsPasses
		fmt.Printf("       namespace loop: %d passes over the namespace, %s each (avg)\n", passes, time.Duration(sum/float64(passes)*float64(time.Second)).Round(100*time.Microsecond))
	}
	if err := run.stop(); err != nil {
		return err
	}
	return lateErr
}

// running is a controller started by startController.
type running struct {
	ctx     context.Context
	counter *clients.Counter
	// acting holds how late each action came after its grace period.
	acting *actingLog
	stop   func() error
	// heapBefore is the heap before the controller started; synced is
	// when its caches had synced.
	heapBefore uint64
	synced     time.Time
}

// startController starts `tether controller` with cfg on env, counting its
// API requests, and returns once its caches have synced. A non-empty
// profile is the file of a heap profile taken right before it starts (the
// base of `go tool pprof -diff_base`).
func startController(ctx context.Context, env *localenv.Env, cfg *config.Config, profile string) (*running, error) {
	// The controller's namespace exists wherever it is installed: it holds
	// the guard's and the breaker's records. Without it the anomaly guard
	// would try to create its record every 15 s, in the steady state.
	c, err := clients.New(env.Config())
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controller.DefaultNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	counter, before := &clients.Counter{}, heap()
	if profile != "" {
		if err := writeHeapProfile(profile); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	acting := &actingLog{}
	mgr, err := controller.New(controller.Options{RestConfig: counter.Wrap(env.Config()), Config: cfg, Log: logr.New(acting), SkipNameValidation: true})
	if err != nil {
		cancel()
		return nil, err
	}
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(cctx) }()
	if !mgr.GetCache().WaitForCacheSync(cctx) {
		cancel()
		return nil, fmt.Errorf("cache did not sync: %v", <-errc)
	}
	return &running{ctx: cctx, counter: counter, acting: acting, stop: func() error { cancel(); return <-errc }, heapBefore: before, synced: time.Now()}, nil
}

// steady counts the requests other than watches over window, per minute,
// and lists them, grouped by group(key).
func (r *running) steady(window time.Duration, group func(string) string) (float64, string) {
	start := r.counter.By()
	time.Sleep(window)
	total, by := 0, map[string]int{}
	for k, v := range r.counter.By() {
		if d := v - start[k]; d > 0 && !strings.Contains(k, "watch") {
			total += d
			by[group(k)] += d
		}
	}
	detail := make([]string, 0, len(by))
	for k, v := range by {
		detail = append(detail, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(detail)
	return float64(total) * float64(time.Minute) / float64(window), strings.Join(detail, " ")
}

// actingLog is the controller's log as the bench reads it: of each
// "acting" line, how long after its grace period the action began
// (afterGrace); everything else is dropped.
type actingLog struct {
	mu   sync.Mutex
	late []time.Duration
}

func (a *actingLog) Init(logr.RuntimeInfo)          {}
func (a *actingLog) Enabled(int) bool               { return true }
func (a *actingLog) Error(error, string, ...any)    {}
func (a *actingLog) WithValues(...any) logr.LogSink { return a }
func (a *actingLog) WithName(string) logr.LogSink   { return a }
func (a *actingLog) Info(_ int, msg string, kv ...any) {
	if msg != "acting" {
		return
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] != "afterGrace" {
			continue
		}
		if d, err := time.ParseDuration(fmt.Sprint(kv[i+1])); err == nil {
			a.mu.Lock()
			a.late = append(a.late, d)
			a.mu.Unlock()
		}
	}
}

// count is the number of actions logged so far.
func (a *actingLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.late)
}

// maxSince is the latest of the actions logged after the first from.
func (a *actingLog) maxSince(from int) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var m time.Duration
	for _, d := range a.late[from:] {
		m = max(m, d)
	}
	return m
}

// liveNamespace holds the live VM of graceToAction and its claims, apart
// from the N paused VMs: in the emulated KubeVirt a claim wakes every VM
// and VMI of its namespace, and three claims
// created among 10,000 paused VMIs queued tens of thousands of passes in
// front of the live VM's hot-plugs and unplugs (its volumes were Ready
// after 20 s and an unplug was carried out a minute after it was asked
// for, which the bench then measured as the controller's delay).
const liveNamespace = "bench-live"

// graceToAction hot-plugs three VMI-only volumes on a live VM and returns
// the average delay between the end of their grace period and the action.
func graceToAction(ctx context.Context, cfg *rest.Config, c client.Client, n int) (time.Duration, error) {
	sumBefore, countBefore := histogram()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: liveNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, err
	}
	name := fmt.Sprintf("live-%d", n)
	vm := fixture.VM(name, fixture.Running(), fixture.InNamespace(liveNamespace))
	vm.UID = ""
	if err := c.Create(ctx, vm); err != nil {
		return 0, err
	}
	// The emulated virt-controller starts it once it is through its own
	// first pass over the world (minutes at 100,000 VMs): not the
	// controller's time, which is measured from the grace's end.
	started := time.Now()
	if err := waitFor(ctx, 15*time.Minute, func() bool {
		var vmi kubevirtv1.VirtualMachineInstance
		return c.Get(ctx, client.ObjectKey{Namespace: liveNamespace, Name: name}, &vmi) == nil && vmi.Status.Phase == kubevirtv1.Running
	}); err != nil {
		return 0, fmt.Errorf("live VM did not start: %w", err)
	}
	fmt.Fprintf(os.Stderr, "the live VM ran %s after it was created\n", time.Since(started).Round(100*time.Millisecond))
	sub, err := virtapi.NewSubresourceClient(cfg)
	if err != nil {
		return 0, err
	}
	for i := 0; i < 3; i++ {
		vol := fmt.Sprintf("%s-orphan-%d", name, i)
		pvc := fixture.PVC(vol, fixture.InNamespace(liveNamespace))
		pvc.UID = ""
		if err := c.Create(ctx, pvc); err != nil {
			return 0, err
		}
		if err := virtapi.AddVolume(ctx, sub, virtapi.VMI, liveNamespace, name, fixture.AddVolumeOptions(vol)); err != nil {
			return 0, err
		}
	}
	// The emulated KubeVirt settles a hot-plug later the more VMIs it
	// holds; the delay measured is the controller's own (histogram).
	settle := time.Minute + time.Duration(n)*10*time.Millisecond
	var state string
	t0 := time.Now()
	if err := waitFor(ctx, settle, func() bool {
		var list v1alpha1.FindingList
		if c.List(ctx, &list, client.InNamespace(liveNamespace)) != nil {
			return false
		}
		var vmi kubevirtv1.VirtualMachineInstance
		_ = c.Get(ctx, client.ObjectKey{Namespace: liveNamespace, Name: name}, &vmi)
		done, s := 0, liveState(&vmi, list.Items)
		if s != state {
			fmt.Fprintf(os.Stderr, "%6s %s\n", time.Since(t0).Round(100*time.Millisecond), s)
			state = s
		}
		for _, f := range list.Items {
			if f.Spec.Subject.Name == name && f.Status.Phase == v1alpha1.PhaseResolved {
				done++
			}
		}
		return done == 3
	}); err != nil {
		return 0, fmt.Errorf("orphans not resolved (last seen: %s): %w", state, err)
	}
	sum, count := histogram()
	if count == countBefore {
		return 0, fmt.Errorf("no action recorded")
	}
	return time.Duration((sum - sumBefore) / float64(count-countBefore) * float64(time.Second)), nil
}

// liveState says where the live VMI's hot-plugs and their records stand:
// each volume status's phase, and each record's phase and reason.
func liveState(vmi *kubevirtv1.VirtualMachineInstance, recs []v1alpha1.Finding) string {
	var parts []string
	for _, vs := range vmi.Status.VolumeStatus {
		parts = append(parts, fmt.Sprintf("%s=%s", vs.Name, vs.Phase))
	}
	for _, f := range recs {
		if f.Spec.Subject.Name == vmi.Name {
			parts = append(parts, fmt.Sprintf("record %s: %s %s", f.Spec.Volume, f.Status.Phase, f.Status.Reason))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// series calls fn with each series of the controller-runtime metric family
// whose label is value.
func series(family, label, value string, fn func(*dto.Metric)) {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return
	}
	for _, fam := range families {
		if fam.GetName() != family {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					fn(m)
				}
			}
		}
	}
}

// queueEmpty reports whether the work queue of the controller named name
// is drained.
func queueEmpty(name string) bool {
	empty := false
	series("workqueue_depth", "name", name, func(m *dto.Metric) { empty = m.GetGauge().GetValue() == 0 })
	return empty
}

// reconciles is the hot-plug controller's reconcile count so far.
func reconciles() float64 {
	total := 0.0
	series("controller_runtime_reconcile_total", "controller", "hotplug", func(m *dto.Metric) { total += m.GetCounter().GetValue() })
	return total
}

// reconcileTime is the total time and the count of the reconciles of the
// controller named name so far.
func reconcileTime(name string) (sum float64, count uint64) {
	series("controller_runtime_reconcile_time_seconds", "controller", name, func(m *dto.Metric) {
		sum, count = m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
	})
	return sum, count
}

func histogram() (float64, uint64) {
	var m dto.Metric
	if err := metrics.GraceToActionSeconds.Write(&m); err != nil || m.Histogram == nil {
		return 0, 0
	}
	return m.Histogram.GetSampleSum(), m.Histogram.GetSampleCount()
}

func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// startupRequests says what the controller asked of the API server from
// its start until its first pass was done: the requests, by method (GETs
// are the lists' pages, the watches, discovery and reads by name).
func startupRequests(by map[string]int) string {
	total, methods := 0, map[string]int{}
	for k, v := range by {
		total += v
		m, _, _ := strings.Cut(k, " ")
		methods[m] += v
	}
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(methods)) {
		parts = append(parts, fmt.Sprintf("%s %d", m, methods[m]))
	}
	return fmt.Sprintf("%d requests (%s)", total, strings.Join(parts, ", "))
}
