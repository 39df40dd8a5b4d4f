package snapshot

import (
	"slices"
	"strings"
)

// The registration that sends evictions of hot-plug attachment pods to
// virt-api (kubevirt/kubevirt#15093, in v1.6.1 and v1.7.0 and later):
// virt-operator writes it into the ValidatingWebhookConfiguration
// virt-api-validator (pkg/virt-operator/resource/generate/components/
// webhooks.go:369-399 at v1.9.0), and virt-api's pod-eviction admitter
// refuses the eviction of an attachment pod whose virt-launcher pod runs
// and whose VMI exists (pkg/virt-api/webhooks/validating-webhook/
// admitters/pod-eviction-admitter.go:92-93,100-125 at v1.9.0).
const (
	// VirtAPIValidatorName names virt-api's ValidatingWebhookConfiguration.
	VirtAPIValidatorName = "virt-api-validator"
	// HotplugEvictionWebhook is the name of its webhook that sends the
	// evictions of pods named hp-volume-* to virt-api.
	HotplugEvictionWebhook = "hotplug-pod-eviction-interceptor.kubevirt.io"
	// PodEvictionPath is virt-api's path for pod evictions.
	PodEvictionPath = "/pod-eviction-validate"
)

// EvictionGuard is what was read of the registration of virt-api's guard
// of attachment pods against eviction.
type EvictionGuard struct {
	// Read: virt-api-validator was read (or found absent). Err says why
	// it could not be read; then nothing is known of the guard's
	// registration.
	Read bool
	Err  string
	// Found: virt-api-validator exists.
	Found bool
	// Webhook is its webhook that sends attachment pods' evictions to
	// virt-api (GuardWebhookOf); "" when it has none.
	Webhook string
	// FailurePolicy is that webhook's ("Fail" when unset, the API's
	// default).
	FailurePolicy string
}

// GuardHook is what GuardWebhookOf reads of one webhook of
// virt-api-validator.
type GuardHook struct {
	Name string
	// Rules are "OPERATION resource" pairs of its rules, e.g.
	// "CREATE pods/eviction" ("*" for every operation or resource).
	Rules []string
	// Path is the path of the service it calls; Conditions the names of
	// its match conditions.
	Path       string
	Conditions int
}

// GuardWebhookOf reports whether hook sends the eviction of an attachment
// pod to virt-api's pod-eviction admitter: a rule that covers CREATE of
// pods/eviction, the admitter's path, and either KubeVirt's name for that
// webhook (whose match condition admits exactly hp-volume-* names) or no
// match condition at all. The launcher's webhook of the same path has a
// match condition that admits only virt-launcher-* names, so it does not
// count. Match conditions are CEL, which tether does not evaluate: a
// webhook of another name with conditions is not counted.
func GuardWebhookOf(hook GuardHook) bool {
	if hook.Path != PodEvictionPath || (hook.Name != HotplugEvictionWebhook && hook.Conditions > 0) {
		return false
	}
	return slices.ContainsFunc(hook.Rules, func(r string) bool {
		op, res, ok := strings.Cut(r, " ")
		return ok && (op == "CREATE" || op == "*") && (res == "pods/eviction" || res == "*" || res == "pods/*" || res == "*/*")
	})
}
