package realnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/tether-dev/tether/internal/testing/controlplane"
)

// removePods stops and removes every pod sandbox through the CRI, as the
// kubelet would: the CNI plugins release the pods' addresses and veths,
// and the shims exit with their containers.
func (n *Node) removePods() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+n.socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := cri.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing pod sandboxes: %w", err)
	}
	var errs []error
	for _, s := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s (%s/%s): %w", s.Id, s.Metadata.GetNamespace(), s.Metadata.GetName(), err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s: %w", s.Id, err))
		}
	}
	return errors.Join(errs...)
}

// containerLogDir is where the kubelet links container logs (fixed in the
// kubelet, not configurable).
const containerLogDir = "/var/log/containers"

// removeContainerLogLinks removes the kubelet's links to this node's
// container logs.
func removeContainerLogLinks(dir string) {
	entries, _ := os.ReadDir(containerLogDir)
	for _, e := range entries {
		p := filepath.Join(containerLogDir, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			_ = os.Remove(p)
		}
	}
}

var kubeletBinaries = []string{"kubelet", "kube-scheduler"}

// findBinDir returns the directory of the node's binaries: the explicit
// option, then $TETHER_NODE_BIN, then what hack/node.sh --verify reports.
func findBinDir(explicit string) (string, error) {
	dir := explicit
	if dir == "" {
		dir = os.Getenv(EnvBinDir)
	}
	if dir == "" {
		script, err := controlplane.FindScript("node.sh")
		if err != nil {
			return "", fmt.Errorf("kubelet and kube-scheduler not found: set %s, or run from a tether checkout after `make node`", EnvBinDir)
		}
		out, err := exec.Command(script, "--verify").Output()
		if err != nil {
			return "", fmt.Errorf("kubelet and kube-scheduler are not built for this checkout: run `make node` (hack/node.sh), or set %s", EnvBinDir)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, b := range kubeletBinaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s has no executable %s: run `make node` (hack/node.sh) to build it", dir, b)
		}
	}
	return dir, nil
}

// healthy says whether a component's loopback /healthz answers 200 (its
// certificate is self-signed).
func healthy(url string) bool {
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, self-signed
	}}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
