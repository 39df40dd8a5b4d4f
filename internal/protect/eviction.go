package protect

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/metrics"
)

// The opt-in guard of attachment pods against eviction: the eviction of a
// hot-plug attachment pod (hp-volume-*) whose VMI still runs on the pod's
// node is refused, as virt-api refuses it from KubeVirt v1.6.1 and v1.7.0
// on (kubevirt/kubevirt#15093), for clusters where KubeVirt does not (an
// older release, or virt-api-validator's webhook missing): a drain would
// otherwise take the disks from the running guest
// (kubevirt/kubevirt#13523). It never stands in the way of the VMI's own
// migration: the migration evicts nothing, the target's attachment pod
// and launcher are not refused (another node, not an attachment pod of a
// running VMI's node), and once the VMI runs elsewhere the old node's
// attachment pods may go. The decision is pure (DecideEviction); the
// handler reads the pod, its launcher and the VMI live.

// EvictionPath is where the controller's webhook server answers the
// reviews of pod evictions (contract: the chart's
// protection.webhook.attachmentPodEvictions registration).
const EvictionPath = "/protect/v1/pods-eviction"

// EvictionWebhookName names the registration's webhook.
const EvictionWebhookName = "attachment-pod-evictions.protect.tether.dev"

// launcherLabelValue is the kubevirt.io label of virt-launcher pods.
const launcherLabelValue = "virt-launcher"

// EvictionFacts are what a live read found for one pod eviction: the pod
// (nil: not found), its controller owner pod (nil: none, or not found)
// and the VMI that launcher runs (nil: none, or not found).
type EvictionFacts struct {
	Pod      *corev1.Pod
	Launcher *corev1.Pod
	VMI      *kubevirtv1.VirtualMachineInstance
}

// EvictionVerdict is the decision on one eviction.
type EvictionVerdict struct {
	Allowed bool
	// Volumes are the VMI's hot-plugs the pod serves (when refused).
	Volumes []string
	Message string
}

// DecideEviction refuses the eviction of a pod only when all of these
// hold: it is an attachment pod (label kubevirt.io=hotplug-disk), not
// being deleted and not finished; its controller owner is a virt-launcher
// pod that is not finished; the launcher's VMI (annotation
// kubevirt.io/domain) exists, is not being deleted, has not finished, and
// runs on the pod's node (status.nodeName). Anything else passes: other
// pods, a migration target's attachment pod (another node than the
// VMI's), the pods of a VMI that has moved or stopped, and whatever could
// not be found.
func DecideEviction(f EvictionFacts) EvictionVerdict {
	pod, launcher, vmi := f.Pod, f.Launcher, f.VMI
	pass := EvictionVerdict{Allowed: true}
	if pod == nil || pod.Labels[snapshot.AttachmentPodLabel] != snapshot.AttachmentPodLabelValue || pod.DeletionTimestamp != nil || finished(pod) {
		return pass
	}
	if launcher == nil || launcher.Labels[snapshot.AttachmentPodLabel] != launcherLabelValue || finished(launcher) || !launchedBy(pod, launcher) {
		return pass
	}
	if vmi == nil || vmi.Name != launcher.Annotations[kubevirtv1.DomainAnnotation] || vmi.Namespace != pod.Namespace ||
		vmi.DeletionTimestamp != nil || vmi.IsFinal() || pod.Spec.NodeName == "" || vmi.Status.NodeName != pod.Spec.NodeName {
		return pass
	}
	v := EvictionVerdict{}
	for _, vs := range vmi.Status.VolumeStatus {
		if vs.HotplugVolume != nil && vs.HotplugVolume.AttachPodName == pod.Name {
			v.Volumes = append(v.Volumes, vs.Name)
		}
	}
	v.Message = EvictionRefusal(pod, vmi, v.Volumes)
	return v
}

func finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// launchedBy: launcher is pod's controller owner.
func launchedBy(pod, launcher *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(pod)
	return ref != nil && ref.Kind == "Pod" && ref.Name == launcher.Name && (ref.UID == "" || ref.UID == launcher.UID)
}

// EvictionRefusal says why an eviction is refused and what to do
// (contract: docs/protection.md quotes it).
func EvictionRefusal(pod *corev1.Pod, vmi *kubevirtv1.VirtualMachineInstance, volumes []string) string {
	what := "the hot-plugs"
	if len(volumes) > 0 {
		what = "hot-plug(s) " + strings.Join(volumes, ", ")
	}
	return fmt.Sprintf("tether: attachment pod %s/%s holds %s of VMI %s/%s, which still runs on node %s: evicting it takes the disks from the running guest (kubevirt/kubevirt#13523). "+
		"Move the VMI first (`virtctl migrate %s -n %s`; a drain with eviction strategy LiveMigrate does it) and retry: once the VMI runs on another node this eviction is allowed; "+
		"or unplug the volumes (`virtctl removevolume %s -n %s --volume-name=NAME`), or stop the VMI",
		pod.Namespace, pod.Name, what, vmi.Namespace, vmi.Name, vmi.Status.NodeName, vmi.Name, vmi.Namespace, vmi.Name, vmi.Namespace)
}

