package realkubevirt

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Service accounts virt-operator creates; the webhooks let only these
// identities change a VMI's spec, so virt-api and virt-controller must run
// as them (pkg/virt-api/webhooks, KubeVirt v1.9.0).
const (
	apiServerSA  = "kubevirt-apiserver"
	controllerSA = "kubevirt-controller"
	handlerSA    = "kubevirt-handler"
)

var kubeVirtGVK = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "KubeVirt"}

// createKubeVirtCR creates kubevirt/kubevirt with the feature gates and
// reports it Deployed as virt-operator would: virt-api and virt-controller
// read the CR's configuration only when status.phase is set, and take the
// default architecture from its status.
func (k *KubeVirt) createKubeVirtCR(ctx context.Context) error {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(kubeVirtGVK)
	cr.SetNamespace(Namespace)
	cr.SetName("kubevirt")
	dev := map[string]any{}
	if len(k.o.FeatureGates) > 0 {
		dev["featureGates"] = toAny(k.o.FeatureGates)
	}
	if len(k.o.DisabledFeatureGates) > 0 {
		dev["disabledFeatureGates"] = toAny(k.o.DisabledFeatureGates)
	}
	if v := k.o.LogVerbosity; v > 0 {
		dev["logVerbosity"] = map[string]any{"virtAPI": int64(v), "virtController": int64(v)}
	}
	cr.Object["spec"] = map[string]any{"configuration": map[string]any{"developerConfiguration": dev}}
	if err := k.ctrl.Create(ctx, cr); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the KubeVirt CR: %w", err)
	}
	if err := k.ctrl.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
		return err
	}
	cr.Object["status"] = map[string]any{
		"phase":                   "Deployed",
		"observedKubeVirtVersion": k.Version,
		"targetKubeVirtVersion":   k.Version,
		// virt-operator derives it from the nodes; the webhooks refuse a VMI
		// without an architecture, and the mutator takes this default.
		"defaultArchitecture": "amd64",
		"conditions": []any{map[string]any{
			"type": "Available", "status": "True", "reason": "AllComponentsReady",
			"message": "All components are ready.",
		}},
	}
	if err := k.ctrl.Status().Update(ctx, cr); err != nil {
		return fmt.Errorf("reporting the KubeVirt CR deployed: %w", err)
	}
	return nil
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// kubeconfigFor writes a kubeconfig that authenticates as the service
// account, with a token from the TokenRequest API.
func (k *KubeVirt) kubeconfigFor(ctx context.Context, sa string) (string, error) {
	ttl := int64((48 * time.Hour).Seconds())
	tr, err := k.client.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", Namespace, sa, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: k.o.Config.Host, CertificateAuthorityData: k.o.Config.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts[sa] = &clientcmdapi.Context{Cluster: "local", AuthInfo: sa}
	kc.CurrentContext = sa
	path := filepath.Join(k.o.Dir, "pki", sa+".kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// startVirtAPI runs virt-api as kubevirt-apiserver on loopback and waits
// until the aggregator reports its APIService available and its webhooks
// answer.
func (k *KubeVirt) startVirtAPI(ctx, _ context.Context) error {
	kc, err := k.kubeconfigFor(ctx, apiServerSA)
	if err != nil {
		return err
	}
	console, err := freePort()
	if err != nil {
		return err
	}
	p, err := k.run("virt-api",
		"--kubeconfig="+kc,
		"--listen=127.0.0.1",
		"--port="+strconv.Itoa(k.apiPort),
		"--console-server-port="+strconv.Itoa(console),
		"--tls-cert-file="+k.apiCert, "--tls-key-file="+k.apiKey,
		"--handler-cert-file="+k.apiCert, "--handler-key-file="+k.apiKey,
	)
	if err != nil {
		return err
	}
	return p.WaitFor(ctx, func(ctx context.Context) bool {
		return k.apiServiceAvailable(ctx) && k.webhooksAnswer(ctx)
	})
}

func (k *KubeVirt) apiServiceAvailable(ctx context.Context) bool {
	as := &unstructured.Unstructured{}
	as.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"})
	if err := k.ctrl.Get(ctx, client.ObjectKey{Name: "v1.subresources.kubevirt.io"}, as); err != nil {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(as.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Available" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// webhooksAnswer dry-runs the creation of a VirtualMachine, which passes
// through virt-api's mutating and validating webhooks.
func (k *KubeVirt) webhooksAnswer(ctx context.Context) bool {
	vm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "webhook-probe", "namespace": Namespace},
		"spec": map[string]any{
			"runStrategy": "Halted",
			"template": map[string]any{"spec": map[string]any{
				"domain": map[string]any{"devices": map[string]any{}, "memory": map[string]any{"guest": "64Mi"}},
			}},
		},
	}}
	err := k.ctrl.Create(ctx, vm, client.DryRunAll)
	return err == nil || apierrors.IsAlreadyExists(err)
}

// startVirtController runs virt-controller as kubevirt-controller and waits
// until it leads (its /leader endpoint says so).
func (k *KubeVirt) startVirtController(ctx, _ context.Context) error {
	kc, err := k.kubeconfigFor(ctx, controllerSA)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	image := "quay.io/kubevirt/virt-launcher:" + k.Version
	p, err := k.run("virt-controller",
		"--kubeconfig="+kc,
		"--listen=127.0.0.1",
		"--port="+strconv.Itoa(port),
		"--launcher-image="+image,
		"--exporter-image="+strings.Replace(image, "virt-launcher", "virt-exportserver", 1),
		"--prom-cert-file="+k.apiCert, "--prom-key-file="+k.apiKey,
		"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s",
	)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		// Loopback only, to a certificate this package issued.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/leader"
	return p.WaitFor(ctx, func(context.Context) bool {
		resp, err := hc.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body struct {
			APIServer struct {
				Leader string `json:"leader"`
			} `json:"apiserver"`
		}
		return json.NewDecoder(resp.Body).Decode(&body) == nil && body.APIServer.Leader == "true"
	})
}
