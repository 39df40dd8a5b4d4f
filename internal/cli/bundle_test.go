package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/bundles"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// bundleWorld is a VM whose VMI has a hot-plug the VM spec lacks, with its
// attachment pod, claim and node: an OrphanHotplugVolume finding.
func bundleWorld() []client.Object {
	vm := fixture.VM("app", fixture.InNamespace("ns1"), fixture.Running())
	vmi := fixture.VMI("app", fixture.InNamespace("ns1"), fixture.OwnedBy(vm), fixture.WithHotplug("pvc-x"))
	pod := fixture.AttachmentPod("hp-volume-app", fixture.InNamespace("ns1"), fixture.LaunchedBy(vmi))
	return []client.Object{vm, vmi, pod, fixture.PVC("pvc-x", fixture.InNamespace("ns1")), fixture.NodeObject(fixture.Node)}
}

func runCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// audit --from reads every layout without a cluster, decides at the
// collection time, says what it read and marks the remedies; fix --from is
// refused with what to run instead.
func TestAuditFromBundle(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, layout := range []string{bundles.MustGather, bundles.Harvester, bundles.Dump} {
		dir := t.TempDir()
		if err := bundles.Write(dir, layout, at, bundleWorld()); err != nil {
			t.Fatal(err)
		}
		code, out, stderr := runCLI("audit", "--from", dir, "-A", "-o", "json", "--kubeconfig", "/nonexistent")
		if code != ExitFindings {
			t.Fatalf("%s: exit %d, stderr %s\n%s", layout, code, stderr, out)
		}
		var r AuditReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if r.Source == nil || !strings.Contains(r.Source.Note, "live cluster first") || len(r.Findings) == 0 {
			t.Fatalf("%s: %s", layout, out)
		}
		if layout != bundles.Dump && !r.Source.Collected.Equal(at) {
			t.Errorf("%s: collected %v from %s", layout, r.Source.Collected, r.Source.CollectedFrom)
		}
		if !strings.Contains(strings.Join(r.Source.ChecksNotRun, "\n"), "StaleVolumeAttachment: ") {
			t.Errorf("%s: checks not run %q", layout, r.Source.ChecksNotRun)
		}
	}
	dir := t.TempDir()
	if err := bundles.Write(dir, bundles.Dump, at, bundleWorld()); err != nil {
		t.Fatal(err)
	}
	_, out, _ := runCLI("audit", "--from", dir, "--now", "2026-03-02T00:00:00Z")
	for _, want := range []string{"offline: " + dir, "as collected at 2026-03-02T00:00:00Z (from --now)", "remedy (a live command: check on the live cluster first):", "OrphanHotplugVolume"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	for format, want := range map[string]string{"policyreport": "offlineNote: 'read from a support bundle", "dot": "digraph tether", "yaml": "kind: AuditReport"} {
		code, out, stderr := runCLI("audit", "--from", dir, "-A", "-o", format)
		if code != ExitFindings || !strings.Contains(out, want) || !strings.Contains(out+stderr, dir) {
			t.Errorf("-o %s: exit %d, want %q on stdout and what was read said\n%s\n%s", format, code, want, out, stderr)
		}
	}
	code, _, stderr := runCLI("fix", "--from", dir, "--apply")
	if code != ExitError || !strings.Contains(stderr, "picture of the past") || !strings.Contains(stderr, "on the live cluster, run `tether fix`") {
		t.Fatalf("fix --from: exit %d, %s", code, stderr)
	}
	for _, c := range []struct{ args, want string }{
		{"audit --now 2026-03-02T00:00:00Z", "--now is for --from"},
		{"audit --from " + dir + " --now yesterday", "not an RFC 3339 time"},
		{"audit --from " + dir + " --cbor", "--cbor is how the API server is asked"},
		{"audit --from " + t.TempDir(), "no object of a kind tether reads"},
		{"audit --from " + dir + " --tenant guest=" + dir, "name the infra namespace"},
	} {
		code, _, stderr := runCLI(strings.Fields(c.args)...)
		if code != ExitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, %s; want %q", c.args, code, stderr, c.want)
		}
	}
}

// A tenant's bundle is tenant evidence as a live tenant is: the VMI-only
// hot-plug that no tenant attaches is an orphan, the one the tenant's
// VolumeAttachment wants is not, and without the tenant the audit cannot
// tell.
func TestAuditFromBundle_tenantEvidence(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	infra := t.TempDir()
	if err := bundles.Write(infra, bundles.MustGather, at, bundleWorld()); err != nil {
		t.Fatal(err)
	}
	tenant := []client.Object{fixture.TenantNodeObject("worker-1", "ns1", "app"), fixture.CSIDriver("csi.kubevirt.io", true), fixture.PV("tpv-x", "pvc-x")}
	idle, attached := t.TempDir(), t.TempDir()
	if err := bundles.Write(idle, bundles.Dump, at, tenant); err != nil {
		t.Fatal(err)
	}
	if err := bundles.Write(attached, bundles.Dump, at, append(tenant, fixture.VolumeAttachment("csi-x", "worker-1", "tpv-x", fixture.Attached()))); err != nil {
		t.Fatal(err)
	}
	orphan := func(args ...string) string {
		code, out, stderr := runCLI(append([]string{"audit", "--from", infra, "-n", "ns1", "-o", "json", "--checks", "OrphanHotplugVolume"}, args...)...)
		if code != ExitFindings && code != ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var r AuditReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Findings) == 0 {
			return "none"
		}
		return r.Findings[0].Message + " / " + string(r.Findings[0].Action.BlockedBy)
	}
	for _, c := range []struct {
		name, got, want string
	}{
		{"without a tenant", orphan(), "VMI-only hot-plug (not in the VM spec) / VMIOnlyHotplug"},
		{"a tenant that attaches nothing", orphan("--tenant", "guest="+idle+":ns1"), "no tenant attaches it / HotplugGateUnknown"},
		{"a tenant that attaches it", orphan("--tenant", "guest="+attached+":ns1"), "none"},
	} {
		if !strings.HasSuffix(c.got, c.want) {
			t.Errorf("%s: %q, want it to end %q", c.name, c.got, c.want)
		}
	}
}

// The checks a bundle cannot feed are left out without naming the others:
// a dangling hot-plugged reference's removal is not asked for by name, as
// in a live audit of every check (naming the check asks for it).
func TestAuditFromBundle_namesNoCheck(t *testing.T) {
	dir := t.TempDir()
	vm := fixture.VM("stopped", fixture.InNamespace("ns1"), fixture.WithVolume("data", fixture.PVC("gone", fixture.InNamespace("ns1")), fixture.Hotpluggable()))
	if err := bundles.Write(dir, bundles.Dump, time.Now(), append(bundleWorld(), vm)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want bool
	}{{nil, true}, {[]string{"--checks", "DanglingVolumeReference"}, false}} {
		_, out, stderr := runCLI(append([]string{"audit", "--from", dir, "-n", "ns1", "-o", "json"}, c.args...)...)
		if got := strings.Contains(out, "removing dangling references was not requested"); got != c.want {
			t.Errorf("%v: says removal was not requested: %v, want %v\n%s%s", c.args, got, c.want, out, stderr)
		}
	}
}
