// Package envcmd tests `tether-env up/down`, the commands behind
// `make env-up` and `make env-down`: the environment comes up in the
// background, kubectl works against it, and down leaves no process behind.
package envcmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func build(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(t.TempDir(), "tether-env")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/tether-env")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building tether-env: %v\n%s", err, out)
	}
	return bin
}

// processesUsing lists pids whose command line mentions dir.
func processesUsing(dir string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), dir) {
			pids = append(pids, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return pids
}

func TestUpKubectlDown_noProcessLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	bin := build(t)
	dir := filepath.Join(t.TempDir(), "env")
	defer exec.Command(bin, "down", "--dir", dir).Run() // on failure paths

	out, err := exec.Command(bin, "up", "--dir", dir).Output()
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if !strings.Contains(string(out), "export KUBECONFIG="+kc) {
		t.Fatalf("up did not print the export line: %q", out)
	}
	// up again is harmless and says it runs.
	if out, err := exec.Command(bin, "up", "--dir", dir).CombinedOutput(); err != nil || !strings.Contains(string(out), "already running") {
		t.Fatalf("second up: %v\n%s", err, out)
	}
	got, err := exec.Command(kubectl, "--kubeconfig", kc, "get", "vmis", "-A").CombinedOutput()
	if err != nil || !strings.Contains(string(got), "No resources found") {
		t.Fatalf("kubectl get vmis -A: %v\n%s", err, got)
	}
	got, err = exec.Command(kubectl, "--kubeconfig", kc, "get", "apiservice", "v1.subresources.kubevirt.io", "-o", "jsonpath={.status.conditions[0].status}").CombinedOutput()
	if err != nil || string(got) != "True" {
		t.Fatalf("aggregated KubeVirt API not available: %v %q", err, got)
	}
	if len(processesUsing(dir)) == 0 {
		t.Fatal("no environment processes found while up")
	}
	if out, err := exec.Command(bin, "down", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if left := processesUsing(dir); len(left) > 0 {
		t.Fatalf("processes left after down:\n%s", strings.Join(left, "\n"))
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("state directory left after down")
	}
}
