package controlplane

import (
	"context"
	"crypto/x509"
	"time"

	"k8s.io/client-go/rest"
)

// Process is a server binary run beside the control plane (in its own
// process group, output in a log file), for worlds that add components of
// their own, such as real KubeVirt.
type Process struct{ p *process }

// StartProcess starts bin with args, its output going to logPath.
func StartProcess(name, bin string, args []string, logPath string) (*Process, error) {
	p, err := startProcess(name, bin, args, logPath)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Stop sends SIGTERM to the process group, SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	if p != nil {
		p.p.stop(grace)
	}
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool { return p.p.exited() }

// WaitFor polls ready until it returns true; it fails with the tail of the
// process's log when the process exits first or ctx ends.
func (p *Process) WaitFor(ctx context.Context, ready func(context.Context) bool) error {
	return p.p.waitFor(ctx, ready)
}

// Failure describes the process's state with the tail of its log.
func (p *Process) Failure(reason string) error { return p.p.failure(reason) }

// KeyPair is a certificate and its key, PEM encoded.
type KeyPair = keyPair

// NewCA makes a self-signed certificate authority.
func NewCA(name string) (*KeyPair, error) { return newCA(name) }

// IssueServing signs a serving certificate for hosts (DNS names or IPs).
func (ca *keyPair) IssueServing(cn string, hosts []string) (*KeyPair, error) {
	return ca.issue(cn, nil, hosts, x509.ExtKeyUsageServerAuth)
}

// Write stores the pair as <dir>/<name>.crt and <dir>/<name>.key.
func (kp *keyPair) Write(dir, name string) (certFile, keyFile string, err error) {
	return kp.write(dir, name)
}

// WriteKubeconfig writes cfg (server, CA, client certificate or token) as a
// kubeconfig file.
func WriteKubeconfig(path string, cfg *rest.Config) error { return writeKubeconfig(path, cfg) }

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) { return freePort() }
