package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/testing/controlplane"
)

func (n *Node) startKubelet(ctx context.Context, binDir string) error {
	n.bindingName = "tether-real-node-" + n.Name
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: n.bindingName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "system:node:" + n.Name}},
	}
	if _, err := n.client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding the kubelet's identity to system:node: %w", err)
	}
	cfg, err := n.cp.UserConfig("system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	if err := controlplane.WriteKubeconfig(n.path("kubelet/kubeconfig"), cfg); err != nil {
		return err
	}
	n.clientCAFile = filepath.Join(n.cp.Dir, "pki", "client-ca.crt")
	port, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	healthz, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	if err := writeFile(n.path("kubelet/config.yaml"), []byte(n.kubeletConfig(port, healthz))); err != nil {
		return err
	}
	if err := n.makeCgroupRoot(); err != nil {
		return err
	}
	p, err := n.start("kubelet", filepath.Join(binDir, "kubelet"), []string{
		"--config=" + n.path("kubelet/config.yaml"),
		"--kubeconfig=" + n.path("kubelet/kubeconfig"),
		"--root-dir=" + n.path("kubelet/root"),
		"--cert-dir=" + n.path("kubelet/pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.gateway.String(),
		"--node-labels=" + Label + "=true",
		"--v=1",
	}, n.path("logs/kubelet.log"))
	if err != nil {
		return err
	}
	n.kubelet = p
	return p.WaitFor(ctx, func(ctx context.Context) bool {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	})
}

// makeCgroupRoot creates the node's cgroup in every hierarchy: the kubelet
// refuses a cgroup root that does not exist.
func (n *Node) makeCgroupRoot() error {
	mounts, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, m := range mounts {
		fi, err := os.Stat(filepath.Join(m, "tasks"))
		if err != nil || fi.IsDir() {
			continue // not a v1 hierarchy
		}
		d := filepath.Join(m, n.cgroupRoot)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("creating cgroup %s: %w", d, err)
		}
		if filepath.Base(m) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(m, f))
				if err == nil {
					_ = os.WriteFile(filepath.Join(d, f), v, 0o644)
				}
			}
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		if err := os.Mkdir(filepath.Join("/sys/fs/cgroup", n.cgroupRoot), 0o755); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return nil
}

func (n *Node) startScheduler(ctx context.Context, binDir string) error {
	port, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	p, err := controlplane.StartProcess("kube-scheduler", filepath.Join(binDir, "kube-scheduler"), []string{
		"--kubeconfig=" + n.cp.Kubeconfig,
		"--authentication-kubeconfig=" + n.cp.Kubeconfig,
		"--authorization-kubeconfig=" + n.cp.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + itoa(port),
		"--leader-elect=false",
		"--profiling=false",
		"--v=0",
	}, n.path("logs/kube-scheduler.log"))
	if err != nil {
		return err
	}
	n.scheduler = p
	return p.WaitFor(ctx, func(ctx context.Context) bool {
		return healthy("https://127.0.0.1:" + itoa(port) + "/healthz")
	})
}
