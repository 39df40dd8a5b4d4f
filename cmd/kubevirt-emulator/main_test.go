package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/testing/controlplane"
)

const vmYAML = `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: demo
  namespace: default
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        devices: {}
      volumes:
      - name: cloudinit
        cloudInitNoCloud:
          userData: "#cloud-config"
`

// TestCommandWithKubectl runs the built command against a real control plane
// and drives it with kubectl: discovery, a VM that starts, a fault from the
// ConfigMap, and clean unregistration on SIGTERM.
func TestCommandWithKubectl(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: needs the control plane (skipped with -short)")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{ControllerManager: true})
	if err != nil {
		if strings.Contains(err.Error(), "make controlplane") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer cp.Stop()

	bin := filepath.Join(t.TempDir(), "kubevirt-emulator")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig", cp.Kubeconfig, "--migration-duration", "500ms")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ready := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if strings.Contains(s.Text(), "serving") {
				ready <- s.Text()
			}
		}
	}()
	select {
	case line := <-ready:
		t.Log(line)
	case <-time.After(time.Minute):
		t.Fatal("emulator did not come up")
	}

	run := func(stdin string, args ...string) (string, error) {
		c := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
		c.Stdin = strings.NewReader(stdin)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, err := run(stdin, args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return out
	}
	if out := must("", "api-resources", "--api-group=subresources.kubevirt.io", "-o", "name"); !strings.Contains(out, "virtualmachineinstances/removevolume") {
		// kubectl hides subresources; the raw discovery document has them.
		if raw := must("", "get", "--raw", "/apis/subresources.kubevirt.io/v1"); !strings.Contains(raw, "virtualmachineinstances/removevolume") {
			t.Fatalf("discovery: %s", raw)
		}
	}
	must(vmYAML, "apply", "-f", "-")
	waitFor(t, func() bool {
		out, err := run("", "get", "vmi", "demo", "-o", "jsonpath={.status.phase}")
		return err == nil && out == "Running"
	})
	// The VM's status follows its VMI's on the next VM sync, as in KubeVirt.
	waitFor(t, func() bool {
		out, err := run("", "get", "vm", "demo")
		return err == nil && strings.Contains(out, "Running")
	})

	// A fault through the ConfigMap, seen by a raw PUT through the apiserver.
	must("", "-n", "kubevirt", "create", "configmap", "kubevirt-emulator-faults", `--from-literal=faults=[{"status":418}]`)
	waitFor(t, func() bool {
		_, err := run("", "-n", "kubevirt", "get", "configmap", "kubevirt-emulator-faults")
		return err != nil
	})
	out, err := run(`{"name":"x"}`, "replace", "--raw", "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/demo/removevolume", "-f", "-")
	if err == nil || !strings.Contains(out, "injected fault") {
		t.Errorf("fault from the ConfigMap: %v %s", err, out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if out, err := run("", "get", "apiservice", "v1.subresources.kubevirt.io"); err == nil {
		t.Errorf("APIService still registered after exit: %s", out)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 20s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
