// Package cmdtest builds tether's binary once for an end-to-end test
// package, as a user installs it (with the kubectl-tether plugin link), and
// runs commands against a test environment.
package cmdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Build compiles ./cmd/tether into a new temporary directory, links
// kubectl-tether to it, and returns the directory; remove it when done.
func Build() (string, error) {
	dir, err := os.MkdirTemp("", "tether-bin-")
	if err != nil {
		return "", err
	}
	_, file, _, _ := runtime.Caller(0)
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "tether"), "./cmd/tether")
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("building tether: %w\n%s", err, out)
	}
	if err := os.Symlink("tether", filepath.Join(dir, "kubectl-tether")); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// Result is what a command printed and its exit code.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs name (a binary in binDir, else one on PATH) with binDir first on
// PATH and KUBECONFIG set, for at most timeout.
func Run(t testing.TB, binDir, kubeconfig string, timeout time.Duration, name string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	path := name
	if _, err := os.Stat(filepath.Join(binDir, name)); err == nil {
		path = filepath.Join(binDir, name)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %s: %v", name, err)
	}
	return r
}
