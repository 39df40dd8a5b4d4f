package manifests_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// TestWebhookBuild: config/webhook is config/default plus the webhook: the
// registration is protect.WebhookConfiguration with the Service as client,
// the Service reaches the container's webhook port, the pods serve the
// webhook with the certificate cert-manager writes, and the configuration
// is config/manager's with protection enabled.
func TestWebhookBuild(t *testing.T) {
	objs := objects(t, build(t, "webhook"))

	var vwc admissionv1.ValidatingWebhookConfiguration
	into(t, named(t, objs, "ValidatingWebhookConfiguration", protect.WebhookName), &vwc)
	want := protect.WebhookConfiguration(vwc.Webhooks[0].ClientConfig)
	if !apiequality.Semantic.DeepEqual(vwc.Webhooks, want.Webhooks) {
		t.Errorf("config/webhook/webhook.yaml differs from protect.WebhookConfiguration:\n%+v\nwant\n%+v", vwc.Webhooks, want.Webhooks)
	}
	svcRef := vwc.Webhooks[0].ClientConfig.Service
	if svcRef == nil || svcRef.Path == nil || *svcRef.Path != protect.WebhookPath || svcRef.Namespace != namespace {
		t.Fatalf("webhook client %+v, want the Service in %s at %s", svcRef, namespace, protect.WebhookPath)
	}
	if got := vwc.Annotations["cert-manager.io/inject-ca-from"]; got != namespace+"/tether-controller-webhook" {
		t.Errorf("caBundle injection from %q", got)
	}

	var svc corev1.Service
	into(t, named(t, objs, "Service", svcRef.Name), &svc)
	var d appsv1.Deployment
	into(t, find(t, objs, "Deployment"), &d)
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" && p.ContainerPort == 9443 }) ||
		len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "webhook" || svc.Spec.Ports[0].Port != 443 {
		t.Errorf("Service ports %+v do not reach the container's webhook port (%+v)", svc.Spec.Ports, c.Ports)
	}
	for _, arg := range []string{"--webhook-bind-address=:9443", "--webhook-cert-dir=/etc/tether/webhook-tls", "--config=/etc/tether/config.yaml", "--metrics-bind-address=:8443"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %v lack %s", c.Args, arg)
		}
	}
	cert := named(t, objs, "Certificate", "tether-controller-webhook")
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	if !mountsSecret(d.Spec.Template.Spec, c, secret, "/etc/tether/webhook-tls") {
		t.Errorf("the Secret %s of the Certificate is not mounted at the cert dir", secret)
	}

	data, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap").Object, "data", "config.yaml")
	got, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatalf("config/webhook's config.yaml: %v", err)
	}
	base, err := config.Load(filepath.Join("manager", "controller-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base.Protection.Enabled = true
	if !apiequality.Semantic.DeepEqual(got, base) {
		t.Errorf("config/webhook/controller-config.yaml is not config/manager's with protection enabled:\n%+v\nwant\n%+v", got, base)
	}
}

func mountsSecret(pod corev1.PodSpec, c corev1.Container, secret, path string) bool {
	for _, v := range pod.Volumes {
		if v.Secret == nil || v.Secret.SecretName != secret {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name && m.MountPath == path {
				return true
			}
		}
	}
	return false
}

// TestWebhookAcceptedByAPIServer: the real API server accepts the
// registration (server-side dry run).
func TestWebhookAcceptedByAPIServer(t *testing.T) {
	env := testenv.Get(t)
	data, err := os.ReadFile(filepath.Join("webhook", "webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vwc admissionv1.ValidatingWebhookConfiguration
	u := objects(t, data)[0]
	into(t, u, &vwc)
	_, err = env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), &vwc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("the API server refuses config/webhook/webhook.yaml: %v", err)
	}
}
