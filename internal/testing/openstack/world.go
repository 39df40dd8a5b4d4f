// Package openstack starts a real OpenStack test world for integration tests:
// Nova (API, conductor, scheduler, compute with the fake driver), Placement
// and Cinder (API, scheduler, volume with the fake driver) from Debian's
// packages, run by hack/openstack.sh on free local ports, with Keystone,
// Glance and Neutron stubbed. It also seeds the drift that tether looks for,
// the way it arises in a real cloud.
//
// One world serves a whole test binary: call Main from TestMain and Start
// from each test. EnvRelease picks the release line (the host's Zed by
// default, or 2025.1 in a Debian 13 root); make test runs the OpenStack
// packages once on each. Outside tests only the benchmark (cmd/tether-bench)
// may import the package: StartWorld starts a world of its own, and
// SeedScale seeds thousands of servers. tether's own binaries never import it.
package openstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bquotas "github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/quotasets"
)

// CloudName is the cloud in World.CloudsYAML.
const CloudName = "tether-test"

// EnvKeep names an environment variable: when set to 1, Main leaves the
// world running and prints where it is (for debugging a failing test).
const EnvKeep = "TETHER_OPENSTACK_KEEP"

// EnvRelease names an environment variable that picks the release line the
// world runs: LineZed (the default, the host's Debian 12 packages) or
// Line2025_1 (Debian 13's, in a root that hack/openstack.sh builds once).
const EnvRelease = "TETHER_OPENSTACK_RELEASE"

// The release lines of the test world, as hack/openstack.sh --release names them.
const (
	LineZed    = "zed"
	Line2025_1 = "2025.1"
)

// cannotExit is hack/openstack.sh's exit code for "this host cannot run the
// line at all" (not root, no debootstrap to be had): the tests skip.
const cannotExit = 3

// World is a running OpenStack test world.
type World struct {
	Dir        string // state directory: configuration, databases, logs (Dir/logs), PIDs
	CloudsYAML string // a clouds.yaml with the cloud CloudName (password auth against the Keystone stub)
	Cloud      string // CloudName
	// Endpoints as the Keystone stub's catalog lists them.
	Compute      string // http://127.0.0.1:PORT/v2.1
	BlockStorage string // http://127.0.0.1:PORT/v3/<Project>
	Placement    string // http://127.0.0.1:PORT
	Identity     string // http://127.0.0.1:PORT/v3
	Project      string // the project everything is created in ("admin", an admin user's)

	// StartTime is how long hack/openstack.sh up took.
	StartTime time.Duration
	// Release names the package versions of Nova, Cinder and Placement.
	Release string
	// Line is the release line, LineZed or Line2025_1.
	Line string

	portBase int
	novaDB   string
}

// Options are a world's settings beyond the defaults the tests run with.
type Options struct {
	// Scale configures the world for thousands of servers: Nova's quotas
	// off (hack/openstack.sh up --scale). The tests' worlds keep Nova's
	// default quota of 10 servers a project.
	Scale bool
}

// CannotRunError says that this host cannot run the selected release line
// at all (not root, no debootstrap to be had): tests skip on it.
type CannotRunError struct{ Why string }

func (e *CannotRunError) Error() string { return e.Why }

// StartWorld starts a world of its own outside a test binary (the
// benchmark), with Cinder's quotas of its project lifted as Start lifts
// them. Stop stops it and removes its directory.
func StartWorld(o Options) (*World, error) {
	w, err := start(o)
	if err != nil {
		return nil, err
	}
	if err := w.liftQuotas(); err != nil {
		_ = w.Stop(true)
		return nil, fmt.Errorf("%w (logs in %s)", err, w.Dir+"/logs")
	}
	return w, nil
}

// Stop stops a world that StartWorld started and, unless keepLogs,
// removes its directory (keepLogs leaves its configuration and logs).
func (w *World) Stop(keepLogs bool) error {
	err := w.stop()
	if keepLogs {
		return err
	}
	if rmErr := os.RemoveAll(w.Dir); err == nil {
		err = rmErr
	}
	return err
}

