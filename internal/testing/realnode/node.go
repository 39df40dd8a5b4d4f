// Package realnode runs a real Kubernetes node beside the local control
// plane: containerd and runc from Debian, a CNI bridge of its own, and the
// kubelet (with kube-scheduler, so that Deployments' pods are placed as on
// any cluster) built from the same k8s.io/kubernetes module as the control
// plane. Pods on it are real containers; images are imported, never pulled
// (the sandbox image is built here, see ./pause).
//
// Everything the node keeps is in one directory: containerd's root, state
// and sockets, runc's state, the kubelet's root, the CNI configuration and
// address leases, the network namespaces and the logs. What it must change
// on the host it records and undoes on Stop, also after a failed start: a
// bridge and one iptables DNAT rule of its own (pods reach the API server's
// `kubernetes` Service address through a proxy on the bridge, as kube-proxy
// would send them to the API server), the kernel settings the CNI plugins
// change (net.ipv4.ip_forward), its cgroups, its mounts and its processes.
// It must never touch another node's state, nor any address but loopback,
// its bridge and its pod subnet.
package realnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-dev/tether/internal/testing/controlplane"
)

// EnvBinDir names the environment variable that points at a directory
// holding kubelet and kube-scheduler (hack/node.sh prints one).
const EnvBinDir = "TETHER_NODE_BIN"

// Label is set on the real node, so a chart's nodeSelector can pick it.
const Label = "tether.dev/real-node"

// Options configure Start.
type Options struct {
	// Name is the Node's name; default "real-node".
	Name string
	// BinDir holds kubelet and kube-scheduler; empty: $TETHER_NODE_BIN,
	// then the cache entry hack/node.sh reports for this checkout.
	BinDir string
	// Scheduler also starts kube-scheduler against the control plane.
	Scheduler bool
	// StartTimeout bounds the start; default 2 minutes.
	StartTimeout time.Duration
	// Logf receives progress and clean-up warnings; default: none.
	Logf func(format string, args ...any)
	// OwnNamespaces runs containerd, the kubelet and so every pod in a
	// mount and PID namespace of the node's own, whose PID 1 is the node's
	// init (the pause program, which reaps orphans). Pods with hostPID then
	// see that init as PID 1 and enter the node's mount namespace through
	// /proc/1/ns/mnt, as virt-handler does on any host; the host's own PID
	// 1 may be out of reach (a sandbox's init that root may not trace).
	// Mounts made on the node stay in its namespace and vanish with it.
	OwnNamespaces bool
}

// Node is a running real node.
type Node struct {
	Name string
	// Dir holds all of the node's state; Stop removes it.
	Dir string

	cp           *controlplane.ControlPlane
	client       kubernetes.Interface
	logf         func(string, ...any)
	bridge       string
	subnet       *net.IPNet
	gateway      net.IP
	cgroupRoot   string
	clientCAFile string
	natRule      []string
	bridgeMade   bool
	sysctls      []sysctl
	marker       string
	proxy        net.Listener
	exposed      []net.Listener
	containerd   *controlplane.Process
	kubelet      *controlplane.Process
	scheduler    *controlplane.Process
	bindingName  string
	init         *controlplane.Process
	initPID      int // the node's init, as the host sees it
	pauseTar     string
}

