package realkubevirt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/testing/controlplane"
	"github.com/tether-dev/tether/internal/testing/realnode"
)

// EnvNodeDir names the directory hack/kubevirt-node.sh prints (bin/,
// images/, manifests/); when unset, StartRealHandler asks
// hack/kubevirt-node.sh --verify.
const EnvNodeDir = "TETHER_KUBEVIRT_NODE_DIR"

// Images of the real node's KubeVirt, as hack/kubevirt-node/images.sh
// names them (the tag is the KubeVirt version).
const (
	handlerImage     = "tether.local/kubevirt/virt-handler"
	launcherImage    = "tether.local/kubevirt/virt-launcher"
	GuestKernelImage = "tether.local/kubevirt/guest-kernel"
)

// hostDirs are the host paths virt-handler's DaemonSet and the launcher
// pods name whatever the node's kubelet is told (daemonsets.go of the
// install strategy): one virt-handler per host can use them, so a host
// runs one real handler node.
var hostDirs = []string{"/run/kubevirt", "/run/kubevirt-private", "/run/kubevirt-libvirt-runtimes", "/var/lib/kubevirt-node-labeller"}

// RealHandlerLabel marks the pods of the real virt-handler DaemonSet.
const RealHandlerLabel = "realkubevirt.tether.dev/real-handler"

// devicePlugins is the kubelet's device-plugin directory, whatever its root.
const devicePlugins = "/var/lib/kubelet/device-plugins"

// sharedDir is virt-handler's Bidirectional mount: its source must be a
// shared mount, and the host's / is private, so it is made a shared bind
// mount of itself in the node's mount namespace (realnode.Options.OwnNamespaces).
const sharedDir = "/run/kubevirt"

// RealHandler is real virt-handler running on a real node, from the
// DaemonSet virt-operator renders; its launcher pods boot guests under
// QEMU's software emulation.
type RealHandler struct {
	// Node is the real node it runs on.
	Node *realnode.Node
	// Home is the build directory (bin/, images/, manifests/).
	Home string
	// GuestKernel is the kernel-boot image of the tiny guest
	// (/boot/vmlinuz, /boot/initrd.img), when the build has one.
	GuestKernel string

	kv   *KubeVirt
	made []string
}

// StartRealHandler runs real virt-handler on node: it imports the launcher,
// handler and guest kernel images into the node's containerd, turns on
// KubeVirt's useEmulation (guests run under QEMU's TCG; /dev/kvm never
// reaches a launcher), creates the DaemonSet virt-operator would with the
// node's kubelet paths, and waits until virt-handler has marked the node
// schedulable. home is the build directory; empty: $TETHER_KUBEVIRT_NODE_DIR,
// then hack/kubevirt-node.sh --verify. Claims provisioned from then on get
// a disk.img (see provisionPass). Stop undoes the host changes.
func (k *KubeVirt) StartRealHandler(ctx context.Context, node *realnode.Node, home string) (h *RealHandler, err error) {
	home, err = findNodeHome(home)
	if err != nil {
		return nil, err
	}
	h = &RealHandler{Node: node, Home: home, kv: k}
	defer func() {
		if err != nil {
			h.Stop()
			h = nil
		}
	}()
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"host directories", h.prepareHost},
		{"images", h.importImages},
		{"emulation", k.useEmulation},
		{"DaemonSet", h.createDaemonSet},
		{"node schedulable", h.waitSchedulable},
	}
	for _, s := range steps {
		t0 := time.Now()
		if err := s.run(ctx); err != nil {
			return h, fmt.Errorf("real virt-handler: %s: %w", s.name, err)
		}
		fmt.Fprintf(os.Stderr, "realkubevirt: real virt-handler: %s in %s\n", s.name, time.Since(t0).Round(time.Millisecond))
	}
	pv := filepath.Join(k.o.Dir, "pv")
	k.diskImages.Store(&pv)
	k.closers = append(k.closers, closerFunc(h.Stop))
	return h, nil
}

type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }

// NodeBuild is the build directory StartRealHandler would use, or why there
// is none (the suites on a real handler skip with it).
func NodeBuild() (string, error) { return findNodeHome("") }