var (
	mainUsed  bool
	startOnce sync.Once
	world     *World
	startErr  error
	skipWhy   string // set when the host cannot run the selected line
)

// line is the release line EnvRelease selects.
func line() string {
	if l := os.Getenv(EnvRelease); l != "" {
		return l
	}
	return LineZed
}

// Main runs the tests of a package that uses Start and stops the world
// afterwards. Call it from TestMain:
//
//	func TestMain(m *testing.M) { openstack.Main(m) }
func Main(m *testing.M) {
	mainUsed = true
	code := m.Run()
	if world != nil {
		if os.Getenv(EnvKeep) == "1" {
			fmt.Fprintf(os.Stderr, "openstack: world left running (%s=1) in %s; stop it with: hack/openstack.sh down --dir %s\n", EnvKeep, world.Dir, world.Dir)
		} else {
			if err := world.stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				if code == 0 {
					code = 1
				}
			}
			_ = os.RemoveAll(world.Dir)
		}
	}
	os.Exit(code)
}

// Start returns the test binary's OpenStack world, starting it on first use.
// It skips the test under -short and fails it, with the tail of the
// start-up log, when the world cannot start.
func Start(t testing.TB) *World {
	t.Helper()
	if testing.Short() {
		t.Skip("the OpenStack test world does not run under -short")
	}
	if !mainUsed {
		t.Fatal("the OpenStack test world needs TestMain: add func TestMain(m *testing.M) { openstack.Main(m) } to the package's tests")
	}
	startOnce.Do(func() { world, startErr = start(Options{}) })
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	if startErr != nil {
		t.Fatal(startErr)
	}
	quotaOnce.Do(func() { quotaErr = world.liftQuotas() })
	if quotaErr != nil {
		t.Fatal(quotaErr)
	}
	return world
}

var (
	quotaOnce sync.Once
	quotaErr  error
)

// liftQuotas lifts the project's Cinder quotas (-1: unlimited;
// os-quota-sets, admin), so that one test binary's volumes are not capped
// by the default of 10. (Nova's quota API asks Keystone, which the world
// stubs, whether the project exists; its default of 10 instances is enough
// for one test binary, and Options.Scale switches it off.)
func (w *World) liftQuotas() error {
	c, err := w.NewBlockStorageClient()
	if err != nil {
		return err
	}
	unlimited := -1
	err = bquotas.Update(context.Background(), c, w.Project,
		bquotas.UpdateOpts{Volumes: &unlimited, Gigabytes: &unlimited}).Err
	if err != nil {
		return fmt.Errorf("lifting Cinder's quotas of project %s: %w", w.Project, err)
	}
	return nil
}

func start(o Options) (*World, error) {
	script, err := findScript()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tether-openstack-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		base, err := freePortBase()
		if err != nil {
			return nil, err
		}
		w, err := up(script, dir, base, o)
		if err == nil {
			return w, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "is in use") && !strings.Contains(err.Error(), "Address already in use") {
			break // only a lost race for the ports is worth another try
		}
	}
	return nil, lastErr
}