// Start brings a node up against cp and returns once its Node is Ready.
// On any error everything it did is undone.
func Start(ctx context.Context, cp *controlplane.ControlPlane, o Options) (n *Node, err error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	if o.Name == "" {
		o.Name = "real-node"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	binDir, err := findBinDir(o.BinDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	client, err := cp.Clientset()
	if err != nil {
		return nil, err
	}
	id := randomHex(3)
	// A short directory: unix socket paths must stay under 108 bytes.
	dir, err := os.MkdirTemp("/tmp", "tnode-")
	if err != nil {
		return nil, err
	}
	n = &Node{Name: o.Name, Dir: dir, cp: cp, client: client, logf: o.Logf,
		bridge: "tnode" + id, cgroupRoot: "/tether-node-" + id}
	if n.logf == nil {
		n.logf = func(string, ...any) {}
	}
	defer func() {
		if err != nil {
			n.Stop()
			n = nil
		}
	}()
	n.logf("realnode: starting %s in %s, bridge %s, cgroup %s", n.Name, n.Dir, n.bridge, n.cgroupRoot)
	n.recordFixedDirs()
	for _, s := range []string{"net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables"} {
		n.recordSysctl(s)
	}
	if err := n.network(ctx); err != nil {
		return n, err
	}
	if o.OwnNamespaces {
		if err := n.startInit(ctx); err != nil {
			return n, err
		}
	}
	if err := n.startContainerd(ctx, binDir); err != nil {
		return n, err
	}
	if err := n.startKubelet(ctx, binDir); err != nil {
		return n, err
	}
	if o.Scheduler {
		if err := n.startScheduler(ctx, binDir); err != nil {
			return n, err
		}
	}
	return n, nil
}

// network makes the node's bridge with the gateway address on a free /24,
// the proxy to the API server on it, the DNAT rule that sends the pods'
// requests to the `kubernetes` Service there, and the CNI configuration.
func (n *Node) network(ctx context.Context) error {
	svc, err := n.client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the kubernetes Service: %w", err)
	}
	if err := n.chooseSubnet(); err != nil {
		return err
	}
	if err := run("ip", "link", "add", "name", n.bridge, "type", "bridge"); err != nil {
		return err
	}
	n.bridgeMade = true
	ones, _ := n.subnet.Mask.Size()
	if err := run("ip", "addr", "add", fmt.Sprintf("%s/%d", n.gateway, ones), "dev", n.bridge); err != nil {
		return err
	}
	if err := run("ip", "link", "set", n.bridge, "up"); err != nil {
		return err
	}
	if err := n.startProxy(); err != nil {
		return err
	}
	port := n.proxy.Addr().(*net.TCPAddr).Port
	svcPort := "443"
	if len(svc.Spec.Ports) > 0 {
		svcPort = itoa(int(svc.Spec.Ports[0].Port))
	}
	rule := []string{"PREROUTING", "-s", n.subnet.String(), "-d", svc.Spec.ClusterIP + "/32", "-p", "tcp", "--dport", svcPort,
		"-m", "comment", "--comment", "tether real node " + n.bridge,
		"-j", "DNAT", "--to-destination", net.JoinHostPort(n.gateway.String(), itoa(port))}
	if err := run("iptables", append([]string{"-w", "-t", "nat", "-I"}, rule...)...); err != nil {
		return err
	}
	n.natRule = rule
	conf, err := n.cniConfig()
	if err != nil {
		return err
	}
	return writeFile(n.path("cni/net.d/10-tether.conflist"), conf)
}

// chooseSubnet picks a 10.88.x.0/24 that no address or route of the host
// uses.
func (n *Node) chooseSubnet() error {
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return fmt.Errorf("ip route: %w", err)
	}
	for i := 0; i < 50; i++ {
		x, _ := rand.Int(rand.Reader, big.NewInt(250))
		prefix := fmt.Sprintf("10.88.%d.", x.Int64()+2)
		if strings.Contains(string(out), prefix) {
			continue
		}
		_, n.subnet, _ = net.ParseCIDR(prefix + "0/24")
		n.gateway = net.ParseIP(prefix + "1").To4()
		return nil
	}
	return errors.New("no free 10.88.x.0/24 for the node's pods: remove unused bridges (ip -4 route)")
}

// startProxy makes the pods' way to the `kubernetes` Service: the API
// server serves loopback only, so a forwarder on the bridge's gateway
// carries the connections the DNAT rule sends it (the API server's
// certificate names the Service's address, which the pods dial).
func (n *Node) startProxy() error {
	l, err := n.forward(strings.TrimPrefix(n.cp.URL, "https://"))
	if err != nil {
		return fmt.Errorf("the API server proxy on %s: %w", n.gateway, err)
	}
	n.proxy = l
	return nil
}

// Expose makes a TCP server on the host's loopback (target "127.0.0.1:port")
// reachable from the node's pods, and returns the address they dial (on
// the bridge's gateway). A TLS client there must name a host the server's
// certificate holds (for a local control plane: tls-server-name localhost).
// It lasts until Stop.
func (n *Node) Expose(target string) (string, error) {
	l, err := n.forward(target)
	if err != nil {
		return "", err
	}
	n.exposed = append(n.exposed, l)
	return l.Addr().String(), nil
}

// forward listens on a free port of the bridge's gateway and copies each
// connection to and from target.
func (n *Node) forward(target string) (net.Listener, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(n.gateway.String(), "0"))
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go pipe(c, target)
		}
	}()
	return l, nil
}

