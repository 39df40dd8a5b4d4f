package cli

// A third platform, written only to prove the seam: a toy inventory keeps
// two records of one attachment (the host's list of its disks, and each
// disk's record of its host), and they drift. It implements plan.Fixer
// (survey, fix one finding, seen-once or seen-twice) and runs through the
// same driver, plan, --max, --plan and outcome printing as KubeVirt and
// OpenStack. Nothing else of the house is touched to add it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/plan"
)

// The toy's check, action and block reason, as any platform defines them.
const (
	toyStaleDisk                   = "StaleDiskRecord"
	toyClearHost drift.ActionType  = "ClearDiskHost"
	toyHostBusy  drift.BlockReason = "HostBusy"
)

// toyInventory: hosts list their disks; disks name their host.
type toyInventory struct {
	hosts map[string][]string // host -> disks it lists
	busy  map[string]bool     // host -> being migrated
	disks map[string]string   // disk -> host it records ("" detached)
}

// check is the toy's pure check: a disk that records a host which does
// not list it is stale; clearing it is safe unless the host is busy.
func (inv *toyInventory) check() []drift.Finding {
	var out []drift.Finding
	for disk, host := range inv.disks {
		if host == "" || slices.Contains(inv.hosts[host], disk) {
			continue
		}
		obj := drift.ObjectRef{Kind: "Disk", Name: disk, UID: types.UID("disk-" + disk)}
		f := drift.Finding{Check: toyStaleDisk, Namespace: "toy", Object: obj, Volume: disk, Severity: drift.SeverityWarning,
			Message:  "disk " + disk + " records host " + host + ", which does not list it",
			Evidence: []string{"host " + host + " lists " + strings.Join(inv.hosts[host], ",")},
			Action:   drift.Action{Type: toyClearHost, Safe: true, Remedy: "toyctl disk clear " + disk}}
		if inv.busy[host] {
			f.Block(toyHostBusy, "host "+host+" is busy")
		}
		f.ID = drift.FindingID(f.Check, f.Namespace, obj, disk)
		out = append(out, f)
	}
	drift.Sort(out)
	return out
}

// toyFixer is the toy platform as the driver drives it.
type toyFixer struct {
	inv   *toyInventory
	grace time.Duration
	clock time.Time
}

func (x *toyFixer) Survey(context.Context) (plan.Survey, error) {
	return plan.Survey{Findings: x.inv.check(), Taken: x.clock}, nil
}

// Fix re-checks live (here: the inventory as it is now) and clears the
// disk's host only if the fresh finding is the planned one, still safe.
func (x *toyFixer) Fix(_ context.Context, f drift.Finding) drift.Result {
	for _, fresh := range x.inv.check() {
		if fresh.ID == f.ID && fresh.Action.Safe {
			x.inv.disks[f.Volume] = ""
			return drift.Result{Outcome: drift.Applied, Message: "cleared the host of disk " + f.Volume}
		}
	}
	return drift.Result{Outcome: drift.Refused, Message: "live re-check: the finding no longer holds, or is not safe"}
}

func (x *toyFixer) SeenTwice(drift.Finding) time.Duration { return x.grace }

func toyWorld() *toyInventory {
	return &toyInventory{
		hosts: map[string][]string{"h1": {"d1"}, "h2": nil, "h3": nil},
		busy:  map[string]bool{"h3": true},
		disks: map[string]string{"d1": "h1", "d2": "h2", "d3": "h2", "d4": "h3"},
	}
}

func runToy(t *testing.T, x *toyFixer, o plan.Options, format string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runFix(context.Background(), x, o, &out, format, "INVENTORY")
	return out.String(), err
}

func TestToyPlatform_dryRunMaxAndApply(t *testing.T) {
	x := &toyFixer{inv: toyWorld()}
	out, err := runToy(t, x, plan.Options{Max: 1}, "table")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"INVENTORY", "would apply", "skipped: --max 1 reached", "no action: blocked: HostBusy", "1 action(s) planned"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run misses %q:\n%s", want, out)
		}
	}
	if x.inv.disks["d2"] != "h2" || x.inv.disks["d3"] != "h2" {
		t.Fatal("a dry run changed the inventory")
	}
	out, err = runToy(t, x, plan.Options{Max: 10, Apply: true}, "table")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "Applied: cleared the host") != 2 || x.inv.disks["d2"] != "" || x.inv.disks["d3"] != "" || x.inv.disks["d4"] != "h3" {
		t.Fatalf("apply: want d2 and d3 cleared, d4 (busy host) kept:\n%s\n%v", out, x.inv.disks)
	}
}

// A reviewed plan of the toy, saved as -o json, is applied only where it
// still matches: a disk re-attached since the review is left alone and
// the run says so with exit code 1.
func TestToyPlatform_reviewedPlan(t *testing.T) {
	x := &toyFixer{inv: toyWorld()}
	doc, err := runToy(t, x, plan.Options{Max: 10}, "json")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	reviewed, err := plan.ReadPlan(path, "toy fix", []string{toyStaleDisk})
	if err != nil {
		t.Fatal(err)
	}
	x.inv.hosts["h2"] = []string{"d3"} // d3 is wanted again since the review
	out, err := runToy(t, x, plan.Options{Max: 10, Apply: true, Reviewed: reviewed}, "json")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != ExitFindings {
		t.Fatalf("err %v, want exit 1: a reviewed finding changed", err)
	}
	var rep plan.Document
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range rep.Items {
		switch {
		case it.Result != nil:
			got[it.Finding.Volume] = string(it.Result.Outcome)
		default:
			got[it.Finding.Volume] = it.Skipped
		}
	}
	if got["d2"] != "Applied" || !strings.HasPrefix(got["d3"], plan.ChangedSincePlan) || x.inv.disks["d3"] != "h2" {
		t.Fatalf("reviewed plan: %v, inventory %v", got, x.inv.disks)
	}
}

// The toy may also ask to see findings twice: the driver then surveys
// again after the grace, and acts only on what both surveys found.
func TestToyPlatform_seenTwice(t *testing.T) {
	x := &toyFixer{inv: toyWorld(), grace: time.Minute, clock: time.Unix(0, 0)}
	wait := func(_ context.Context, d time.Duration) error {
		x.clock = x.clock.Add(d)
		x.inv.disks["d5"] = "h2" // drifts between the two surveys
		return nil
	}
	out, err := runToy(t, x, plan.Options{Max: 10, Apply: true, Wait: wait}, "table")
	if err != nil {
		t.Fatal(err)
	}
	if x.inv.disks["d5"] != "h2" || x.inv.disks["d2"] != "" || !strings.Contains(out, "NotSeenTwice") {
		t.Fatalf("want d2 cleared and d5 (seen once) held NotSeenTwice:\n%s", out)
	}
}