func up(script, dir string, base int, o Options) (*World, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	args := []string{"up", "--dir", dir, "--port-base", strconv.Itoa(base), "--release", line()}
	if o.Scale {
		args = append(args, "--scale")
	}
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	runErr := cmd.Run()
	elapsed := time.Since(t0)
	var exit *exec.ExitError
	if errors.As(runErr, &exit) && exit.ExitCode() == cannotExit {
		skipWhy = lastLine(out.String())
		_ = os.RemoveAll(dir)
		return nil, &CannotRunError{Why: skipWhy}
	}
	if runErr != nil {
		_ = exec.Command(script, "down", "--dir", dir).Run()
		return nil, fmt.Errorf("the OpenStack test world did not start (%s up --dir %s --port-base %d: %v):\n%s\n%s",
			script, dir, base, runErr, tail(out.String(), 30), logTails(dir))
	}
	w := &World{
		Dir:          dir,
		CloudsYAML:   filepath.Join(dir, "clouds.yaml"),
		Cloud:        CloudName,
		Compute:      fmt.Sprintf("http://127.0.0.1:%d/v2.1", base),
		BlockStorage: fmt.Sprintf("http://127.0.0.1:%d/v3/admin", base+1),
		Placement:    fmt.Sprintf("http://127.0.0.1:%d", base+2),
		Identity:     fmt.Sprintf("http://127.0.0.1:%d/v3", base+3),
		Project:      "admin",
		StartTime:    elapsed,
		Release:      release(dir),
		Line:         line(),
		portBase:     base,
		novaDB:       filepath.Join(dir, "nova", "nova_cell1.sqlite"),
	}
	fmt.Fprintf(os.Stderr, "openstack: %s (%s) ready in %s in %s\n", w.Line, w.Release, elapsed.Round(100*time.Millisecond), dir)
	return w, nil
}

func (w *World) stop() error {
	script, err := findScript()
	if err != nil {
		return err
	}
	out, err := exec.Command(script, "down", "--dir", w.Dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("stopping the OpenStack test world in %s: %v: %s", w.Dir, err, out)
	}
	return nil
}

// release names the versions of Nova, Cinder and Placement the world in
// dir runs, as hack/openstack.sh up wrote them to dir/release.
func release(dir string) string {
	if data, err := os.ReadFile(filepath.Join(dir, "release")); err == nil {
		return strings.TrimSpace(string(data))
	}
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Package}=${Version} ", "python3-nova", "python3-cinder", "python3-placement").Output()
	if err != nil {
		return "OpenStack (versions unknown)"
	}
	return strings.TrimSpace(string(out))
}

// freePortBase finds N such that the world's six ports N..N+5 are free now,
// below the kernel's ephemeral range (ephemeralLow): a port in that range
// that is free now can be taken before the service binds it by any
// process's outgoing connection or listen on port 0, as the parallel test
// binaries make thousands of (seen: Nova's bind failing with "Address
// already in use" seconds after the ports were found free).
func freePortBase() (int, error) {
	const lowest = 20000
	top := ephemeralLow() - 6
	if top <= lowest {
		return 0, fmt.Errorf("no room for the OpenStack test world's ports between %d and the ephemeral range (net.ipv4.ip_local_port_range starts at %d)", lowest, top+6)
	}
	for i := 0; i < 100; i++ {
		base := lowest + 10*rand.IntN((top-lowest)/10)
		free := true
		for p := base; p < base+6 && free; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				free = false
				continue
			}
			l.Close()
		}
		if free {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no six free consecutive ports found between %d and %d for the OpenStack test world", lowest, top+5)
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default 32768 where it cannot be read).
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var low, high int
	if _, err := fmt.Sscan(string(data), &low, &high); err != nil || low <= 0 {
		return 32768
	}
	return low
}

// findScript finds hack/openstack.sh by walking up from the working
// directory (tests run in their package's directory) to the module root.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			script := filepath.Join(dir, "hack", "openstack.sh")
			if _, err := os.Stat(script); err != nil {
				return "", fmt.Errorf("%s is missing: the OpenStack test world runs from a checkout of tether", script)
			}
			return script, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("hack/openstack.sh not found: run the tests from inside the tether checkout")
		}
		dir = parent
	}
}

func lastLine(s string) string {
	return tail(s, 1)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logTails returns the last lines of each service log in dir/logs.
func logTails(dir string) string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- %s (last lines)\n%s\n", f, tail(string(data), 15))
	}
	return b.String()
}

// LogTail returns the last n lines of one of the world's logs (nova, cinder,
// placement, stubs), for test failure messages.
func (w *World) LogTail(name string, n int) string {
	data, err := os.ReadFile(filepath.Join(w.Dir, "logs", name+".log"))
	if err != nil {
		return err.Error()
	}
	return tail(string(data), n)
}
