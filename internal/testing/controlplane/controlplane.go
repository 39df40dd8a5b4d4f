// Package controlplane starts a real, local Kubernetes control plane — etcd,
// kube-apiserver and optionally kube-controller-manager, built from the
// upstream Go modules — on free loopback ports, for tests, `make env-up` and
// `make demo`.
//
// The apiserver runs with RBAC authorization, client-certificate
// authentication, service-account token signing and the aggregation-layer
// (front-proxy) flags, so aggregated APIs such as the KubeVirt emulator's
// subresources work behind it. This package must never touch anything but
// loopback addresses and its own state directory.
package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultControllers are the kube-controller-manager controllers that tether's
// scenarios need: garbage collection, PV/PVC protection, attach/detach, and
// the namespace and service-account housekeeping.
var DefaultControllers = []string{
	"garbage-collector-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
	"persistentvolume-attach-detach-controller",
	"namespace-controller",
	"serviceaccount-controller",
}

// Options configure Start. The zero value is a working configuration.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager. Empty:
	// $TETHER_CONTROLPLANE_BIN, then this checkout's build cache.
	BinDir string
	// Dir keeps state, certificates, logs and the kubeconfig. Empty: a
	// temporary directory that Stop removes.
	Dir string
	// APIServerPort and EtcdPort pin ports on 127.0.0.1; 0 picks free ones.
	APIServerPort int
	EtcdPort      int
	// ControllerManager also starts kube-controller-manager with Controllers
	// (DefaultControllers when empty).
	ControllerManager bool
	Controllers       []string
	// ServiceAccountCredentials runs each controller of the controller
	// manager under its own ServiceAccount in kube-system
	// (--use-service-account-credentials, as kubeadm does), so that the API
	// server sees the real identities, e.g.
	// system:serviceaccount:kube-system:namespace-controller. Otherwise all
	// of them act as the controller manager's admin user.
	ServiceAccountCredentials bool
	// StartTimeout bounds the whole start-up; default 90s.
	StartTimeout time.Duration
	// ServiceAccountAdmission turns the apiserver's ServiceAccount admission
	// plugin on, as on every real cluster: pods get their service account's
	// token volume, and a pod of a namespace without that service account is
	// refused. It needs the controller manager's serviceaccount controller.
	ServiceAccountAdmission bool
	// ExtraAPIServerArgs are appended to the apiserver's flags ("--flag=value").
	ExtraAPIServerArgs []string
}

// ControlPlane is a running local control plane.
type ControlPlane struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
	// Dir is the state directory.
	Dir string
	// URL is the apiserver's https address.
	URL string

	clientCA *keyPair
	servCA   *keyPair
	procs    []*process
	ownDir   bool
}

// Start launches the control plane and returns once the apiserver's /readyz
// passes. On any error everything started so far is stopped and cleaned up.
func Start(ctx context.Context, o Options) (cp *ControlPlane, err error) {
	if o.StartTimeout == 0 {
		o.StartTimeout = 90 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()

	binDir, err := findBinDir(o.BinDir)
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{Dir: o.Dir}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "tether-controlplane-"); err != nil {
			return nil, err
		}
		cp.ownDir = true
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	for _, sub := range []string{"pki", "logs"} {
		if err := os.MkdirAll(filepath.Join(cp.Dir, sub), 0o700); err != nil {
			return cp, err
		}
	}
	etcdPort, peerPort, apiPort, err := choosePorts(o)
	if err != nil {
		return cp, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	if err := cp.startEtcd(ctx, binDir, etcdURL, peerPort); err != nil {
		return cp, err
	}
	if err := cp.startAPIServer(ctx, binDir, etcdURL, apiPort, o.ServiceAccountAdmission, o.ExtraAPIServerArgs); err != nil {
		return cp, err
	}
	if o.ControllerManager {
		controllers := o.Controllers
		if len(controllers) == 0 {
			controllers = DefaultControllers
		}
		if err := cp.startControllerManager(ctx, binDir, controllers, o.ServiceAccountCredentials); err != nil {
			return cp, err
		}
	}
	return cp, nil
}

// Stop ends every process (SIGTERM, then SIGKILL) in reverse start order and
// removes the state directory when Start created it. Safe to call twice.
func (cp *ControlPlane) Stop() {
	if cp == nil {
		return
	}
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].stop(10 * time.Second)
	}
	cp.procs = nil
	if cp.ownDir {
		_ = os.RemoveAll(cp.Dir)
		cp.ownDir = false
	}
}

