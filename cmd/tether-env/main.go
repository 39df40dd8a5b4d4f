// Command tether-env runs tether's local environment — a real control plane,
// the KubeVirt emulator and optional tenant clusters — in the background.
//
//	tether-env up   --dir .tether-env [--tenant NAME]...   start it, print export KUBECONFIG=...
//	tether-env down --dir .tether-env                      stop it and remove its state
//	tether-env status --dir .tether-env                    say whether it runs
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tether-dev/tether/internal/testing/localenv"
)

type tenantList []string

func (t *tenantList) String() string     { return strings.Join(*t, ",") }
func (t *tenantList) Set(v string) error { *t = append(*t, v); return nil }

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", ".tether-env", "state directory of the environment")
	var tenants tenantList
	fs.Var(&tenants, "tenant", "also start a tenant cluster with this name (repeatable)")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long up waits for the environment")
	migration := fs.Duration("migration-duration", 0, "how long an emulated migration runs (default: the emulator's)")
	kv := fs.String("kubevirt", localenv.KubeVirtFromEnv(), "KubeVirt of the world: emulator, real (virt-api and virt-controller built by hack/kubevirt.sh), or handler (real, and real virt-handler on a real node booting guests; root, hack/node.sh and hack/kubevirt-node.sh); default $TETHER_KUBEVIRT")
	_ = fs.Parse(os.Args[2:])
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fail(err)
	}
	switch os.Args[1] {
	case "up":
		err = up(abs, tenants, *migration, *timeout, *kv)
	case "serve":
		err = serve(abs, tenants, *migration, *kv)
	case "down":
		err = down(abs)
	case "status":
		err = status(abs)
	default:
		usage()
	}
	if err != nil {
		fail(err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: tether-env up|down|status [--dir DIR] [--tenant NAME]... [--migration-duration D]")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tether-env:", err)
	os.Exit(1)
}

func pidFile(dir string) string   { return filepath.Join(dir, "pid") }
func readyFile(dir string) string { return filepath.Join(dir, "ready") }
func logFile(dir string) string   { return filepath.Join(dir, "env.log") }

// running returns the pid of a live environment server in dir, or 0.
func running(dir string) int {
	data, err := os.ReadFile(pidFile(dir))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

func up(dir string, tenants []string, migration, timeout time.Duration, kv string) error {
	if pid := running(dir); pid != 0 {
		fmt.Fprintf(os.Stderr, "environment already running (pid %d)\n", pid)
		printExports(dir)
		return nil
	}
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.Create(logFile(dir))
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"serve", "--dir", dir, "--migration-duration", migration.String(), "--kubevirt", kv}
	for _, t := range tenants {
		args = append(args, "--tenant", t)
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlive this shell
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(os.Stderr, "starting the local environment (control plane, KubeVirt: %s)...\n", kv)
	t0 := time.Now()
	deadline := time.After(timeout)
	for {
		if _, err := os.Stat(readyFile(dir)); err == nil {
			fmt.Fprintf(os.Stderr, "ready in %s\n", time.Since(t0).Round(100*time.Millisecond))
			printExports(dir)
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("environment failed to start (%v); log %s:\n%s", err, logFile(dir), tail(logFile(dir)))
		case <-deadline:
			_ = down(dir)
			return fmt.Errorf("environment not ready after %s; see %s", timeout, logFile(dir))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func printExports(dir string) {
	fmt.Printf("export KUBECONFIG=%s\n", filepath.Join(dir, "kubeconfig"))
	entries, _ := filepath.Glob(filepath.Join(dir, "tenant-*.kubeconfig"))
	for _, e := range entries {
		fmt.Printf("# tenant cluster: %s\n", e)
	}
}

// serve runs the environment in this process until SIGTERM or SIGINT.
func serve(dir string, tenants []string, migration time.Duration, kv string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := os.WriteFile(pidFile(dir), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return err
	}
	env, err := localenv.Start(ctx, localenv.Options{Dir: dir, ControllerManager: true, Tenants: tenants, MigrationDuration: migration, KubeVirt: kv})
	if err != nil {
		return err
	}
	defer env.Stop()
	if err := copyFile(env.Infra.Kubeconfig, filepath.Join(dir, "kubeconfig")); err != nil {
		return err
	}
	for name, t := range env.Tenants {
		if err := copyFile(t.Kubeconfig, filepath.Join(dir, "tenant-"+name+".kubeconfig")); err != nil {
			return err
		}
	}
	if env.Node != nil {
		// The real node's container logs (pods/<ns>_<pod>_<uid>/<container>/),
		// where a guest's serial console is read (guest-console-log).
		if err := os.Symlink(env.Node.LogDir(), filepath.Join(dir, "node-logs")); err != nil {
			return err
		}
	}
	if err := os.WriteFile(readyFile(dir), []byte(time.Now().UTC().Format(time.RFC3339)), 0o600); err != nil {
		return err
	}
	fmt.Println("environment ready")
	<-ctx.Done()
	fmt.Println("stopping")
	_ = os.Remove(readyFile(dir))
	return nil
}

func down(dir string) error {
	pid := running(dir)
	if pid == 0 {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(os.Stderr, "no environment running")
			return nil
		}
		return os.RemoveAll(dir)
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "environment stopped")
	return os.RemoveAll(dir)
}

func status(dir string) error {
	if pid := running(dir); pid != 0 {
		fmt.Printf("running (pid %d)\n", pid)
		printExports(dir)
		return nil
	}
	return errors.New("not running")
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}

func tail(path string) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