// pipe copies between c and a new connection to target until either side
// closes.
func pipe(c net.Conn, target string) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (n *Node) startContainerd(ctx context.Context, binDir string) error {
	for _, d := range []string{"containerd/root", "containerd/state", "containerd/opt", "run", "runc", "cni/ipam", "logs/pods", "kubelet"} {
		if err := os.MkdirAll(n.path(d), 0o700); err != nil {
			return err
		}
	}
	if err := writeFile(n.path("containerd.toml"), []byte(n.containerdConfig())); err != nil {
		return err
	}
	pause := n.pauseTar
	if pause == "" {
		var err error
		if pause, err = buildPauseImage(ctx, n.Dir); err != nil {
			return err
		}
	}
	p, err := n.start("containerd", "containerd", []string{"--config", n.path("containerd.toml"), "--log-level", "warn"}, n.path("logs/containerd.log"))
	if err != nil {
		return err
	}
	n.containerd = p
	if err := p.WaitFor(ctx, func(ctx context.Context) bool {
		return exec.CommandContext(ctx, "ctr", "--address", n.socket(), "version").Run() == nil
	}); err != nil {
		return err
	}
	return n.Import(ctx, pause)
}

// Import loads an image tarball (docker or OCI archive, as `make image`
// writes) into the node's containerd, where the kubelet finds it.
func (n *Node) Import(ctx context.Context, tarball string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.socket(), "-n", "k8s.io", "images", "import", "--no-unpack=false", tarball).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s into the node's containerd: %v: %s", tarball, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Stop ends the node's pods and processes and undoes what Start did to the
// host: mounts, cgroups, the bridge, the DNAT rule, kernel settings. Safe
// to call twice, and after a failed start.
func (n *Node) Stop() {
	if n == nil {
		return
	}
	n.scheduler.Stop(10 * time.Second)
	n.scheduler = nil
	n.kubelet.Stop(20 * time.Second)
	n.kubelet = nil
	if n.containerd != nil {
		if err := n.removePods(); err != nil {
			n.warnf("removing the node's pods: %v", err)
		}
		n.containerd.Stop(15 * time.Second)
		n.containerd = nil
	}
	// The init's end ends every process left in the node's namespaces and
	// with them its mounts.
	n.init.Stop(5 * time.Second)
	n.init, n.initPID = nil, 0
	for _, pid := range shimPIDs(n.socket()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if k := killCgroupProcs(n.cgroupRoot); k > 0 {
		n.warnf("killed %d processes left in %s", k, n.cgroupRoot)
	}
	for _, l := range append(n.exposed, n.proxy) {
		if l != nil {
			_ = l.Close()
		}
	}
	n.proxy, n.exposed = nil, nil
	if n.natRule != nil {
		if err := run("iptables", append([]string{"-w", "-t", "nat", "-D"}, n.natRule...)...); err != nil {
			n.warnf("removing the DNAT rule: %v", err)
		}
		n.natRule = nil
	}
	if n.bridgeMade {
		if err := run("ip", "link", "del", n.bridge); err != nil {
			n.warnf("removing the bridge: %v", err)
		}
		n.bridgeMade = false
	}
	n.restoreSysctls()
	if n.Dir != "" {
		n.removeCNIResults()
		if err := unmountUnder(n.Dir); err != nil {
			n.warnf("%v", err)
		}
		removeContainerLogLinks(n.Dir)
	}
	n.removeMadeDirs()
	if err := removeCgroups(n.cgroupRoot); err != nil {
		n.warnf("%v", err)
	}
	if n.bindingName != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = n.client.RbacV1().ClusterRoleBindings().Delete(ctx, n.bindingName, metav1.DeleteOptions{})
		_ = n.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		cancel()
		n.bindingName = ""
	}
	if n.Dir != "" {
		if err := os.RemoveAll(n.Dir); err != nil {
			n.warnf("removing %s: %v", n.Dir, err)
		}
		n.Dir = ""
	}
}

func (n *Node) warnf(format string, args ...any) { n.logf("realnode: "+format, args...) }

func randomHex(nbytes int) string {
	b := make([]byte, nbytes)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Bridge is the name of the node's bridge; CgroupRoot its cgroup (the
// same path in every hierarchy). Both are gone after Stop.
func (n *Node) Bridge() string     { return n.bridge }
func (n *Node) CgroupRoot() string { return n.cgroupRoot }

// Tag gives an imported image another name in the node's containerd (as
// `ctr images tag`), so that pods naming either find it.
func (n *Node) Tag(ctx context.Context, source, target string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.socket(), "-n", "k8s.io", "images", "tag", "--force", source, target).CombinedOutput()
	if err != nil {
		return fmt.Errorf("tagging %s as %s in the node's containerd: %v: %s", source, target, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// KubeletRoot is the kubelet's --root-dir (its pods are under pods/).
func (n *Node) KubeletRoot() string { return n.path("kubelet/root") }

// LogDir holds the logs of containerd, the kubelet and kube-scheduler.
func (n *Node) LogDir() string { return n.path("logs") }
