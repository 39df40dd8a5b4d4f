package realnode_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/tether-dev/tether/internal/testing/controlplane"
	"github.com/tether-dev/tether/internal/testing/realnode"
)

// TestNodeRunsAPodAndLeavesTheHostAsItFoundIt: a pod scheduled by the real
// kube-scheduler runs on the node as real containers (sandbox and a
// container from the node's own pause image), gets an address on the
// node's bridge, reaches Ready; after Stop, nothing of the node is left on
// the host: no mounts, no bridge, no DNAT rule, no cgroup, no directory,
// and ip_forward is as it was. The same after a start that fails.
func TestNodeRunsAPodAndLeavesTheHostAsItFoundIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and a real node")
	}
	if err := realnode.Supported(); err != nil {
		t.Skip(err)
	}
	forward := readFile(t, "/proc/sys/net/ipv4/ip_forward")
	// Host directories the kubelet, libcni and the shims make, and the
	// nodes' own register (the test expects no other node running).
	var madeDirs []string
	for _, d := range []string{"/var/lib/kubelet", "/var/lib/cni", "/var/log/containers", "/run/containerd", "/run/tether-realnode"} {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			madeDirs = append(madeDirs, d)
		}
	}
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{ControllerManager: true, ServiceAccountAdmission: true, Controllers: realnode.Controllers()})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	t0 := time.Now()
	n, err := realnode.Start(ctx, cp, realnode.Options{Scheduler: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node ready in %s", time.Since(t0).Round(time.Millisecond))
	dir, bridge, cgroup := n.Dir, n.Bridge(), n.CgroupRoot()
	defer n.Stop()

	cs, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "pause", Image: realnode.PauseImage, ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, ReadOnlyRootFilesystem: ptr.To(true)},
			}},
		},
	}
	waitForServiceAccount(t, cs, "default")
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "sleeper", metav1.GetOptions{})
		if err == nil && p.Spec.NodeName == n.Name && p.Status.PodIP != "" && ready(p) {
			if !strings.HasPrefix(p.Status.PodIP, "10.88.") {
				t.Fatalf("pod IP %s is not on the node's bridge", p.Status.PodIP)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod not Ready on %s in time: %+v (kubelet log: %s/logs/kubelet.log)", n.Name, p.Status, dir)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("pod Ready in %s after the node", time.Since(t0).Round(time.Millisecond))

	n.Stop()
	checkLeftNothing(t, forward, dir, bridge, cgroup)
	for _, d := range madeDirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left after Stop", d)
		}
	}

	// A start that fails after the network, containerd and the cgroup
	// root were made (a kubelet that exits at once) undoes them too.
	bad := t.TempDir()
	for _, b := range []string{"kubelet", "kube-scheduler"} {
		if err := os.WriteFile(filepath.Join(bad, b), []byte("#!/bin/sh\necho broken on purpose >&2\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var started []any
	logf := func(format string, args ...any) {
		if strings.HasPrefix(format, "realnode: starting") {
			started = args
		}
		t.Logf(format, args...)
	}
	_, err = realnode.Start(ctx, cp, realnode.Options{Name: "broken", BinDir: bad, Logf: logf})
	if err == nil || !strings.Contains(err.Error(), "broken on purpose") {
		t.Fatalf("Start with a kubelet that exits: %v, want the kubelet's log in the error", err)
	}
	if len(started) != 4 {
		t.Fatalf("Start did not say where it started (%v)", started)
	}
	checkLeftNothing(t, forward, started[1].(string), started[2].(string), started[3].(string))
}

// checkLeftNothing: nothing of the node with directory dir, bridge and
// cgroup is left on the host, and ip_forward is as it was.
func checkLeftNothing(t *testing.T, forward, dir, bridge, cgroup string) {
	t.Helper()
	if got := readFile(t, "/proc/sys/net/ipv4/ip_forward"); got != forward {
		t.Errorf("net.ipv4.ip_forward is %s after Stop, was %s", got, forward)
	}
	if mounts := readFile(t, "/proc/self/mountinfo"); strings.Contains(mounts, dir) {
		t.Errorf("mounts under %s left after Stop", dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left after Stop", dir)
	}
	if out, _ := exec.Command("ip", "link", "show", bridge).CombinedOutput(); !strings.Contains(string(out), "does not exist") {
		t.Errorf("bridge %s left after Stop: %s", bridge, out)
	}
	if out, _ := exec.Command("iptables", "-w", "-t", "nat", "-S", "PREROUTING").CombinedOutput(); strings.Contains(string(out), bridge) {
		t.Errorf("DNAT rule of %s left after Stop:\n%s", bridge, out)
	}
	if out, _ := exec.Command("sh", "-c", "ls -d /sys/fs/cgroup/*"+cgroup+" 2>/dev/null").CombinedOutput(); len(out) > 0 {
		t.Errorf("cgroups left after Stop:\n%s", out)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitForServiceAccount waits for the serviceaccount controller to create
// a namespace's "default" account (admission refuses pods until then).
func waitForServiceAccount(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	for i := 0; i < 300; i++ {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no default ServiceAccount in %s", ns)
}
