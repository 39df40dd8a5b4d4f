package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// containerdConfig is containerd 1.6's configuration (version 2) with every
// path under the node's directory: its root and state, its sockets, runc's
// state, the network namespaces and the CNI configuration. Only the shims'
// sockets live where containerd puts them (/run/containerd/s/, named by a
// hash of this node's socket), and they go with the shims.
func (n *Node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
    max_conf_num = 1
`, n.path("containerd/root"), n.path("containerd/state"), n.socket(), n.socket()+".ttrpc",
		n.path("containerd/opt"), PauseImage, n.path("runc"), cniBinDir, n.path("cni/net.d"))
}

// cniConfig is the pod network: a bridge of the node's own with the
// gateway on the host (so the host reaches pods, and pods reach the host's
// API server proxy), addresses from host-local with its state in the
// node's directory, and no masquerading (pods need no way out).
func (n *Node) cniConfig() ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "tether-" + n.Name,
		"plugins": []any{map[string]any{
			"type":             "bridge",
			"bridge":           n.bridge,
			"isGateway":        true,
			"isDefaultGateway": true,
			"ipMasq":           false,
			"hairpinMode":      true,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": n.path("cni/ipam"),
				"ranges":  []any{[]any{map[string]any{"subnet": n.subnet.String(), "gateway": n.gateway.String()}}},
			},
		}},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// kubeletConfig is the kubelet's configuration file: cgroupfs under a
// cgroup root of the node's own (cgroup v1 is allowed: failCgroupV1
// false), its own ports on loopback, no anonymous access, no image garbage
// collection (every image is imported, none could be pulled back) and
// eviction thresholds that a busy shared disk does not reach.
func (n *Node) kubeletConfig(port, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %q
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupRoot: %q
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: %q
podLogsDir: %q
clusterDomain: cluster.local
resolvConf: ""
maxPods: 30
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 5s
serializeImagePulls: false
enableServer: true
`, port, healthzPort, n.clientCAFile, n.cgroupRoot, "unix://"+n.socket(), n.path("logs/pods"))
}

func (n *Node) path(rel string) string { return filepath.Join(n.Dir, rel) }

func (n *Node) socket() string { return n.path("run/containerd.sock") }

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func itoa(i int) string { return strconv.Itoa(i) }
