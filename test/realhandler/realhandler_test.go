// Package realhandler runs tether against KubeVirt that is real end to end:
// virt-api and virt-controller v1.9.0 as processes, and on a real node
// (kubelet, containerd, runc) real virt-handler from the DaemonSet
// virt-operator renders, whose launcher pods boot a tiny guest under QEMU's
// software emulation (see realkubevirt.StartRealHandler). Hot-plugs here
// are mounted by virt-handler and attached by libvirt; the guest reports on
// its serial console which disks it sees. The oracles are the guest's own
// word and KubeVirt's, never tether's code.
package realhandler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/testing/cmdtest"
	"github.com/tether-dev/tether/internal/testing/kvtest"
	"github.com/tether-dev/tether/internal/testing/localenv"
	"github.com/tether-dev/tether/internal/testing/realkubevirt"
	"github.com/tether-dev/tether/internal/testing/realnode"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

var (
	unsupported error
	binDir      string
)

func TestMain(m *testing.M) {
	if unsupported = realnode.Supported(); unsupported == nil {
		_, unsupported = realkubevirt.NodeBuild()
	}
	if unsupported != nil {
		os.Exit(m.Run())
	}
	dir, err := cmdtest.Build()
	if err != nil {
		panic(err)
	}
	binDir = dir
	defer os.RemoveAll(dir)
	testenv.Main(m, testenv.Options{RealHandler: true, KubeVirt: localenv.KubeVirtReal, Nodes: []string{"node-1"}, Tenants: []string{"guest"}})
}

func tether(t *testing.T, env *testenv.Env, args ...string) cmdtest.Result {
	t.Helper()
	return kvtest.Tether(t, binDir, env, args...)
}

// get returns the world, skipping with one line where no real node can run.
func get(t *testing.T) *testenv.Env {
	t.Helper()
	if unsupported != nil {
		t.Skip(unsupported)
	}
	return testenv.Get(t)
}

// podLogs returns the container logs of the pods whose names start with
// prefix, read from the node's log directory (kept after the pod is gone),
// for a failure message.
func podLogs(env *testenv.Env, namespace, prefix string) string {
	files, _ := filepath.Glob(filepath.Join(env.Node.LogDir(), "pods", namespace+"_"+prefix+"*", "*", "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "--- %s (last %d of %d lines)\n%s\n", strings.TrimPrefix(f, env.Node.LogDir()+"/pods/"), min(40, len(lines)), len(lines), strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	return b.String()
}
