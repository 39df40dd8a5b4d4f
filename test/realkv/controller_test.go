package realkv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// tether controller on real KubeVirt, with the orphan check on and no
// grace: it removes the standalone VMI's orphan through the VMI route, and
// leaves alone the VM-owned hot-plug kept by a stopped declarative sync,
// which no API call could remove.
func TestReal_controller_actsOnlyWhereKubeVirtAllows(t *testing.T) {
	w := newWorld(t)
	w.claims("pvc-orphan", "pvc-stuck")
	w.standaloneVMI("solo")
	w.hotplug(virtapi.VMI, "solo", "pvc-orphan")
	w.vm("owned")
	w.hotplug(virtapi.VM, "owned", "pvc-stuck")
	w.PatchVM("owned", `{"spec":{"updateVolumesStrategy":"Migration"}}`)
	w.removeFromVM("owned", "pvc-stuck")
	// One tenant node per VMI; both claims have tenant PVs attached nowhere.
	tenant(t, w.Env, w.NS, "solo", "pvc-orphan", "pvc-stuck")

	if out, err := w.Env.Kubectl(t, "apply", "-f", crdPath(t)); err != nil {
		t.Fatalf("installing the Finding CRD: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	writeFile(t, cfg, fmt.Sprintf(`apiVersion: tether.dev/v1alpha1
kind: ControllerConfig
checks:
  OrphanHotplugVolume: {enabled: true, gracePeriod: 0s}
scope:
  namespaces: [%s]
tenants:
- name: guest
  kubeconfig: %s
  namespace: %s
`, w.NS, w.Env.Tenants["guest"].Kubeconfig, w.NS))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "tether"), "controller",
		"--kubeconfig", w.Env.Infra.Kubeconfig, "--config", cfg, "--allow-second-controller")
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+w.NS)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.String())
		}
	}()
	testenv.Eventually(t, 90*time.Second, "the controller removes the standalone VMI's orphan", func() (bool, error) {
		return w.Phase("solo", "pvc-orphan") == "", nil
	})
	// It had as long to act on the held one; it must still be there.
	time.Sleep(5 * time.Second)
	if p := w.Phase("owned", "pvc-stuck"); p != kubevirtv1.VolumeReady {
		t.Fatalf("the controller changed a hot-plug held by DeclarativeSync: phase %q", p)
	}
	held := false
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, `"pvc-stuck"`) {
			continue
		}
		if strings.Contains(line, `"acting"`) || strings.Contains(line, `"action finished"`) {
			t.Fatalf("the controller acted on pvc-stuck: %s", line)
		}
		held = held || strings.Contains(line, `"blockedBy":"DeclarativeSync"`)
	}
	if !held {
		t.Fatalf("the controller never recorded pvc-stuck as held by DeclarativeSync")
	}
}

func crdPath(t *testing.T) string {
	p, err := filepath.Abs(filepath.Join("..", "..", "config", "crd", "tether.dev_findings.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, path, data string) {
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
