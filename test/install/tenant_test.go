package install_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/tether-dev/tether/internal/testing/testenv"
)

// TestHelm_tenantKubeconfigSecret_mountedAndUsed: a tenant's kubeconfig
// Secret, named in the chart's tenants, is mounted into the controller as
// a file the configuration points at; the pods start, and the leader
// reaches the tenant with it (tether_tenant_up{tenant="guest"} 1).
func TestHelm_tenantKubeconfigSecret_mountedAndUsed(t *testing.T) {
	env := get(t)
	ctx := context.Background()
	tenant := env.Tenants["guest"]
	// The tenant-side role, bound to the identity of the kubeconfig, as
	// config/rbac/tenant-reader.yaml says.
	for _, args := range [][]string{
		{"apply", "-f", filepath.Join(repoRoot(), "config", "rbac", "tenant-reader.yaml")},
		{"create", "clusterrolebinding", "tether-tenant-reader", "--clusterrole=tether-tenant-reader", "--user=tether-reader"},
	} {
		if out, err := exec.Command("kubectl", append([]string{"--kubeconfig", tenant.Kubeconfig}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v in the tenant: %v\n%s", args, err, out)
		}
	}
	cfg, err := tenant.UserConfig("tether-reader")
	if err != nil {
		t.Fatal(err)
	}
	// The tenant's API server serves loopback: the pods reach it through
	// the node's forwarder, naming the host its certificate holds.
	addr, err := env.Node.Expose(strings.TrimPrefix(cfg.Host, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["guest"] = &clientcmdapi.Cluster{Server: "https://" + addr, CertificateAuthorityData: cfg.CAData, TLSServerName: "localhost"}
	kc.AuthInfos["guest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["guest"] = &clientcmdapi.Context{Cluster: "guest", AuthInfo: "guest"}
	kc.CurrentContext = "guest"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}

	world := newWorld(t, env)
	ns := env.Namespace(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "guest-kubeconfig", Namespace: ns}, Data: map[string][]byte{"kubeconfig": data}}
	if _, err := env.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	serviceAccount(t, env, world.ns, "scraper")
	img := buildImage(t, env, firstBuild)
	chrt, err := loader.Load(filepath.Join(repoRoot(), "charts", "tether"))
	if err != nil {
		t.Fatal(err)
	}
	vals := chartValues(img.Tag, world.ns, "scraper")
	vals["dryRun"], vals["protection"] = true, map[string]any{"enabled": false}
	vals["tenants"] = []any{map[string]any{"name": "guest", "secretName": "guest-kubeconfig", "namespace": world.ns}}
	install := action.NewInstall(helmConfig(t, env, ns))
	install.ReleaseName, install.Namespace = "tether", ns
	if _, err := install.RunWithContext(ctx, chrt, vals); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	t.Cleanup(func() { _, _ = action.NewUninstall(helmConfig(t, env, ns)).Run("tether") })
	pods := waitRollout(t, env, ns, "tether-controller", img.Tag, 2)
	lead := leader(t, env, ns, pods)
	reader := token(t, env, world.ns, "scraper")
	for i := range pods {
		if pods[i].Name != lead {
			continue
		}
		testenv.Eventually(t, time.Minute, `tether_tenant_up{tenant="guest"} 1 on the leader`, func() (bool, error) {
			_, body := scrape(t, &pods[i], 8443, reader)
			return strings.Contains(body, `tether_tenant_up{tenant="guest"} 1`), nil
		})
	}
}
