package controller

import (
	"slices"
	"strings"
	"testing"

	"github.com/tether-dev/tether/config/rbac"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// loopWakes are the loops' wake functions, of reconcilers never run.
func loopWakes() map[check.Loop]wakeFunc {
	return map[check.Loop]wakeFunc{
		check.LoopHotplug:   (&HotplugReconciler{}).wake,
		check.LoopNamespace: (&NamespaceReconciler{}).wake,
		check.LoopStorage:   (&StorageReconciler{}).wake,
		check.LoopFence:     (&FenceReconciler{}).wake,
	}
}

// A loop decides as `tether audit` does only if its gatherer reads every
// kind its checks' rows read, and a change of each wakes it: the rows of
// every loop read within what the loop's gatherer reads (loopGathers, the
// gatherers' own declarations, which observe holds to their requests), and
// every resource of each of those kinds has a watch that wakes the loop.
func TestLoopsGatherAndWatchWhatTheirRowsRead(t *testing.T) {
	wakes := loopWakes()
	for _, c := range check.All() {
		if c.Loop == "" {
			continue
		}
		if gathers, ok := loopGathers()[c.Loop]; !ok {
			t.Errorf("%s runs in the %s loop, which declares no gatherer", c.Name, c.Loop)
		} else if extra := c.Reads &^ gathers; extra != 0 {
			t.Errorf("%s reads %s, which the %s loop never gathers nor watches (it reads %s)", c.Name, extra, c.Loop, gathers)
		}
	}
	for loop, gathers := range loopGathers() {
		wake, ok := wakes[loop]
		if !ok {
			t.Errorf("the %s loop has no wake function", loop)
			continue
		}
		watched := map[snapshot.Kinds]int{}
		for _, w := range watchesOf(gathers, wake) {
			if w.handler == nil {
				t.Errorf("the %s loop gathers %s (%T) but nothing of it wakes the loop", loop, w.kind, w.obj)
				continue
			}
			watched[w.kind]++
		}
		for _, row := range gathers.Rows() {
			if watched[row.Kind] != len(row.Resources) {
				t.Errorf("the %s loop gathers %s from %d resources but watches %d", loop, row.Name, len(row.Resources), watched[row.Kind])
			}
		}
	}
	// The namespace loop gathers and watches only what its enabled checks
	// read; every one of them within its gatherer's kinds.
	for _, name := range check.InLoop(check.LoopNamespace) {
		names, kinds, err := namespaceLoop(func(c string) bool { return c == name })
		c, _ := check.Lookup(name)
		if err != nil || !slices.Equal(names, []string{name}) || kinds != c.Reads {
			t.Errorf("%s alone: loop %v reads %s (%v), want its row's %s", name, names, kinds, err, c.Reads)
		}
	}
}

// The reads config/rbac grants the controller on the kinds of the kind
// table are exactly the ones its loops ask for at start, which the table
// derives (kindReads): list and watch of every kind a loop caches, get of
// those read by name live before an action. The chart's rules are held to
// config/rbac's (charts/tether).
func TestRBAC_grantsTheReadsTheKindTableDerives(t *testing.T) {
	cfg := config.Default()
	for _, name := range check.InLoop() {
		cfg.Checks[name] = config.CheckConfig{Enabled: true}
	}
	tableResource := map[string]bool{}
	for _, row := range snapshot.KindTable() {
		for _, res := range row.Resources {
			tableResource[res.Group+"/"+res.Resource] = true
		}
	}
	isRead := func(g string) bool {
		for _, v := range []string{":get", ":list", ":watch"} {
			if res, ok := strings.CutSuffix(g, v); ok && tableResource[res] {
				return true
			}
		}
		return false
	}
	var want []string
	for _, l := range checkLoops() {
		n := l.need(&cfg)
		if n == nil {
			t.Fatal("a loop's need is missing with every check enabled")
		}
		for _, g := range n.Grants {
			if s := g.Group + "/" + g.Resource + ":" + g.Verb; isRead(s) {
				want = append(want, s)
			}
		}
	}
	// Granted in one rule with the VMs and VMIs; nothing reads the
	// KubeVirt CR by name.
	want = append(want, "kubevirt.io/kubevirts:get")
	slices.Sort(want)
	want = slices.Compact(want)
	rules, err := rbac.Rules(false)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.DeleteFunc(rbac.Grants(rules), func(g string) bool { return !isRead(g) })
	if !slices.Equal(got, want) {
		t.Errorf("config/rbac grants the reads\n%v\nthe kind table derives\n%v", got, want)
	}
}

// The kinds the enabled loops gather decide what the pod cache holds:
// every pod only when a loop reads every pod.
func TestGathered(t *testing.T) {
	for _, tc := range []struct {
		checks []string
		want   snapshot.Kinds
	}{
		{[]string{check.OrphanHotplugVolume}, loopGathers()[check.LoopHotplug]},
		{[]string{check.StuckHotplugPhase}, snapshot.KindVMIs | snapshot.KindAttachmentPods | snapshot.KindKubeVirt},
		{[]string{check.OrphanHotplugVolume, check.BlockedDeletion}, loopGathers()[check.LoopHotplug] | loopGathers()[check.LoopStorage]},
		{nil, 0},
	} {
		cfg := config.Default()
		cfg.Checks = map[string]config.CheckConfig{}
		for _, name := range tc.checks {
			cfg.Checks[name] = config.CheckConfig{Enabled: true}
		}
		if got := gathered(&cfg); got != tc.want {
			t.Errorf("%v: the loops gather %s, want %s", tc.checks, got, tc.want)
		}
	}
}
