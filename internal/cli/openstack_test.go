package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack"
	oscheck "github.com/tether-dev/tether/internal/openstack/check"
	"github.com/tether-dev/tether/internal/plan"
	"github.com/tether-dev/tether/internal/runstate"
	ostest "github.com/tether-dev/tether/internal/testing/openstack"
	"github.com/tether-dev/tether/internal/testing/promtext"
)

// TestMain stops the OpenStack test world the openstack tests start; the
// other tests of the package do not start it.
func TestMain(m *testing.M) { ostest.Main(m) }

// worldWithDrift starts the world, points the command line at it, and
// seeds a running server called name with a dangling mapping of volume
// name-dangling, and a stale attachment of volume name-stale for a server
// that never existed.
func worldWithDrift(t *testing.T, name string) (w *ostest.World, server, dangling, stale, staleAt string) {
	t.Helper()
	w = ostest.Start(t)
	t.Setenv("OS_CLIENT_CONFIG_FILE", w.CloudsYAML)
	t.Setenv("OS_CLOUD", w.Cloud)
	server, dangling, stale = w.Server(t, name), w.Volume(t, name+"-dangling"), w.Volume(t, name+"-stale")
	w.DanglingBDM(t, server, dangling)
	staleAt, _ = w.StaleAttachment(t, stale)
	return w, server, dangling, stale, staleAt
}

func runTether(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestOpenStackFlagsAreCheckedFirst(t *testing.T) {
	t.Setenv("OS_CLOUD", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"openstack", "audit"}, "--os-cloud"},
		{[]string{"openstack", "audit", "--os-cloud", "c", "-o", "dot"}, "table, json or yaml"},
		{[]string{"openstack", "audit", "--os-cloud", "c", "--check", "OrphanHotplugVolume"}, oscheck.DanglingNovaAttachment},
		{[]string{"openstack", "audit", "--os-cloud", "c", "--all-projects=false"}, "--project"},
		{[]string{"openstack", "fix", "--os-cloud", "c", "--grace", "0s"}, "--grace"},
		{[]string{"openstack", "fix", "--os-cloud", "c", "--max", "-1"}, "--max"},
		{[]string{"openstack", "fix", "--os-cloud", "c", "--state-file", "/s.json", "--state-namespace", "ns"}, "exclude each other"},
		{[]string{"openstack", "fix", "--os-cloud", "c", "--state-file", "/no/such/dir/s.json"}, "create it"},
		{[]string{"openstack", "fix", "--os-cloud", "c", "--state-namespace", "Not_A_Namespace"}, "not a namespace name"},
		{[]string{"openstack", "fix", "--os-cloud", "c", "--kubeconfig", "k"}, "are for --state-namespace"},
		{[]string{"openstack", "fix", "--os-cloud", "c", "--state-file", "/tmp/s.json", "--blast-radius-max-actions", "0"}, "--blast-radius-max-actions"},
		{[]string{"openstack", "reset-breaker"}, "--state-file PATH or --state-namespace NS"},
		{[]string{"openstack", "audit", "--os-cloud", "c", "--metrics-textfile", "/tmp/m.txt"}, "ending in .prom"},
		{[]string{"openstack", "fix", "--os-cloud", "c", "--metrics-push", "pushgateway:9091"}, "not a Pushgateway URL"},
		{[]string{"openstack", "audit", "--os-cloud", "c", "--log-format", "xml"}, "--log-format"},
	} {
		code, _, stderr := runTether(t, tc.args...)
		if code != ExitError || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", tc.args, code, stderr, ExitError, tc.want)
		}
	}
}

