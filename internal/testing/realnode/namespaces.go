package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tether-dev/tether/internal/testing/controlplane"
)

// startInit starts the node's init in a new mount and PID namespace (with
// its own /proc, and every mount private to it, so nothing the node mounts
// reaches the host) and notes its PID as the host sees it.
func (n *Node) startInit(ctx context.Context) error {
	tar, err := buildPauseImage(ctx, n.Dir)
	if err != nil {
		return err
	}
	n.pauseTar = tar
	if err := os.MkdirAll(n.path("logs"), 0o700); err != nil {
		return err
	}
	p, err := controlplane.StartProcess("node-init", "unshare", []string{"--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private",
		filepath.Join(n.Dir, "pause")}, n.path("logs/init.log"))
	if err != nil {
		return err
	}
	n.init = p
	return p.WaitFor(ctx, func(context.Context) bool {
		pid := n.findInit()
		if pid == 0 {
			return false
		}
		n.initPID = pid
		return true
	})
}

// findInit is the PID of the pause program that unshare forked, read from
// the host's /proc: the process whose command is the node's pause binary.
func (n *Node) findInit() int {
	out, err := exec.Command("pgrep", "-f", "-x", filepath.Join(n.Dir, "pause")).Output()
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			return pid
		}
	}
	return 0
}

// start runs a program of the node: in the node's namespaces when it has
// them (nsenter forks it there; the process group still reaches it).
func (n *Node) start(name, bin string, args []string, logPath string) (*controlplane.Process, error) {
	if n.initPID == 0 {
		return controlplane.StartProcess(name, bin, args, logPath)
	}
	return controlplane.StartProcess(name, "nsenter", append([]string{"--target", strconv.Itoa(n.initPID), "--mount", "--pid", "--", bin}, args...), logPath)
}

// InNamespaces runs a command in the node's mount and PID namespaces (on
// the host when the node has none of its own) and returns its output.
func (n *Node) InNamespaces(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if n.initPID != 0 {
		cmd = exec.CommandContext(ctx, "nsenter", append([]string{"--target", strconv.Itoa(n.initPID), "--mount", "--pid", "--", name}, args...)...)
	}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s on the node: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}
