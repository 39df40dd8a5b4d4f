package controlplane

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// fakeBinDir makes a directory of shell scripts standing in for the three
// binaries; body is the script run for etcd.
func fakeBinDir(t *testing.T, etcdBody string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range binaryNames {
		body := "#!/bin/sh\nsleep 60\n"
		if name == "etcd" {
			body = "#!/bin/sh\n" + etcdBody + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestStart_missingBinary_clearError(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(context.Background(), Options{BinDir: dir})
	if err == nil || !strings.Contains(err.Error(), "etcd missing") || !strings.Contains(err.Error(), "make controlplane") {
		t.Fatalf("want a missing-binary error naming the fix, got %v", err)
	}
}

func TestStart_corruptCacheEntry_clearError(t *testing.T) {
	bin := fakeBinDir(t, "exit 0")
	sums := "0000  etcd\n0000  kube-apiserver\n0000  kube-controller-manager\n"
	if err := os.WriteFile(filepath.Join(filepath.Dir(bin), "SHA256SUMS"), []byte(sums), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{BinDir: bin})
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("want a corrupt-cache error, got %v", err)
	}
}

func TestStart_binaryExitsEarly_reportsLogAndHint_noHang(t *testing.T) {
	bin := fakeBinDir(t, `echo "listen tcp 127.0.0.1:2379: bind: address already in use" >&2; exit 1`)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	start := time.Now()
	_, err := Start(context.Background(), Options{BinDir: bin, StartTimeout: 20 * time.Second})
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"etcd exited before it was ready", "address already in use", "hint: a port is already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %s: an early exit must be noticed at once", time.Since(start))
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("state left behind in %s: %v", tmp, left)
	}
}

func TestStart_portInUse_clearError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = Start(context.Background(), Options{BinDir: fakeBinDir(t, "sleep 60"), APIServerPort: port})
	if err == nil || !strings.Contains(err.Error(), "port "+strconv.Itoa(port)+" on 127.0.0.1 is already in use") {
		t.Fatalf("want a port-in-use error, got %v", err)
	}
}

func TestStart_realControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the control-plane binaries")
	}
	ctx := context.Background()
	t0 := time.Now()
	cp, err := Start(ctx, Options{ControllerManager: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane with controller manager ready in %s", time.Since(t0).Round(time.Millisecond))
	dir := cp.Dir
	pids := []int{}
	for _, p := range cp.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	stopped := false
	defer func() {
		if !stopped {
			cp.Stop()
		}
	}()

	// kubectl, a real client, works with the written kubeconfig.
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command(kubectl, "--kubeconfig", cp.Kubeconfig, "get", "ns", "-o", "name").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "namespace/kube-system") {
			t.Fatalf("kubectl get ns: %v\n%s", err, out)
		}
	}

	// RBAC is enforced: an unprivileged user is refused.
	cfg, err := cp.UserConfig("alice")
	if err != nil {
		t.Fatal(err)
	}
	alice := kubernetes.NewForConfigOrDie(cfg)
	_, err = alice.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want forbidden for an unprivileged user, got %v", err)
	}

	// The garbage collector runs: a ConfigMap owned by a deleted one goes away.
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	owner, err := admin.CoreV1().ConfigMaps("default").Create(ctx, configMap("owner"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	child := configMap("child")
	child.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, child, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().ConfigMaps("default").Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := admin.CoreV1().ConfigMaps("default").Get(ctx, "child", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("garbage collector did not remove the dependent: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	cp.Stop()
	stopped = true
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still running after Stop", pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir %s left behind", dir)
	}
}

// PID names a running process of the control plane by its name, and none
// once it has ended or for a name that never ran.
func TestPID_namesRunningProcessesOnly(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command")
	}
	cp := &ControlPlane{Dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(cp.Dir, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := cp.start("etcd", sleep, []string{"60"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cp.PID("etcd"); got == 0 || got != p.cmd.Process.Pid {
		t.Errorf("PID(etcd) = %d, want the running process %d", got, p.cmd.Process.Pid)
	}
	if got := cp.PID("kube-apiserver"); got != 0 {
		t.Errorf("PID(kube-apiserver) = %d with no apiserver started, want 0", got)
	}
	cp.Stop()
	if got := cp.PID("etcd"); got != 0 {
		t.Errorf("PID(etcd) = %d after Stop, want 0", got)
	}
}
