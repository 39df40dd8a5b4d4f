// Command tether-bench measures tether on the local control plane. In audit
// mode it seeds N VMs with running VMIs (each with hot-plugged volumes) and
// measures, side by side on the same server, the list-and-get loop (LIST the
// VMIs, GET each VM) as the reference, the API server's own share of
// tether's LISTs, observe + check in process, and the tether binary end to
// end: wall time, API requests, peak RSS, output size and the speed-up over
// the loop. tether's request count depends on kinds and pages, never on N.
// With -rtt, every contestant talks to the server through a proxy that adds
// a round trip (package distance), at each distance in turn. In openstack
// mode it starts an OpenStack test world, seeds servers with volumes
// attached through Nova and some drift, and measures `tether openstack
// audit` against the per-server loop, requests counted by proxies.
//
//	go run ./cmd/tether-bench -vmis 1000,10000
//	go run ./cmd/tether-bench -vmis 10000 -rtt 0,1,2,5ms
//	go run ./cmd/tether-bench -mode openstack -servers 1000 -drift 0.01
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

func main() {
	sizes := flag.String("vmis", "100,1000", "comma-separated VMI counts to measure")
	hotplugs := flag.Int("hotplugs", 4, "hot-plugged volumes per VMI")
	volumes := flag.String("volumes", "2000,10000", "storage mode: comma-separated volume counts (claim, PV, VolumeAttachment and pod each); openstack mode: one count, the volumes attached through Nova (default: 2 a server)")
	mode := flag.String("mode", "audit", "audit: one audit pass per size; controller: steady state of `tether controller`; storage: its storage checks; openstack: `tether openstack audit` against the per-server loop in an OpenStack test world")
	window := flag.Duration("window", 30*time.Second, "controller mode: how long steady-state requests are counted")
	also := flag.String("checks", "", "controller mode: comma-separated checks the controller runs besides OrphanHotplugVolume (e.g. the namespace loop's)")
	claims := flag.Bool("claims", false, "controller mode: also create the claim of every hot-plugged volume")
	profile := flag.String("profile", "", "controller mode: write heap profiles to this file suffixed with the size: of the settled controller (after its first pass, where its heap is measured) and, suffixed .before, right before it starts")
	runs := flag.Int("runs", 3, "audit and openstack modes: runs of each contestant (interleaved); the median is printed")
	loopMax := flag.Int("loop-max", 20000, "audit mode: leave the list-and-get loop out above this many VMIs (0: never)")
	tether := flag.String("tether", "", "audit and openstack modes: the tether binary to measure (default: build ./cmd/tether)")
	base := flag.String("base", "", "audit mode: another tether binary (e.g. an older build) measured beside it in the same runs")
	hold := flag.Bool("hold", false, "audit and openstack modes: keep the world up after the last size, for profiling by hand")
	servers := flag.Int("servers", 1000, "openstack mode: servers to boot")
	drift := flag.Float64("drift", 0.01, "openstack mode: share of the attachments given drift (0.01: one in a hundred)")
	parallel := flag.Int("parallel", 0, "openstack mode: requests in flight while seeding (0: 8)")
	batch := flag.Int("batch", 0, "openstack mode: servers booted by one POST /servers (0: 50)")
	rtt := flag.String("rtt", "", "audit mode: comma-separated round trips (e.g. 0,1ms,2ms,5ms) at which every contestant talks to the API server through a proxy that delays each direction by half of it; empty: directly")
	levers := flag.Bool("levers", false, "audit mode: measure the levers of issue 49 (compression, protobuf, page size, watch-list, CBOR) on and off as raw reads of all checks' kinds, beside tether's all checks and -base's")
	cbor := flag.Bool("cbor", false, "audit mode with -levers: turn on the API server's CBOR feature gates (alpha) and measure CBOR for custom resources")
	apiArgs := flag.String("apiserver-args", "", "audit mode: comma-separated flags added to the API server's (e.g. --profiling=true, to profile a held world)")
	dump := flag.Bool("dump", false, "audit mode: write the seeded world as kubectl get KIND -A -o json writes it (a file a kind all checks read) and measure tether audit --from it beside the live jobs")
	storageVols := flag.Int("storage", 0, "audit mode: also seed this many volumes of the storage world (claim, PV, VolumeAttachment and pod each), so that built-in kinds are read")
	if os.Getenv(measureEnv) != "" {
		measureChild(os.Args[1:])
	}
	flag.Parse()
	var err error
	switch *mode {
	case "audit":
		var rtts []time.Duration
		if rtts, err = parseRTTs(*rtt); err == nil {
			o := auditOptions{sizes: *sizes, hotplugs: *hotplugs, runs: *runs, loopMax: *loopMax, tether: *tether, base: *base, hold: *hold, rtts: rtts,
				levers: *levers, cbor: *cbor, storage: *storageVols, dump: *dump}
			if *cbor {
				o.apiServerArgs = []string{"--feature-gates=" + cborGates}
			}
			if *apiArgs != "" {
				o.apiServerArgs = append(o.apiServerArgs, strings.Split(*apiArgs, ",")...)
			}
			err = runAudit(o)
		}
	case "controller":
		if *profile != "" {
			// Finer samples than the default one per 512 KiB: the
			// profile is read per VMI.
			runtime.MemProfileRate = 16 << 10
		}
		err = runController(*sizes, *hotplugs, *window, *also, *claims, *profile)
	case "storage":
		err = runStorage(*volumes, *window)
	case "openstack":
		o := osOptions{servers: *servers, volumes: 2 * *servers, drift: *drift, runs: *runs, tether: *tether, parallel: *parallel, batch: *batch, hold: *hold, out: os.Stdout}
		if flagSet("volumes") {
			o.volumes, err = strconv.Atoi(*volumes)
			if err != nil {
				err = fmt.Errorf("-volumes %q: openstack mode takes one count (e.g. 2000)", *volumes)
			}
		}
		if err == nil {
			_, err = runOpenStack(o)
		}
	default:
		err = fmt.Errorf("-mode %q: use audit, controller, storage or openstack", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tether-bench:", err)
		os.Exit(1)
	}
}

// flagSet says whether the flag was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// seed creates VMs and VMIs from index from to to, paused so the emulator
// leaves them as written, and with claims the claims of their volumes. A
// VMI's status is written with the object (the VMI has no status
// subresource, as in KubeVirt).
func seed(ctx context.Context, c client.Client, from, to, hotplugs int, vmiOnly, claims bool) error {
	const ns = "bench"
	_ = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	work := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := seedOne(ctx, c, ns, i, hotplugs, vmiOnly, claims); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		select {
		case work <- i:
		case err := <-errs:
			close(work)
			wg.Wait()
			return err
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func seedOne(ctx context.Context, c client.Client, ns string, i, hotplugs int, vmiOnly, claims bool) error {
	name := fmt.Sprintf("vm-%05d", i)
	var vmOpts, vmiOpts []fixture.Option
	for h := 0; h < hotplugs; h++ {
		// Even volumes are in the VM spec; odd ones are VMI-only hot-plugs
		// (unless vmiOnly is false: then all are in the spec).
		vol := fmt.Sprintf("%s-hp%d", name, h)
		if claims {
			pvc := fixture.PVC(vol, fixture.InNamespace(ns))
			pvc.UID = ""
			if err := c.Create(ctx, pvc); err != nil {
				return err
			}
		}
		if h%2 == 0 || !vmiOnly {
			vmOpts = append(vmOpts, fixture.WithVolume(vol, fixture.PVC(vol), fixture.Hotpluggable()))
		}
		vmiOpts = append(vmiOpts, fixture.WithHotplug(vol))
	}
	vm := fixture.VM(name, append(vmOpts, fixture.InNamespace(ns))...)
	vm.Annotations = map[string]string{emulator.PausedAnnotation: "true"}
	vm.UID = ""
	if err := c.Create(ctx, vm); err != nil {
		return err
	}
	vmi := fixture.VMI(name, append(vmiOpts, fixture.InNamespace(ns), fixture.OwnedBy(vm))...)
	vmi.Annotations = map[string]string{emulator.PausedAnnotation: "true"}
	vmi.UID = ""
	return c.Create(ctx, vmi)
}

// parseRTTs parses -rtt: durations, where a bare number is milliseconds
// ("0,1,2,5ms" is 0, 1, 2 and 5 ms).
func parseRTTs(s string) ([]time.Duration, error) {
	if s == "" {
		return nil, nil
	}
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if ms, err := strconv.ParseFloat(f, 64); err == nil {
			f = strconv.FormatFloat(ms, 'f', -1, 64) + "ms"
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("-rtt: %q is not a round trip (e.g. 0,1,2,5ms)", f)
		}
		out = append(out, d)
	}
	return out, nil
}

func byPath(m map[string]int) string {
	return joinCounts(m, " ", func(k string) string { return k[strings.LastIndex(k, "/")+1:] })
}

// joinCounts prints counts as label=count in the order of their keys.
func joinCounts(m map[string]int, sep string, label func(string) string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", label(k), m[k]))
	}
	return strings.Join(parts, sep)
}
