package tether_test

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tether-dev/tether/internal/protect"
)

// TestAttachmentPodEvictionsOptIn: the guard of attachment pods is
// rendered only when protection.webhook.attachmentPodEvictions is on, and
// then as protect.EvictionWebhook with the Service as client.
func TestAttachmentPodEvictionsOptIn(t *testing.T) {
	for _, on := range []bool{false, true} {
		vals := map[string]any{"protection": map[string]any{"enabled": true, "webhook": map[string]any{"enabled": true, "attachmentPodEvictions": on}}}
		var vwc *admissionregistrationv1.ValidatingWebhookConfiguration
		for _, o := range render(t, vals) {
			if o.GetKind() == "ValidatingWebhookConfiguration" && o.GetName() == protect.WebhookName {
				vwc = &admissionregistrationv1.ValidatingWebhookConfiguration{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, vwc); err != nil {
					t.Fatal(err)
				}
			}
		}
		if vwc == nil {
			t.Fatalf("attachmentPodEvictions %v: no registration %s", on, protect.WebhookName)
		}
		if !on {
			if len(vwc.Webhooks) != 1 {
				t.Errorf("off by default, yet %d webhooks: %+v", len(vwc.Webhooks), vwc.Webhooks)
			}
			continue
		}
		if len(vwc.Webhooks) != 2 {
			t.Fatalf("on: %d webhooks", len(vwc.Webhooks))
		}
		got := vwc.Webhooks[1]
		want := protect.EvictionWebhook(got.ClientConfig, admissionregistrationv1.Ignore)
		// The chart leaves out its release's namespace, not tether-system.
		excluded := append([]string{}, protect.WebhookExcludedNamespaces[:3]...)
		want.NamespaceSelector.MatchExpressions[0].Values = append(excluded, namespace)
		if !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("rendered\n%+v\nwant\n%+v", got, want)
		}
		if s := got.ClientConfig.Service; s == nil || s.Path == nil || *s.Path != protect.EvictionPath {
			t.Errorf("client %+v, want path %s", got.ClientConfig, protect.EvictionPath)
		}
	}
}