func findNodeHome(explicit string) (string, error) {
	dir := explicit
	if dir == "" {
		dir = os.Getenv(EnvNodeDir)
	}
	if dir == "" {
		script, err := controlplane.FindScript("kubevirt-node.sh")
		if err != nil {
			return "", fmt.Errorf("%w; set %s", err, EnvNodeDir)
		}
		out, err := exec.Command(script, "--verify").Output()
		if err != nil {
			return "", fmt.Errorf("KubeVirt's node side is not built for this checkout: run make kubevirt-node as root (about 7 minutes cold), or set %s", EnvNodeDir)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, f := range []string{"images/virt-launcher.tar", "images/virt-handler.tar", "manifests/virt-handler.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("KubeVirt node build %s lacks %s: run make kubevirt-node as root to rebuild it (or fix %s)", dir, f, EnvNodeDir)
		}
	}
	return dir, nil
}

// prepareHost makes the host directories the DaemonSet names, refusing a
// host where a virt-handler already runs, and makes sharedDir a shared
// mount.
func (h *RealHandler) prepareHost(ctx context.Context) error {
	if out, _ := exec.Command("pgrep", "-x", "virt-handler").Output(); len(strings.TrimSpace(string(out))) > 0 {
		return fmt.Errorf("a virt-handler already runs on this host (pid %s): one real handler node per host, since both would use %s", strings.TrimSpace(string(out)), strings.Join(hostDirs, ", "))
	}
	for _, d := range hostDirs {
		if _, err := os.Lstat(d); err == nil {
			// Left by a world that did not stop: nothing runs there (above).
			if err := removeHostDir(d); err != nil {
				return fmt.Errorf("%s is left from an earlier run and cannot be removed: %w", d, err)
			}
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		h.made = append(h.made, d)
	}
	// In the node's mount namespace: nothing of it reaches the host.
	_, err := h.Node.InNamespaces(ctx, "sh", "-c", "mount --bind "+sharedDir+" "+sharedDir+" && mount --make-rshared "+sharedDir)
	return err
}

// removeHostDir unmounts everything under d, deepest first, and removes it.
func removeHostDir(d string) error {
	out, _ := exec.Command("findmnt", "-rn", "-o", "TARGET").Output()
	var under []string
	for _, m := range strings.Split(string(out), "\n") {
		if m == d || strings.HasPrefix(m, d+"/") {
			under = append(under, m)
		}
	}
	for i := len(under) - 1; i >= 0; i-- {
		if err := run("umount", "-l", under[i]); err != nil {
			return err
		}
	}
	return os.RemoveAll(d)
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Stop removes the host directories and the shared mount. The node's pods
// must be gone first (realnode.Node.Stop).
func (h *RealHandler) Stop() {
	if h == nil {
		return
	}
	for i := len(h.made) - 1; i >= 0; i-- {
		if err := removeHostDir(h.made[i]); err != nil {
			fmt.Fprintf(os.Stderr, "realkubevirt: removing %s: %v\n", h.made[i], err)
		}
	}
	h.made = nil
}

// importImages loads the images into the node and names the launcher image
// as virt-controller renders it (its --launcher-image), so launcher and
// attachment pods find it without a registry.
func (h *RealHandler) importImages(ctx context.Context) error {
	for _, name := range []string{"virt-launcher", "virt-handler", "guest-kernel"} {
		tar := filepath.Join(h.Home, "images", name+".tar")
		if _, err := os.Stat(tar); err != nil && name == "guest-kernel" {
			continue // an older build: guests boot nothing
		}
		if err := h.Node.Import(ctx, tar); err != nil {
			return err
		}
		if name == "guest-kernel" {
			h.GuestKernel = GuestKernelImage + ":" + h.kv.Version
		}
	}
	return h.Node.Tag(ctx, launcherImage+":"+h.kv.Version, h.kv.LauncherImage())
}

// LauncherImage is the launcher image virt-controller renders into launcher
// and attachment pods.
func (k *KubeVirt) LauncherImage() string { return "quay.io/kubevirt/virt-launcher:" + k.Version }

// useEmulation sets developerConfiguration.useEmulation in the KubeVirt CR:
// launcher pods then never ask for /dev/kvm and libvirt runs guests under
// TCG (renderresources.go; the host's /dev/kvm hangs guests).
//
// It also turns KubeVirt's ImageVolume gate off: with it, virt-controller
// mounts container disks and kernel-boot images as Kubernetes image
// volumes, which Debian 12's containerd 1.6 cannot make; without it they
// come from container-disk containers, as before the gate.
func (k *KubeVirt) useEmulation(ctx context.Context) error {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(kubeVirtGVK)
	if err := k.ctrl.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: "kubevirt"}, cr); err != nil {
		return err
	}
	off, _, _ := unstructured.NestedStringSlice(cr.Object, "spec", "configuration", "developerConfiguration", "disabledFeatureGates")
	if !slices.Contains(off, "ImageVolume") {
		off = append(off, "ImageVolume")
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"configuration": map[string]any{"developerConfiguration": map[string]any{
		"useEmulation": true, "disabledFeatureGates": off,
	}}}})
	if err != nil {
		return err
	}
	return k.ctrl.Patch(ctx, cr, client.RawPatch(types.MergePatchType, patch))
}

