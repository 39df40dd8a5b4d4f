package protect

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// The webhook's registration. config/webhook holds the same object as YAML
// for installs (a test keeps the two in step); tests register it with a URL.
const (
	// WebhookName names the ValidatingWebhookConfiguration and its one
	// webhook.
	WebhookName = "vm-references.protect.tether.dev"
	// WebhookTimeoutSeconds is the API server's limit on one review. The
	// handler's own reads stop sooner (DefaultWebhookReadTimeout).
	WebhookTimeoutSeconds int32 = 5
)

// WebhookExcludedNamespaces never see the webhook: the control plane's own
// and tether's. VMs do not live there, and a webhook must not stand in the
// way of the system namespaces.
var WebhookExcludedNamespaces = []string{"kube-system", "kube-node-lease", "kube-public", "tether-system"}

// WebhookConfiguration returns the registration of the VM admission webhook
// served at cc: CREATE and UPDATE of virtualmachines (never their status or
// other subresources), failure policy Ignore, the excluded namespaces left
// out by name.
func WebhookConfiguration(cc admissionv1.WebhookClientConfig) *admissionv1.ValidatingWebhookConfiguration {
	ignore := admissionv1.Ignore
	none := admissionv1.SideEffectClassNone
	equivalent := admissionv1.Equivalent
	scope := admissionv1.NamespacedScope
	return &admissionv1.ValidatingWebhookConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   WebhookName,
			Labels: map[string]string{"app.kubernetes.io/name": "tether", "app.kubernetes.io/part-of": "tether"},
		},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    WebhookName,
			ClientConfig:            cc,
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &ignore,
			MatchPolicy:             &equivalent,
			TimeoutSeconds:          ptr(WebhookTimeoutSeconds),
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: WebhookExcludedNamespaces,
			}}},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule: admissionv1.Rule{
					APIGroups:   []string{kubevirtv1.SchemeGroupVersion.Group},
					APIVersions: []string{kubevirtv1.SchemeGroupVersion.Version},
					Resources:   []string{"virtualmachines"},
					Scope:       &scope,
				},
			}},
		}},
	}
}