// TestOpenStackAuditAndFix drives the command line on real Nova and Cinder:
// audit reports the drift once-seen and not safe, fix without --apply plans
// and changes nothing, holding the running server's mapping (ServerRunning),
// which fix --apply leaves alone too; once the server is stopped, fix
// --apply --max 1 repairs one, a second run the rest, and the audit after
// finds nothing; Nova and Cinder, read through the harness, agree again.
func TestOpenStackAuditAndFix(t *testing.T) {
	w, s, dangling, stale, staleAt := worldWithDrift(t, "cli")

	// Another project's view holds none of it.
	code, out, stderr := runTether(t, "openstack", "audit", "--project", "another-project")
	if code != ExitOK || !strings.Contains(out, "No findings (0 servers, 0 volumes, 0 Cinder attachments") {
		t.Fatalf("audit --project another-project: exit %d\n%s\n%s", code, out, stderr)
	}

	code, out, stderr = runTether(t, "openstack", "audit", "-o", "json")
	if code != ExitFindings {
		t.Fatalf("audit: exit %d, want %d: %s", code, ExitFindings, stderr)
	}
	var report AuditReport
	if err := json.Unmarshal([]byte(out), &report); err != nil || report.Kind != "AuditReport" || report.APIVersion != APIVersion {
		t.Fatalf("audit -o json: %v: %s", err, out)
	}
	byVolume := map[string]drift.Finding{}
	for _, f := range report.Findings {
		byVolume[f.Volume] = f
	}
	// The dangling mapping is on an ACTIVE server: held for that before
	// anything else.
	if f := byVolume[dangling]; f.Check != oscheck.DanglingNovaAttachment || string(f.Object.UID) != s || f.Namespace != w.Project || f.Action.Safe || f.Action.BlockedBy != oscheck.ServerRunning {
		t.Errorf("dangling finding: %+v", f)
	}
	if f := byVolume[stale]; f.Check != oscheck.StaleCinderAttachment || f.Object.Name != staleAt || f.Action.Safe || f.Action.BlockedBy != drift.NotSeenTwice {
		t.Errorf("stale finding: %+v", f)
	}

	code, out, stderr = runTether(t, "openstack", "fix", "--grace", "1s", "-o", "json")
	if code != ExitOK {
		t.Fatalf("fix (plan): exit %d: %s", code, stderr)
	}
	var p FixPlan
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.Applied {
		t.Fatalf("fix -o json: %v: %s", err, out)
	}
	// The server is ACTIVE: its guest may use the dangling mapping's disk,
	// so only the attachment of the server that never existed is planned.
	// Nova 2025.1 deletes the mapping on a reboot: the remedy says so.
	remedy := "openstack server stop " + s
	if w.Line != ostest.LineZed {
		remedy = "openstack server reboot --hard " + s
	}
	planned := 0
	for _, it := range p.Items {
		if it.Planned {
			planned++
		}
		if it.Finding.Volume == dangling && (it.Planned || it.Finding.Action.BlockedBy != oscheck.ServerRunning ||
			!strings.Contains(it.Finding.Action.Remedy, remedy)) {
			t.Errorf("dangling mapping on the running server: %+v, want not planned, blocked by ServerRunning, naming `%s`", it, remedy)
		}
	}
	if planned != 1 {
		t.Fatalf("plan: %d planned, want 1: %s", planned, out)
	}
	if len(w.CinderAttachments(t, stale)) != 1 || !w.NovaLists(t, s, dangling) {
		t.Fatal("the plan changed something")
	}
	// Applied, the held repair changes nothing.
	code, out, stderr = runTether(t, "openstack", "fix", "--grace", "1s", "--apply", "--check", oscheck.DanglingNovaAttachment)
	if code != ExitOK || strings.Contains(out, "Applied") || !strings.Contains(out, string(oscheck.ServerRunning)) {
		t.Fatalf("fix --apply on the running server: exit %d\n%s\n%s", code, out, stderr)
	}
	if f := strings.Fields(out); len(f) < 2 || f[0] != "ID" || f[1] != "PROJECT" {
		t.Errorf("the plan's table does not head its scope column PROJECT:\n%s", out)
	}
	if len(w.CinderAttachments(t, dangling)) != 0 || !w.NovaLists(t, s, dangling) {
		t.Fatal("fix --apply changed the running server's mapping")
	}
	w.WaitServer(t, s, "ACTIVE")

	w.StopServer(t, s)
	code, out, stderr = runTether(t, "openstack", "fix", "--grace", "1s", "--apply", "--max", "1")
	if code != ExitOK || strings.Count(out, "Applied") != 1 || !strings.Contains(out, "--max 1 reached") {
		t.Fatalf("fix --apply --max 1: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = runTether(t, "openstack", "fix", "--grace", "1s", "--apply")
	if code != ExitOK || strings.Count(out, "Applied") != 1 {
		t.Fatalf("fix --apply: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = runTether(t, "openstack", "audit")
	if code != ExitOK || !strings.Contains(out, "No findings") {
		t.Fatalf("audit after: exit %d\n%s\n%s", code, out, stderr)
	}
	if len(w.CinderAttachments(t, stale)) != 0 || len(w.CinderAttachments(t, dangling)) != 0 || w.NovaLists(t, s, dangling) {
		t.Fatal("Nova and Cinder still disagree")
	}
	w.WaitVolume(t, stale, "available")
	w.WaitVolume(t, dangling, "available")
}

// TestOpenStackOtherProjectsVolumeIsNotGone (issue 32): a stopped server of
// project admin uses a volume of project demo, attached through Nova by
// the admin. Listed with --project admin, Cinder's volume and attachment
// lists leave the volume out (they filter by the volume's project), yet
// the volume exists: nothing may call it gone, in --project or
// all-projects mode, and fix --apply changes nothing. Nova and Cinder
// agree about the mapping, so no finding names it at all.
func TestOpenStackOtherProjectsVolumeIsNotGone(t *testing.T) {
	w := ostest.Start(t)
	t.Setenv("OS_CLIENT_CONFIG_FILE", w.CloudsYAML)
	t.Setenv("OS_CLOUD", w.Cloud)
	s, v := w.Server(t, "cross-project"), w.VolumeIn(t, "demo", "cross-project")
	at := w.Attach(t, s, v)
	w.StopServer(t, s)

	about := func(out string) []drift.Finding {
		t.Helper()
		var report AuditReport
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("audit -o json: %v: %s", err, out)
		}
		var fs []drift.Finding
		for _, f := range report.Findings {
			if f.Volume == v || string(f.Object.UID) == s || f.Object.Name == at {
				fs = append(fs, f)
			}
		}
		return fs
	}
	for _, scope := range [][]string{{"--project", w.Project}, {"--all-projects"}} {
		_, out, stderr := runTether(t, append([]string{"openstack", "audit", "-o", "json"}, scope...)...)
		if fs := about(out); len(fs) != 0 {
			t.Errorf("audit %v: findings about server %s and volume %s of project demo: %+v\n%s", scope, s, v, fs, stderr)
		}
	}
	code, out, stderr := runTether(t, "openstack", "fix", "--project", w.Project, "--grace", "1s", "--apply")
	if code != ExitOK || strings.Contains(out, string(oscheck.VolumeGone)) || strings.Contains(out, "Applied") {
		t.Errorf("fix --project %s --apply: exit %d\n%s\n%s", w.Project, code, out, stderr)
	}
	// Both services still hold the attachment.
	if !w.NovaLists(t, s, v) {
		t.Fatal("Nova lost its mapping")
	}
	if got := w.CinderAttachments(t, v); len(got) != 1 || got[0].ID != at || got[0].Status != "attached" {
		t.Fatalf("Cinder lists %+v, want %s attached", got, at)
	}
	w.WaitVolume(t, v, "in-use")
}

// TestOpenStackFixLeftoverReservation (issue 32): a running server with a
// volume attached through Nova and a second reservation of it for the same
// server, a retried attach's leftover. audit reports the reservation
// (seen once), fix --apply deletes it, and only it: Cinder keeps the
// attachment Nova records, attached, and Nova keeps its mapping.
func TestOpenStackFixLeftoverReservation(t *testing.T) {
	w := ostest.Start(t)
	t.Setenv("OS_CLIENT_CONFIG_FILE", w.CloudsYAML)
	t.Setenv("OS_CLOUD", w.Cloud)
	s, v := w.Server(t, "cli-leftover"), w.Volume(t, "cli-leftover")
	used := w.Attach(t, s, v)
	left := w.Reserve(t, s, v)

	code, out, stderr := runTether(t, "openstack", "audit", "--check", oscheck.LeftoverCinderAttachment, "-o", "json")
	var report AuditReport
	if err := json.Unmarshal([]byte(out), &report); code != ExitFindings || err != nil {
		t.Fatalf("audit: exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
	var found []drift.Finding
	for _, f := range report.Findings {
		if f.Volume == v {
			found = append(found, f)
		}
	}
	if len(found) != 1 || found[0].Object.Name != left || found[0].Action.Type != oscheck.DeleteCinderAttachment || found[0].Action.BlockedBy != drift.NotSeenTwice {
		t.Fatalf("audit: findings about volume %s: %+v; want the reservation %s, a delete held NotSeenTwice", v, found, left)
	}
	code, out, stderr = runTether(t, "openstack", "fix", "--check", oscheck.LeftoverCinderAttachment, "--grace", "1s", "--apply")
	if code != ExitOK || !strings.Contains(out, "Applied") || !strings.Contains(out, left) {
		t.Fatalf("fix --apply: exit %d\n%s\n%s", code, out, stderr)
	}
	if got := w.CinderAttachments(t, v); len(got) != 1 || got[0].ID != used || got[0].Status != "attached" {
		t.Fatalf("Cinder lists %+v, want only %s attached", got, used)
	}
	if !w.NovaLists(t, s, v) {
		t.Fatal("Nova lost its mapping")
	}
	w.WaitVolume(t, v, "in-use")
	w.WaitServer(t, s, "ACTIVE")
}

// TestOpenStackAuditWithoutAdmin: Nova's policy lets only admins list all
// projects' servers (os_compute_api:servers:detail:get_all_tenants); a
// member gets 403, and the error names the role and --project.
func TestOpenStackAuditWithoutAdmin(t *testing.T) {
	w := ostest.Start(t)
	data, err := os.ReadFile(w.CloudsYAML)
	if err != nil {
		t.Fatal(err)
	}
	member := strings.Replace(string(data), "username: admin", "username: member", 1)
	if member == string(data) {
		t.Fatalf("no admin user in %s to replace:\n%s", w.CloudsYAML, data)
	}
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(path, []byte(member), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OS_CLIENT_CONFIG_FILE", path)
	code, _, stderr := runTether(t, "openstack", "audit", "--os-cloud", w.Cloud)
	if code != ExitError || !strings.Contains(stderr, "403") || !strings.Contains(stderr, "admin role") || !strings.Contains(stderr, "--project") {
		t.Fatalf("audit as a member: exit %d, stderr %q", code, stderr)
	}
}

// TestOpenStackFixReviewedPlanAndObject: tether openstack fix takes a
// reviewed plan and --object as tether fix does, on real Nova and Cinder.
// The plan is saved with two stale attachments in it; one of them is
// repaired by hand before the plan is applied, and a third appears. The
// apply repairs only the reviewed one that still matches, reports the
// other as changed-since-plan (exit 1) and leaves the new one alone: seen
// once (one survey, no second look), it is held NotSeenTwice. --object
// then narrows a run to the new one.
func TestOpenStackFixReviewedPlanAndObject(t *testing.T) {
	w := ostest.Start(t)
	t.Setenv("OS_CLIENT_CONFIG_FILE", w.CloudsYAML)
	t.Setenv("OS_CLOUD", w.Cloud)
	a, b := w.Volume(t, "plan-a"), w.Volume(t, "plan-b")
	atA, _ := w.StaleAttachment(t, a)
	atB, _ := w.StaleAttachment(t, b)

	code, out, stderr := runTether(t, "openstack", "fix", "--grace", "1s", "-o", "json")
	if code != ExitOK {
		t.Fatalf("fix (plan): exit %d: %s", code, stderr)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	// A KubeVirt plan is not OpenStack's, nor is this one KubeVirt's.
	if code, _, stderr := runTether(t, "fix", "--apply", "--plan", planFile); code != ExitError || !strings.Contains(stderr, "which `tether fix` does not run") {
		t.Fatalf("tether fix --plan <an OpenStack plan>: exit %d: %s", code, stderr)
	}

	// Since the review: b is repaired by someone else, c drifts.
	w.DeleteAttachmentAsNova(t, atB)
	c := w.Volume(t, "plan-c")
	atC, _ := w.StaleAttachment(t, c)

	code, out, stderr = runTether(t, "openstack", "fix", "--grace", "1h", "--apply", "--plan", planFile)
	if code != ExitFindings {
		t.Fatalf("fix --apply --plan: exit %d, want %d (a reviewed finding is gone)\n%s\n%s", code, ExitFindings, out, stderr)
	}
	if strings.Contains(stderr, "observing again") {
		t.Errorf("a run with a reviewed plan observed twice:\n%s", stderr)
	}
	for _, want := range []string{atA, "Applied", plan.ChangedSincePlan + ": the finding is gone", atC, "blocked: NotSeenTwice"} {
		if !strings.Contains(out, want) {
			t.Errorf("fix --apply --plan misses %q:\n%s", want, out)
		}
	}
	if len(w.CinderAttachments(t, a)) != 0 || len(w.CinderAttachments(t, c)) != 1 {
		t.Fatalf("want a's attachment deleted and c's kept: a %v, c %v", w.CinderAttachments(t, a), w.CinderAttachments(t, c))
	}

	// --object narrows the plan to c's attachment.
	code, out, stderr = runTether(t, "openstack", "fix", "--grace", "1s", "-o", "json", "--object", w.Project+"/"+atC)
	if code != ExitOK {
		t.Fatalf("fix --object: exit %d: %s", code, stderr)
	}
	var p FixPlan
	if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Items) != 1 || p.Items[0].Finding.Object.Name != atC || !p.Items[0].Planned {
		t.Fatalf("fix --object %s/%s: %v\n%s", w.Project, atC, err, out)
	}
}

// TestOpenStackObject: --object narrows audit and fix to one server or
// volume, named by ID or name, on real Nova and Cinder: a server's name
// keeps its mapping's finding and the attachments held for it, a volume's
// name the findings about that volume; an object nobody has is exit 2
// with what was read, never an empty success.
func TestOpenStackObject(t *testing.T) {
	w, s, dangling, stale, staleAt := worldWithDrift(t, "obj")

	about := func(args ...string) []drift.Finding {
		t.Helper()
		code, out, stderr := runTether(t, append([]string{"openstack", "audit", "-o", "json"}, args...)...)
		var report AuditReport
		if err := json.Unmarshal([]byte(out), &report); code != ExitFindings || err != nil {
			t.Fatalf("audit %v: exit %d, %v\n%s\n%s", args, code, err, out, stderr)
		}
		return report.Findings
	}
	for _, object := range []string{"obj", s, w.Project + "/obj"} {
		if fs := about("--object", object); len(fs) != 1 || fs[0].Volume != dangling || fs[0].Check != oscheck.DanglingNovaAttachment {
			t.Errorf("audit --object %s: %+v, want the dangling mapping only", object, fs)
		}
	}
	for _, object := range []string{"obj-stale", stale, staleAt} {
		if fs := about("--object", object); len(fs) != 1 || fs[0].Object.Name != staleAt {
			t.Errorf("audit --object %s: %+v, want the stale attachment %s only", object, fs, staleAt)
		}
	}
	for _, cmd := range [][]string{{"audit"}, {"fix", "--grace", "1s"}} {
		code, out, stderr := runTether(t, append(append([]string{"openstack"}, cmd...), "--object", "no-such-server")...)
		if code != ExitError || !strings.Contains(stderr, `--object "no-such-server": no server, volume or Cinder attachment`) || out != "" {
			t.Errorf("%v --object no-such-server: exit %d\n%s\n%s", cmd, code, out, stderr)
		}
	}
	code, out, stderr := runTether(t, "openstack", "fix", "--grace", "1s", "-o", "json", "--object", "obj-stale")
	var p FixPlan
	if err := json.Unmarshal([]byte(out), &p); code != ExitOK || err != nil || len(p.Items) != 1 || p.Items[0].Finding.Object.Name != staleAt || !p.Items[0].Planned {
		t.Fatalf("fix --object obj-stale: exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
}

// TestOpenStackBreakerAcrossRuns: with --state-file, fix --apply counts its
// repairs across runs on real Nova and Cinder. With a limit of two, a first
// run repairs one, a second repairs one and trips the breaker before the
// third (left undone, exit 1); a third run is refused as a whole (exit 2,
// naming the reset) and Cinder keeps the attachment; a run while another
// holds the state's lock changes nothing; reset-breaker lets the next run
// repair it. Without a state, a run says once that nothing counts across
// runs.
func TestOpenStackBreakerAcrossRuns(t *testing.T) {
	w := ostest.Start(t)
	t.Setenv("OS_CLIENT_CONFIG_FILE", w.CloudsYAML)
	t.Setenv("OS_CLOUD", w.Cloud)
	// The stale attachments other tests left in the shared world are
	// repaired first: this test counts repairs.
	if code, out, stderr := runTether(t, "openstack", "fix", "--check", oscheck.StaleCinderAttachment, "--grace", "1s", "--apply", "--max", "100"); code != ExitOK {
		t.Fatalf("clearing the world: exit %d\n%s\n%s", code, out, stderr)
	}
	var vols, ats []string
	for _, name := range []string{"br-a", "br-b", "br-c"} {
		v := w.Volume(t, name)
		at, _ := w.StaleAttachment(t, v)
		vols, ats = append(vols, v), append(ats, at)
	}
	state := filepath.Join(t.TempDir(), "state.json")
	fix := func(extra ...string) (int, string, string) {
		args := []string{"openstack", "fix", "--check", oscheck.StaleCinderAttachment, "--grace", "1s", "--state-file", state, "--blast-radius-max-actions", "2"}
		return runTether(t, append(args, extra...)...)
	}
	left := func() int {
		n := 0
		for _, v := range vols {
			n += len(w.CinderAttachments(t, v))
		}
		return n
	}

	code, out, stderr := runTether(t, "openstack", "fix", "--grace", "1s", "--object", "br-a")
	if code != ExitOK || strings.Count(stderr, noStateNote) != 1 {
		t.Fatalf("fix without a state: exit %d, want the note once:\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = fix("--object", "br-a")
	if code != ExitOK || !strings.Contains(stderr, "0 of 2 actions in the last 1h0m0s; this run's 1 planned action(s) fit") || strings.Contains(stderr, noStateNote) {
		t.Fatalf("dry run with a state: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = fix("--apply", "--max", "1", "--log-format", "json")
	if code != ExitOK || strings.Count(out, "Applied") != 1 || left() != 2 {
		t.Fatalf("first run: exit %d, %d attachments left\n%s\n%s", code, left(), out, stderr)
	}
	// The log: each finding observed, and the one repair applied.
	reasons := map[string][]string{}
	for _, l := range strings.Split(stderr, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			reasons[m["reason"].(string)] = append(reasons[m["reason"].(string)], m["object"].(string))
		}
	}
	if len(reasons[openstack.ReasonFindingObserved]) != 3 || len(reasons[openstack.ReasonActionApplied]) != 1 || !slices.Contains(ats, strings.TrimPrefix(reasons[openstack.ReasonActionApplied][0], "Attachment/")) {
		t.Fatalf("log lines by reason %v; want 3 observed, 1 applied of one of %v\n%s", reasons, ats, stderr)
	}
	prom := filepath.Join(t.TempDir(), "tether.prom")
	code, out, stderr = fix("--apply", "--metrics-textfile", prom)
	if code != ExitFindings || strings.Count(out, "Applied") != 1 || !strings.Contains(out, "not attempted: the blast-radius breaker tripped") || left() != 1 ||
		!strings.Contains(stderr, "reason="+openstack.ReasonBlastRadiusExceeded) {
		t.Fatalf("second run: exit %d, %d attachments left; want one repaired, the breaker tripped (and logged) before the other\n%s\n%s", code, left(), out, stderr)
	}
	// The run's metrics: one repair applied, the breaker tripped, the run
	// incomplete, what it read.
	metrics := readTextfile(t, prom)
	for name, want := range map[string]float64{
		`tether_actions_total{action="DeleteCinderAttachment",check="StaleCinderAttachment",command="fix",result="Applied"}`: 1,
		`tether_findings{check="StaleCinderAttachment",command="fix",phase="Resolved",severity="warning"}`:                   1,
		`tether_blast_radius_tripped{command="fix"}`:                                                                         1,
		`tether_run_success{command="fix"}`:                                                                                  0,
	} {
		if got, ok := metrics[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if n := metrics[`tether_run_objects_read{command="fix",kind="attachment"}`]; n < 2 {
		t.Errorf("attachments read: %v, want at least the 2 left", n)
	}
	code, out, stderr = fix("--apply")
	if code != ExitError || !strings.Contains(stderr, "tether openstack reset-breaker --state-file "+state) || left() != 1 ||
		!strings.Contains(stderr, `msg="run refused" reason=`+openstack.ReasonBlastRadiusExceeded) {
		t.Fatalf("run after the trip: exit %d, %d left\n%s\n%s", code, left(), out, stderr)
	}

	code, out, stderr = runTether(t, "openstack", "reset-breaker", "--state-file", state)
	if code != ExitOK || !strings.Contains(out, "is reset (it tripped at") {
		t.Fatalf("reset-breaker: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, _ = runTether(t, "openstack", "reset-breaker", "--state-file", state)
	if code != ExitOK || !strings.Contains(out, "not tripped: nothing to reset") {
		t.Fatalf("second reset-breaker: exit %d\n%s", code, out)
	}

	// Another run holds the lock: this one changes nothing.
	other := &runstate.FileStore{Path: state}
	if err := other.Lock(context.Background(), "the other run", time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = fix("--apply")
	other.Unlock(context.Background())
	if code != ExitError || !strings.Contains(stderr, "another run holds the lock") || !strings.Contains(stderr, "the other run") || left() != 1 {
		t.Fatalf("run while another holds the lock: exit %d, %d left\n%s", code, left(), stderr)
	}

	code, out, stderr = fix("--apply")
	if code != ExitOK || strings.Count(out, "Applied") != 1 || left() != 0 {
		t.Fatalf("run after the reset: exit %d, %d left\n%s\n%s", code, left(), out, stderr)
	}
}

// readTextfile parses a metrics textfile with Prometheus' text parser and
// returns each sample by name{labels} (labels sorted, as Prometheus prints
// them).
func readTextfile(t *testing.T, path string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for name, mf := range promtext.Parse(t, path) {
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			slices.Sort(ls)
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[name+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}
