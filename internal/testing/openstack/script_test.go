package openstack

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runScript runs hack/openstack.sh with args and extra environment and
// returns its combined output and whether it succeeded.
func runScript(t *testing.T, env []string, args ...string) (string, bool) {
	t.Helper()
	script, err := findScript()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func TestScriptRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"up without a directory -> names --dir", []string{"up"}, "up needs --dir DIR"},
		{"down without a directory -> names --dir", []string{"down"}, "down needs --dir DIR"},
		{"a port base out of range -> names the range", []string{"up", "--dir", t.TempDir(), "--port-base", "80"}, "--port-base must be a number from 1024 to 65530"},
		{"an unknown flag -> names it", []string{"up", "--frobnicate"}, "unknown argument --frobnicate"},
		{"an unknown release line -> names both lines", []string{"up", "--dir", t.TempDir(), "--release", "2023.1"}, "--release must be zed (the host's Debian 12 packages) or 2025.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := runScript(t, nil, tc.args...)
			if ok || !strings.Contains(out, tc.want) {
				t.Errorf("hack/openstack.sh %s: ok=%v, output:\n%s\nwant a failure saying %q", strings.Join(tc.args, " "), ok, out, tc.want)
			}
		})
	}
}

// Without the packages and without root, install stops before apt-get and
// prints the command to run as root. dpkg-query and id are stubbed to make
// this machine look like one without the packages and a plain user.
func TestScriptWithoutPackagesNeedsRoot(t *testing.T) {
	bin := t.TempDir()
	stubs := map[string]string{
		"dpkg-query": "#!/bin/sh\nexit 1\n",
		"id":         "#!/bin/sh\necho 1000\n",
		"apt-get":    "#!/bin/sh\necho apt-get must not run >&2\nexit 3\n",
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "TETHER_CACHE_DIR=" + t.TempDir()}
	out, ok := runScript(t, env, "install")
	want := "run as root: apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-nova python3-cinder python3-placement"
	if ok || !strings.Contains(out, want) || strings.Contains(out, "apt-get must not run") {
		t.Errorf("install without packages as a plain user: ok=%v, output:\n%s\nwant a failure saying %q, without running apt-get", ok, out, want)
	}
}

// Where the 2025.1 root is not built yet and the user is not root, install
// exits 3 (the tests' cue to skip) with one line saying why and what to do,
// before it runs debootstrap or apt-get. id is stubbed to make this machine
// look like a plain user's.
func TestScriptSecondLineWithoutRootCannot(t *testing.T) {
	bin := t.TempDir()
	stubs := map[string]string{
		"id":          "#!/bin/sh\necho 1000\n",
		"apt-get":     "#!/bin/sh\necho apt-get must not run >&2\nexit 9\n",
		"debootstrap": "#!/bin/sh\necho debootstrap must not run >&2\nexit 9\n",
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := findScript()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, "install", "--release", Line2025_1)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "TETHER_CACHE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := "openstack: cannot run the 2025.1 line here: its Debian 13 root is built with debootstrap and entered with chroot, which need root: run as root"
	if !errors.As(err, &exit) || exit.ExitCode() != cannotExit || len(lines) != 1 || lines[0] != want {
		t.Errorf("install --release 2025.1 as a plain user: %v, output:\n%s\nwant exit %d and the one line %q", err, out, cannotExit, want)
	}
}

// A port of the world already taken fails up with the port and the remedy,
// and leaves no process behind.
func TestScriptRefusesATakenPort(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the installed packages")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	base := port - 2 // the port is placement's
	dir := t.TempDir()
	out, ok := runScript(t, nil, "up", "--dir", dir, "--port-base", fmt.Sprint(base))
	want := fmt.Sprintf("port %d is in use: pick another --port-base", port)
	if ok || !strings.Contains(out, want) {
		t.Fatalf("up on a taken port: ok=%v, output:\n%s\nwant a failure saying %q", ok, out, want)
	}
	if pids, _ := filepath.Glob(filepath.Join(dir, "*.pid")); len(pids) != 0 {
		t.Errorf("up failed but left PID files %v", pids)
	}
}

// When the world does not become ready in time, up fails naming what is
// missing and stops every process it started.
func TestScriptStopsWhatItStartedOnFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the installed packages")
	}
	base, err := freePortBase()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out, ok := runScript(t, nil, "up", "--dir", dir, "--port-base", fmt.Sprint(base), "--timeout", "0")
	if ok || !strings.Contains(out, "not ready after 0s") || !strings.Contains(out, "did not become ready") {
		t.Fatalf("up --timeout 0: ok=%v, output:\n%s\nwant a failure naming what is not ready", ok, out)
	}
	if pids, _ := filepath.Glob(filepath.Join(dir, "*.pid")); len(pids) != 0 {
		t.Errorf("up failed but left PID files %v", pids)
	}
	for p := base; p < base+6; p++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			c.Close()
			t.Errorf("port %d still answers after the failed up", p)
		}
	}
}

// The world's ports are picked below the kernel's ephemeral range, where
// no outgoing connection or listen on port 0 can take them between the
// check and the services' binds.
func TestFreePortBaseIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for i := 0; i < 200; i++ {
		base, err := freePortBase()
		if err != nil {
			t.Fatal(err)
		}
		if base < 1024 || base+5 >= low {
			t.Fatalf("port base %d: the world's ports %d..%d reach the ephemeral range from %d", base, base, base+5, low)
		}
	}
}