// createDaemonSet creates the PriorityClass virt-operator creates and the
// rendered virt-handler DaemonSet, adapted to the node: the local images,
// the kubelet's root and pods directories (the same paths inside the
// container as on the host, and virt-handler told them), the node alone.
func (h *RealHandler) createDaemonSet(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(h.Home, "manifests", "virt-handler.yaml"))
	if err != nil {
		return err
	}
	ds := &appsv1.DaemonSet{}
	if err := yaml.UnmarshalStrict([]byte(strings.TrimPrefix(strings.TrimSpace(string(data)), "---")), ds); err != nil {
		return fmt.Errorf("the rendered DaemonSet: %w", err)
	}
	if err := adaptHandler(ds, h.Node, h.kv.Version); err != nil {
		return err
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ds.Spec.Template.Spec.PriorityClassName}, Value: 1000000000,
		Description: "This priority class should be used for KubeVirt core components only."}
	if pc.Name != "" {
		if _, err := h.kv.client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	_, err = h.kv.client.AppsV1().DaemonSets(Namespace).Create(ctx, ds, metav1.CreateOptions{})
	return err
}

// adaptHandler changes the rendered DaemonSet for the node; nothing else.
func adaptHandler(ds *appsv1.DaemonSet, node *realnode.Node, version string) error {
	spec := &ds.Spec.Template.Spec
	spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node.Name}
	// The emulated handler's pods on the kwok nodes carry the same
	// kubevirt.io label: a selector of its own keeps the DaemonSet
	// controller from adopting them and deleting them (they are on nodes
	// the DaemonSet does not select), which would void their tokens.
	if ds.Spec.Selector == nil || ds.Spec.Selector.MatchLabels == nil {
		return errors.New("the rendered DaemonSet has no selector labels")
	}
	ds.Spec.Selector.MatchLabels[RealHandlerLabel] = "true"
	ds.Spec.Template.Labels[RealHandlerLabel] = "true"
	root := node.KubeletRoot()
	pods := filepath.Join(root, "pods")
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		switch v.Name {
		case "kubelet":
			v.HostPath.Path = root
		case "kubelet-pods":
			v.HostPath.Path = pods
		}
		// /var/run is a link to /run on Debian; the runtime checks a
		// Bidirectional source's propagation by its path, unresolved.
		if v.HostPath != nil && strings.HasPrefix(v.HostPath.Path, "/var/run/") {
			v.HostPath.Path = strings.TrimPrefix(v.HostPath.Path, "/var")
		}
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "device-plugins",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: devicePlugins}}})
	found := false
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.Name != "virt-handler" {
			continue
		}
		found = true
		c.Image, c.ImagePullPolicy = handlerImage+":"+version, corev1.PullNever
		c.Args = append(c.Args, "--kubelet-root", root, "--kubelet-pods-dir", pods)
		for j := range c.VolumeMounts {
			if c.VolumeMounts[j].Name == "kubelet" {
				c.VolumeMounts[j].MountPath = root
			}
		}
		// The kubelet's device-plugin directory is fixed, whatever its
		// root (realnode's fixed host directories): virt-handler registers
		// its plugins (kvm, tun, vhost-net) there, under the default root.
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "device-plugins", MountPath: devicePlugins})
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		c.Image, c.ImagePullPolicy = launcherImage+":"+version, corev1.PullNever
		// The node labeller (node-labeller.sh) is privileged: it would make
		// the host's /dev/kvm world-writable and probe libvirt for KVM,
		// which hangs guests here. Its documented overrides point it at a
		// device the host lacks and at TCG.
		c.Env = setEnv(c.Env, "HYPERVISOR_DEVICE", "tether-no-kvm")
		c.Env = setEnv(c.Env, "PREFERRED_VIRTTYPE", "qemu")
	}
	if !found {
		return errors.New("the rendered DaemonSet has no virt-handler container")
	}
	return nil
}

