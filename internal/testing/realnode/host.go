package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cniBinDir is where Debian's containernetworking-plugins installs them.
const cniBinDir = "/usr/lib/cni"

// hostPrograms are the node's parts that come from Debian
// (apt-get install containerd runc containernetworking-plugins iptables).
var hostPrograms = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "iptables", "ip"}

// Supported says why this host cannot run a real node, or nil when it can:
// the node needs root (mounts, network namespaces, cgroups), cgroups, and
// containerd, runc, the CNI plugins and iptables from Debian.
func Supported() error {
	if os.Geteuid() != 0 {
		return errors.New("the real node needs root (containerd, mounts, network namespaces)")
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		if _, err2 := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err2 != nil {
			return errors.New("the real node needs cgroups: none are mounted at /sys/fs/cgroup")
		}
	}
	var missing []string
	for _, p := range hostPrograms {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the real node needs %s: run `hack/node.sh --host` (apt-get install containerd runc containernetworking-plugins iptables)", strings.Join(missing, ", "))
	}
	return nil
}

// sysctl is one kernel setting as the node found it.
type sysctl struct{ path, was string }

// recordSysctl remembers the current value of a /proc/sys setting, so that
// stop can put it back after the CNI plugins or the node changed it.
func (n *Node) recordSysctl(name string) {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
	data, err := os.ReadFile(path)
	if err != nil {
		return // not on this kernel (a module not loaded): nothing to restore
	}
	n.sysctls = append(n.sysctls, sysctl{path: path, was: strings.TrimSpace(string(data))})
}

// restoreSysctls writes back every recorded setting that changed.
func (n *Node) restoreSysctls() {
	for _, s := range n.sysctls {
		now, err := os.ReadFile(s.path)
		if err == nil && strings.TrimSpace(string(now)) == s.was {
			continue
		}
		if err := os.WriteFile(s.path, []byte(s.was+"\n"), 0o644); err != nil {
			n.warnf("restoring %s to %s: %v", s.path, s.was, err)
		}
	}
	n.sysctls = nil
}

// run runs a host command, naming it and its output on failure.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// unmountUnder detaches every mount below dir, deepest first: the kubelet's
// volumes, containerd's snapshots and rootfs mounts, the network namespaces.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// killCgroupProcs kills every process left in the node's cgroups (a pause
// process whose sandbox the CRI could not stop, say): they are this node's
// by construction. It returns how many it killed.
func killCgroupProcs(root string) int {
	if root == "" {
		return 0
	}
	killed := map[int]bool{}
	mounts, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, m := range append(mounts, "/sys/fs/cgroup") {
		_ = filepath.WalkDir(filepath.Join(m, root), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 && !killed[pid] {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					killed[pid] = true
				}
			}
			return nil
		})
	}
	return len(killed)
}

// removeCgroups removes the node's cgroup tree (cgroupRoot) from every
// hierarchy, children first. The kubelet and containerd leave it once
// their pods are gone.
func removeCgroups(root string) error {
	if root == "" {
		return nil
	}
	if killCgroupProcs(root) > 0 {
		time.Sleep(500 * time.Millisecond) // let the kernel reap them
	}
	mounts, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	mounts = append(mounts, "/sys/fs/cgroup") // cgroup v2: one hierarchy
	var errs []error
	for _, m := range mounts {
		top := filepath.Join(m, root)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// shimPIDs are the containerd shims serving this node's containerd (their
// command line names its socket), which outlive containerd itself.
func shimPIDs(socket string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "containerd-shim-runc-v2") && slices.Contains(args, socket) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// fixedHostDirs are the host paths the node's parts use whatever they are
// told: the kubelet's device-plugin socket and container-log links,
// libcni's result cache, the shims' socket directory. Nodes share them.
var fixedHostDirs = []string{"/var/lib/kubelet", "/var/lib/cni", "/var/log/containers", "/run/containerd"}

// runningDir keeps, host-wide, one file per running node (nodes/) and the
// fixed host directories that some node made (made): the last node to
// stop removes those, so that no node pulls them from under another.
const runningDir = "/run/tether-realnode"

// recordFixedDirs marks this node running and notes which of
// fixedHostDirs are missing before it starts.
func (n *Node) recordFixedDirs() {
	if err := os.MkdirAll(filepath.Join(runningDir, "nodes"), 0o700); err != nil {
		n.warnf("%v", err)
		return
	}
	n.marker = filepath.Join(runningDir, "nodes", filepath.Base(n.Dir))
	_ = os.WriteFile(n.marker, []byte(n.Dir+"\n"), 0o600)
	var made []string
	for _, d := range fixedHostDirs {
		if _, err := os.Lstat(d); os.IsNotExist(err) {
			made = append(made, d+"\n")
		}
	}
	if len(made) > 0 {
		f, err := os.OpenFile(filepath.Join(runningDir, "made"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			_, _ = f.WriteString(strings.Join(made, ""))
			_ = f.Close()
		}
	}
}

// removeMadeDirs, on the last node's Stop, removes the fixed host
// directories that nodes made, when they hold nothing but directories and
// sockets.
func (n *Node) removeMadeDirs() {
	if n.marker == "" {
		return
	}
	_ = os.Remove(n.marker)
	n.marker = ""
	if others, _ := os.ReadDir(filepath.Join(runningDir, "nodes")); len(others) > 0 {
		return // another node still uses them
	}
	data, _ := os.ReadFile(filepath.Join(runningDir, "made"))
	for _, d := range strings.Fields(string(data)) {
		if !slices.Contains(fixedHostDirs, d) {
			continue
		}
		if onlyDirsAndSockets(d) {
			if err := os.RemoveAll(d); err != nil {
				n.warnf("removing %s: %v", d, err)
			}
		} else {
			n.warnf("leaving %s: it holds files the node did not make", d)
		}
	}
	_ = os.RemoveAll(runningDir)
}

// kubeletCheckpoint is the device manager's record of its plugins, which
// the kubelet writes once a device plugin (virt-handler's) registers.
const kubeletCheckpoint = "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"

func onlyDirsAndSockets(dir string) bool {
	ok := true
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !d.IsDir() && d.Type()&os.ModeSocket == 0 && path != kubeletCheckpoint {
			ok = false
		}
		return nil
	})
	return ok
}

// cniResultsDir is libcni's cache of ADD results (fixed in containerd 1.6).
const cniResultsDir = "/var/lib/cni/results"

// removeCNIResults removes libcni's cached results of the node's sandboxes
// (the CRI removes them on a sandbox's teardown, which may not have run).
func (n *Node) removeCNIResults() {
	sandboxes, _ := os.ReadDir(n.path("containerd/root/io.containerd.grpc.v1.cri/sandboxes"))
	results, _ := os.ReadDir(cniResultsDir)
	for _, s := range sandboxes {
		for _, r := range results {
			if strings.Contains(r.Name(), "-"+s.Name()+"-") {
				_ = os.Remove(filepath.Join(cniResultsDir, r.Name()))
			}
		}
	}
}
