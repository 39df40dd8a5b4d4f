// Command tether-bench measures an audit on the local control plane: it
// seeds N VMs with running VMIs (each with hot-plugged volumes), then runs
// the same observe + check pass as `tether audit -A` and prints the wall time
// and the number of API requests. The request count must equal the number of
// kinds listed (times their pages), whatever N is.
//
//	go run ./cmd/tether-bench -vmis 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/check"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/observe"
	"github.com/tether-dev/tether/internal/testing/emulator"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/localenv"
)

func main() {
	sizes := flag.String("vmis", "100,1000", "comma-separated VMI counts to measure")
	hotplugs := flag.Int("hotplugs", 4, "hot-plugged volumes per VMI")
	volumes := flag.String("volumes", "2000,10000", "storage mode: comma-separated volume counts (claim, PV, VolumeAttachment and pod each)")
	mode := flag.String("mode", "audit", "audit: one audit pass per size; controller: steady state of `tether controller`; storage: its storage checks")
	window := flag.Duration("window", 30*time.Second, "controller mode: how long steady-state requests are counted")
	flag.Parse()
	var err error
	switch *mode {
	case "audit":
		err = run(*sizes, *hotplugs)
	case "controller":
		err = runController(*sizes, *hotplugs, *window)
	case "storage":
		err = runStorage(*volumes, *window)
	default:
		err = fmt.Errorf("-mode %q: use audit, controller or storage", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tether-bench:", err)
		os.Exit(1)
	}
}

func run(sizes string, hotplugs int) error {
	ctx := context.Background()
	env, err := localenv.Start(ctx, localenv.Options{})
	if err != nil {
		return err
	}
	defer env.Stop()
	c, err := clients.New(env.Config())
	if err != nil {
		return err
	}
	fmt.Printf("%-8s %-10s %-10s %-10s %-9s %s\n", "VMIS", "SEED", "AUDIT", "REQUESTS", "FINDINGS", "REQUESTS BY PATH")
	seeded := 0
	for _, s := range strings.Split(sizes, ",") {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
			return fmt.Errorf("-vmis: %q is not a positive count", s)
		}
		t0 := time.Now()
		if err := seed(ctx, c, seeded, n, hotplugs, true); err != nil {
			return err
		}
		seedTime := time.Since(t0)
		seeded = n
		var counter clients.Counter
		cc, err := clients.New(counter.Wrap(env.Config()))
		if err != nil {
			return err
		}
		t1 := time.Now()
		snap, err := observe.Observe(ctx, cc, observe.Options{})
		if err != nil {
			return err
		}
		findings := check.Run(snap, check.DefaultPolicy(), time.Now())
		audit := time.Since(t1)
		fmt.Printf("%-8d %-10s %-10s %-10d %-9d %s\n", len(snap.VMIs), seedTime.Round(time.Millisecond), audit.Round(time.Millisecond),
			counter.Total(), len(findings), byPath(counter.By()))
	}
	return nil
}

// seed creates VMs and VMIs from index from to to, paused so the emulator
// leaves them as written. A VMI's status is written with the object (the
// VMI has no status subresource, as in KubeVirt).
func seed(ctx context.Context, c client.Client, from, to, hotplugs int, vmiOnly bool) error {
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
				if err := seedOne(ctx, c, ns, i, hotplugs, vmiOnly); err != nil {
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

func seedOne(ctx context.Context, c client.Client, ns string, i, hotplugs int, vmiOnly bool) error {
	name := fmt.Sprintf("vm-%05d", i)
	var vmOpts, vmiOpts []fixture.Option
	for h := 0; h < hotplugs; h++ {
		// Even volumes are in the VM spec; odd ones are VMI-only hot-plugs
		// (unless vmiOnly is false: then all are in the spec).
		vol := fmt.Sprintf("%s-hp%d", name, h)
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

func byPath(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		short := k[strings.LastIndex(k, "/")+1:]
		parts = append(parts, fmt.Sprintf("%s=%d", short, m[k]))
	}
	return strings.Join(parts, " ")
}