// waitSchedulable waits until virt-handler runs on the node and has
// labelled it kubevirt.io/schedulable=true (its node labeller and
// heartbeat), as virt-controller requires of a node for launcher pods.
func (h *RealHandler) waitSchedulable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	for {
		n, err := h.kv.client.CoreV1().Nodes().Get(ctx, h.Node.Name, metav1.GetOptions{})
		if err == nil && n.Labels["kubevirt.io/schedulable"] == "true" {
			return nil
		}
		if why := h.failing(ctx); why != "" {
			return fmt.Errorf("virt-handler cannot start on node %s: %s", h.Node.Name, why)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("virt-handler did not mark node %s schedulable: %s", h.Node.Name, h.describe(context.Background()))
		case <-time.After(time.Second):
		}
	}
}

// describe says where virt-handler's pod is, for an error.
func (h *RealHandler) describe(ctx context.Context) string {
	pods, err := h.kv.client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: RealHandlerLabel + "=true"})
	if err != nil || len(pods.Items) == 0 {
		return fmt.Sprintf("no virt-handler pod (%v); the DaemonSet controller must run", err)
	}
	p := pods.Items[0]
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s phase %s", p.Name, p.Status.Phase)
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, "; %s ready=%v restarts=%d", s.Name, s.Ready, s.RestartCount)
		if w := s.State.Waiting; w != nil {
			fmt.Fprintf(&b, " waiting %s: %s", w.Reason, w.Message)
		}
		if t := s.LastTerminationState.Terminated; t != nil {
			fmt.Fprintf(&b, " last exit %d %s", t.ExitCode, t.Message)
		}
	}
	if logs, _ := filepath.Glob(filepath.Join(h.Node.LogDir(), "pods", Namespace+"_"+p.Name+"_*", "virt-handler", "*.log")); len(logs) > 0 {
		if data, err := os.ReadFile(logs[len(logs)-1]); err == nil {
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			var bad []string
			for _, l := range lines {
				if strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"warning"`) {
					bad = append(bad, l)
				}
			}
			fmt.Fprintf(&b, "; virt-handler's last errors and warnings:\n%s", strings.Join(bad[max(0, len(bad)-12):], "\n"))
		}
	}
	return b.String() + "; node logs: " + h.Node.LogDir()
}

func setEnv(env []corev1.EnvVar, name, value string) []corev1.EnvVar {
	for i := range env {
		if env[i].Name == name {
			env[i].Value, env[i].ValueFrom = value, nil
			return env
		}
	}
	return append(env, corev1.EnvVar{Name: name, Value: value})
}

// failing says why virt-handler's pod cannot start, when it cannot: a
// container the runtime refuses, or one that keeps crashing.
func (h *RealHandler) failing(ctx context.Context) string {
	pods, err := h.kv.client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: RealHandlerLabel + "=true"})
	if err != nil {
		return ""
	}
	for _, p := range pods.Items {
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := s.State.Waiting; w != nil && (w.Reason == "CreateContainerError" || w.Reason == "CreateContainerConfigError" || s.RestartCount >= 3) {
				return h.describe(ctx)
			}
		}
	}
	return ""
}

// downLabel, in the DaemonSet's node selector, matches no node: the
// DaemonSet controller then deletes virt-handler's pod, as a crashed or
// evicted virt-handler leaves its node (launchers keep running).
const downLabel = "realkubevirt.tether.dev/handler-down"

// SetDown stops (true) or restarts (false) virt-handler on the node and
// returns once its pod is gone, or back and Ready.
func (h *RealHandler) SetDown(ctx context.Context, down bool) error {
	ds, err := h.kv.client.AppsV1().DaemonSets(Namespace).Get(ctx, "virt-handler", metav1.GetOptions{})
	if err != nil {
		return err
	}
	delete(ds.Spec.Template.Spec.NodeSelector, downLabel)
	if down {
		ds.Spec.Template.Spec.NodeSelector[downLabel] = "true"
	}
	if _, err := h.kv.client.AppsV1().DaemonSets(Namespace).Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		pods, err := h.kv.client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: RealHandlerLabel + "=true"})
		if err == nil && handlerState(pods.Items, down) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("virt-handler did not go %s: %s", map[bool]string{true: "down", false: "up"}[down], h.describe(context.Background()))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// handlerState says whether pods show virt-handler down (none left) or up
// (one, Ready).
func handlerState(pods []corev1.Pod, down bool) bool {
	if down {
		return len(pods) == 0
	}
	if len(pods) != 1 || pods[0].DeletionTimestamp != nil {
		return false
	}
	for _, c := range pods[0].Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Describe says how virt-handler's pod is, with its last errors and
// warnings, for a test's failure message.
func (h *RealHandler) Describe(ctx context.Context) string { return h.describe(ctx) }
