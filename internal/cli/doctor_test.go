package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/tether-dev/tether/internal/drift"
	ostest "github.com/tether-dev/tether/internal/testing/openstack"
)

func TestDoctorFlagsAreCheckedFirst(t *testing.T) {
	t.Setenv("OS_CLOUD", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "-o", "dot"}, "--output"},
		{[]string{"doctor", "-n", "a", "-A"}, "exclude each other"},
		{[]string{"doctor", "--controller-config", "x.yaml", "--controller-account", "nocolon"}, "NAMESPACE:NAME"},
		{[]string{"doctor", "--node", "Node_1"}, "--node \"Node_1\" is not a node name"},
		{[]string{"openstack", "doctor"}, "--os-cloud"},
		{[]string{"openstack", "doctor", "--os-cloud", "c", "-o", "dot"}, "table, json or yaml"},
		{[]string{"openstack", "doctor", "--os-cloud", "c", "--servers", "0"}, "--servers"},
	} {
		code, _, stderr := runTether(t, tc.args...)
		if code != ExitError || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", tc.args, code, stderr, ExitError, tc.want)
		}
	}
}

// osDoctor runs `tether openstack doctor -o json` against the world.
func osDoctor(t *testing.T, w *ostest.World, args ...string) (int, map[string]drift.Line) {
	t.Helper()
	t.Setenv("OS_CLIENT_CONFIG_FILE", w.CloudsYAML)
	t.Setenv("OS_CLOUD", w.Cloud)
	code, stdout, stderr := runTether(t, append([]string{"openstack", "doctor", "-o", "json"}, args...)...)
	var lines []drift.Line
	if err := json.Unmarshal([]byte(stdout), &lines); err != nil {
		t.Fatalf("openstack doctor -o json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	byCheck := map[string]drift.Line{}
	for _, l := range lines {
		if l.Source == "" || (l.Status != drift.StatusOK && l.Fix == "") {
			t.Errorf("a line without its source or fix: %+v", l)
		}
		byCheck[l.Check] = l
	}
	if want := drift.DoctorExit(lines); code != want {
		t.Errorf("exit %d, want %d (the worst line)", code, want)
	}
	return code, byCheck
}

func wantLine(t *testing.T, lines map[string]drift.Line, check string, status drift.Status, phrase string) {
	t.Helper()
	l, ok := lines[check]
	if !ok || l.Status != status || !strings.Contains(l.Why, phrase) {
		t.Errorf("%s: want %s saying %q, got %+v", check, status, phrase, l)
	}
}

// On real Nova 26 and Cinder 21 (Zed, with Debian's backport of the
// CVE-2023-2088 fix): the releases and microversions come from their
// version documents, the admin reads are allowed; without a probe and
// before any detach, neither the guard nor Nova's service token can be
// proved (WARN, exit 1). Once Nova has detached a volume and the guard is
// probed with an available volume (Cinder refuses the probe: 409), both
// are OK and the exit code is 0. With Nova's service token not trusted by
// Cinder, Nova's next detach of an attached volume is refused, and doctor
// says Nova cannot detach (FAIL, exit 2) and what to configure; once Nova
// detaches again, the newest detach decides.
func TestOpenStackDoctor(t *testing.T) {
	w := ostest.Start(t)

	// The release lines differ in their version documents: Cinder 2025.1
	// serves 3.71, which proves the attachment guard without a probe
	// (every release since 23.0.0 has it).
	want := map[string]struct {
		nova, cinder, guardWhy string
		guard                  drift.Status
	}{
		ostest.LineZed:    {"2.93: Zed", "3.70: Zed", "cannot be seen through the API", drift.StatusWarn},
		ostest.Line2025_1: {"2.100: 2025.1 Epoxy", "3.71: 2024.1 Caracal or later", "Cinder serves 3.71", drift.StatusOK},
	}[w.Line]
	code, lines := osDoctor(t, w, "--servers", "1")
	wantLine(t, lines, "nova.release", drift.StatusOK, want.nova)
	wantLine(t, lines, "cinder.release", drift.StatusOK, want.cinder)
	wantLine(t, lines, "nova.microversion", drift.StatusOK, "tether uses 2.89")
	wantLine(t, lines, "cinder.microversion", drift.StatusOK, "tether uses 3.44")
	wantLine(t, lines, "openstack.admin", drift.StatusOK, "allowed")
	wantLine(t, lines, "cinder.attachment-guard", want.guard, want.guardWhy)
	if code != 1 {
		t.Errorf("before any detach and without a probe: exit %d, want 1", code)
	}

	server, vol, spare := w.Server(t, "doctor"), w.Volume(t, "doctor-data"), w.Volume(t, "doctor-spare")
	w.Attach(t, server, vol)
	w.NovaDetach(t, server, vol)
	w.WaitVolume(t, vol, "available")

	code, lines = osDoctor(t, w, "--probe-attachment-guard", spare)
	wantLine(t, lines, "cinder.attachment-guard", drift.StatusOK, "was refused 409")
	wantLine(t, lines, "nova.service-token", drift.StatusOK, "Nova detached a volume from server "+server)
	if code != 0 {
		t.Errorf("healthy cloud, guard proved: exit %d, want 0: %+v", code, lines)
	}
	if v := w.GetVolume(t, spare); v.Status != "available" || len(v.Attachments) != 0 {
		t.Errorf("the probe changed volume %s: %s with %d attachments", spare, v.Status, len(v.Attachments))
	}

	w.RefuseServiceToken(t, true)
	t.Cleanup(func() { w.RefuseServiceToken(t, false) })
	w.Attach(t, server, vol)
	w.NovaDetach(t, server, vol)
	if !w.NovaLists(t, server, vol) {
		t.Fatal("setup: Nova's detach should have failed and left the mapping")
	}
	code, lines = osDoctor(t, w, "--probe-attachment-guard", spare)
	wantLine(t, lines, "nova.service-token", drift.StatusFail, "Nova cannot detach")
	wantLine(t, lines, "nova.service-token", drift.StatusFail, "Cinder's guard is on")
	wantLine(t, lines, "cinder.attachment-guard", drift.StatusOK, "was refused 409")
	if l := lines["nova.service-token"]; !strings.Contains(l.Fix, "send_service_user_token") {
		t.Errorf("the fix should name Nova's setting: %q", l.Fix)
	}
	if code != 2 {
		t.Errorf("Nova cannot detach: exit %d, want 2", code)
	}

	// Nova left the volume detaching; roll that back and detach again
	// with the token trusted.
	w.RefuseServiceToken(t, false)
	bs := w.BlockStorageClient(t)
	if _, err := bs.Post(t.Context(), bs.ServiceURL("volumes", vol, "action"), map[string]any{"os-roll_detaching": map[string]any{}}, nil, &gophercloud.RequestOpts{OkCodes: []int{202}}); err != nil {
		t.Fatal(err)
	}
	w.WaitVolume(t, vol, "in-use")
	w.NovaDetach(t, server, vol)
	w.WaitVolume(t, vol, "available")
	if _, lines = osDoctor(t, w); lines["nova.service-token"].Status == drift.StatusFail {
		t.Errorf("after a successful detach the newest detach should decide: %+v", lines["nova.service-token"])
	}
}