// PID is the process id of the control plane's process name ("etcd",
// "kube-apiserver", "kube-controller-manager"), 0 when none of that name
// runs: benchmarks read what each spends from /proc.
func (cp *ControlPlane) PID(name string) int {
	for _, p := range cp.procs {
		if p.name == name && !p.exited() {
			return p.cmd.Process.Pid
		}
	}
	return 0
}

// Clientset returns an admin clientset.
func (cp *ControlPlane) Clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(cp.Config)
}

// UserConfig returns a client configuration that authenticates as the given
// user and groups with a client certificate, so RBAC applies to it.
func (cp *ControlPlane) UserConfig(user string, groups ...string) (*rest.Config, error) {
	kp, err := cp.clientCA.issue(user, groups, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.CertData, cfg.KeyData = kp.CertPEM, kp.KeyPEM
	cfg.CertFile, cfg.KeyFile = "", ""
	return cfg, nil
}

// WriteKubeconfig writes a kubeconfig for cfg (which must come from this
// control plane) to path.
func (cp *ControlPlane) WriteKubeconfig(cfg *rest.Config, path string) error {
	return writeKubeconfig(path, cfg)
}

func choosePorts(o Options) (etcd, peer, api int, err error) {
	for _, p := range []int{o.EtcdPort, o.APIServerPort} {
		if p != 0 {
			if err := portFree(p); err != nil {
				return 0, 0, 0, err
			}
		}
	}
	etcd, api = o.EtcdPort, o.APIServerPort
	if etcd == 0 {
		if etcd, err = freePort(); err != nil {
			return
		}
	}
	if peer, err = freePort(); err != nil {
		return
	}
	if api == 0 {
		api, err = freePort()
	}
	return
}

func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is already in use: stop what holds it (ss -ltnp | grep :%d) or choose port 0 for a free one", port, port)
	}
	return l.Close()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (cp *ControlPlane) start(name, bin string, args []string) (*process, error) {
	p, err := startProcess(name, bin, args, filepath.Join(cp.Dir, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, p)
	return p, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context, binDir, url string, peerPort int) error {
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p, err := cp.start("etcd", filepath.Join(binDir, "etcd"), []string{
		"--name=default",
		"--data-dir=" + filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls=" + url,
		"--advertise-client-urls=" + url,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	})
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: time.Second}
	return p.waitFor(ctx, func(context.Context) bool {
		resp, err := client.Get(url + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// startAPIServer writes the apiserver's certificates, starts it on port
// against etcdURL, writes the admin kubeconfig and waits until /readyz says
// ok.
func (cp *ControlPlane) startAPIServer(ctx context.Context, binDir, etcdURL string, port int, saAdmission bool, extra []string) error {
	pki, err := cp.writeAPIServerPKI()
	if err != nil {
		return err
	}
	cp.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	p, err := cp.start("kube-apiserver", filepath.Join(binDir, "kube-apiserver"), append(apiServerArgs(etcdURL, port, pki, saAdmission), extra...))
	if err != nil {
		return err
	}
	cs, err := cp.writeAdminConfig(pki.admin)
	if err != nil {
		return err
	}
	return p.waitFor(ctx, func(ctx context.Context) bool {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		return err == nil && strings.TrimSpace(string(body)) == "ok"
	})
}

// apiServerPKI is what the apiserver's flags name: the certificate and key
// files by name ("apiserver.crt", "client-ca.crt", ...), the service-account
// key pair, and the admin client certificate.
type apiServerPKI struct {
	files        map[string]string
	saPub, saKey string
	admin        *keyPair
}

// writeAPIServerPKI creates the serving, client and front-proxy CAs (keeping
// the first two in cp), issues the apiserver's serving certificate, the admin
// and front-proxy client certificates, and writes them all under cp.Dir/pki
// with the service-account signing keys.
func (cp *ControlPlane) writeAPIServerPKI() (apiServerPKI, error) {
	dir := filepath.Join(cp.Dir, "pki")
	var pki apiServerPKI
	var err error
	if cp.servCA, err = newCA("tether-local-serving-ca"); err != nil {
		return pki, err
	}
	if cp.clientCA, err = newCA("tether-local-client-ca"); err != nil {
		return pki, err
	}
	proxyCA, err := newCA("tether-local-front-proxy-ca")
	if err != nil {
		return pki, err
	}
	serving, err := cp.servCA.issue("kube-apiserver", nil,
		[]string{"127.0.0.1", "localhost", "10.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		x509.ExtKeyUsageServerAuth)
	if err != nil {
		return pki, err
	}
	if pki.admin, err = cp.clientCA.issue("tether-admin", []string{"system:masters"}, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return pki, err
	}
	proxyClient, err := proxyCA.issue("front-proxy-client", nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return pki, err
	}
	pki.files = map[string]string{}
	for name, kp := range map[string]*keyPair{"serving-ca": cp.servCA, "client-ca": cp.clientCA, "front-proxy-ca": proxyCA,
		"apiserver": serving, "admin": pki.admin, "front-proxy-client": proxyClient} {
		crt, key, err := kp.write(dir, name)
		if err != nil {
			return pki, err
		}
		pki.files[name+".crt"], pki.files[name+".key"] = crt, key
	}
	pki.saPub, pki.saKey, err = writeServiceAccountKeys(dir)
	return pki, err
}

// apiServerArgs are kube-apiserver's flags: loopback only, client
// certificates and RBAC, service-account signing, and the front-proxy flags
// that aggregated APIs need.
func apiServerArgs(etcdURL string, port int, pki apiServerPKI, saAdmission bool) []string {
	files := pki.files
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + files["apiserver.crt"],
		"--tls-private-key-file=" + files["apiserver.key"],
		"--client-ca-file=" + files["client-ca.crt"],
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saPub,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--proxy-client-cert-file=" + files["front-proxy-client.crt"],
		"--proxy-client-key-file=" + files["front-proxy-client.key"],
		"--requestheader-client-ca-file=" + files["front-proxy-ca.crt"],
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--enable-aggregator-routing=false",
		"--profiling=false",
		"--v=0",
	}
	if !saAdmission {
		// Without a kubelet, pods need no token volume, and without the
		// serviceaccount controller a new namespace has no "default" account.
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	return args
}

// writeAdminConfig sets cp.Config to the admin client configuration, writes
// it as cp.Dir/kubeconfig and returns a clientset for it.
func (cp *ControlPlane) writeAdminConfig(admin *keyPair) (*kubernetes.Clientset, error) {
	cp.Config = &rest.Config{
		Host:            cp.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.servCA.CertPEM, CertData: admin.CertPEM, KeyData: admin.KeyPEM},
		QPS:             200,
		Burst:           400,
	}
	cp.Kubeconfig = filepath.Join(cp.Dir, "kubeconfig")
	if err := writeKubeconfig(cp.Kubeconfig, cp.Config); err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cp.Config)
}

func (cp *ControlPlane) startControllerManager(ctx context.Context, binDir string, controllers []string, saCredentials bool) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	kubeconfig := cp.Kubeconfig
	p, err := cp.start("kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"), []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--leader-elect=false",
		"--use-service-account-credentials=" + strconv.FormatBool(saCredentials),
		"--controllers=" + strings.Join(controllers, ","),
		"--root-ca-file=" + filepath.Join(cp.Dir, "pki", "serving-ca.crt"),
		"--concurrent-gc-syncs=5",
		"--profiling=false",
		"--v=0",
	})
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		// Loopback only; the controller manager serves a self-signed certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	healthz := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	return p.waitFor(ctx, func(context.Context) bool {
		resp, err := client.Get(healthz)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	if cfg == nil {
		return errors.New("no client configuration to write")
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["tether-local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["tether-local"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken, Impersonate: cfg.Impersonate.UserName}
	kc.Contexts["tether-local"] = &clientcmdapi.Context{Cluster: "tether-local", AuthInfo: "tether-local"}
	kc.CurrentContext = "tether-local"
	return clientcmd.WriteToFile(*kc, path)
}