// EvictionAdmission refuses the evictions DecideEviction refuses. It reads
// the pod, its launcher and the VMI live, never from a cache; a read that
// fails lets the eviction through (fail open, as the registration's
// failure policy Ignore does).
type EvictionAdmission struct {
	Live client.Reader
	WebhookOptions
}

// Handle answers one review of a pods/eviction CREATE.
func (h *EvictionAdmission) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Resource.Resource != "pods" || req.SubResource != "eviction" || req.Operation != admissionv1.Create {
		h.Log.Error(fmt.Errorf("review of %s %s/%s", req.Operation, req.Resource.Resource, req.SubResource), "admission request not understood: check the webhook's rules", "uid", req.UID)
		metrics.Admission.WithLabelValues(metrics.AdmissionUnknown).Inc()
		return admission.Allowed("tether: request not understood")
	}
	if len(h.Namespaces) > 0 && !slices.Contains(h.Namespaces, req.Namespace) {
		return admission.Allowed("")
	}
	facts, err := h.read(ctx, req.Namespace, req.Name)
	if err != nil {
		h.Log.Error(err, "reading an evicted pod's VMI", "pod", req.Namespace+"/"+req.Name)
		metrics.Admission.WithLabelValues(metrics.AdmissionUnknown).Inc()
		return admission.Allowed("tether: could not read the pod's VMI")
	}
	if v := DecideEviction(facts); !v.Allowed {
		h.Log.Info("refused: eviction of an attachment pod whose VMI runs on its node", "pod", req.Namespace+"/"+req.Name, "vmi", facts.VMI.Name, "node", facts.Pod.Spec.NodeName, "user", req.UserInfo.Username)
		metrics.Admission.WithLabelValues(metrics.AdmissionRefused).Inc()
		return admission.Denied(v.Message)
	}
	return admission.Allowed("")
}

// read gathers the facts within the read timeout; not found is a fact
// (nil), any other error is returned.
func (h *EvictionAdmission) read(ctx context.Context, ns, name string) (EvictionFacts, error) {
	d := h.ReadTimeout
	if d <= 0 {
		d = DefaultWebhookReadTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var f EvictionFacts
	get := func(key client.ObjectKey, obj client.Object) (bool, error) {
		err := h.Live.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	pod := &corev1.Pod{}
	if ok, err := get(client.ObjectKey{Namespace: ns, Name: name}, pod); !ok || pod.Labels[snapshot.AttachmentPodLabel] != snapshot.AttachmentPodLabelValue {
		return f, err
	}
	f.Pod = pod
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "Pod" {
		return f, nil
	}
	launcher := &corev1.Pod{}
	if ok, err := get(client.ObjectKey{Namespace: ns, Name: ref.Name}, launcher); !ok {
		return f, err
	}
	f.Launcher = launcher
	vmiName := launcher.Annotations[kubevirtv1.DomainAnnotation]
	if vmiName == "" {
		return f, nil
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if ok, err := get(client.ObjectKey{Namespace: ns, Name: vmiName}, vmi); !ok {
		return f, err
	}
	f.VMI = vmi
	return f, nil
}

// EvictionWebhook is the registration of the guard served at cc: CREATE
// of pods/eviction for pods named hp-volume-* (a match condition, as
// KubeVirt's own registers it), the excluded namespaces left out, failure
// policy policy (Ignore unless the chart says otherwise).
func EvictionWebhook(cc admissionregistrationv1.WebhookClientConfig, policy admissionregistrationv1.FailurePolicyType) admissionregistrationv1.ValidatingWebhook {
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	scope := admissionregistrationv1.NamespacedScope
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    EvictionWebhookName,
		ClientConfig:            cc,
		AdmissionReviewVersions: []string{"v1"},
		SideEffects:             &none,
		FailurePolicy:           &policy,
		MatchPolicy:             &equivalent,
		TimeoutSeconds:          ptr(WebhookTimeoutSeconds),
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: WebhookExcludedNamespaces,
		}}},
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "attachment-pods", Expression: `object.metadata.name.startsWith("hp-volume-")`}},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{""},
				APIVersions: []string{"v1"},
				Resources:   []string{"pods/eviction"},
				Scope:       &scope,
			},
		}},
	}
}

// compile-time check: the handler is an admission.Handler.
var _ admission.Handler = (*EvictionAdmission)(nil)
