package protect

import (
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Delete protection by label: a ValidatingAdmissionPolicy refuses DELETE of
// a protected kind that carries DeleteProtectionLabel=true, up front. It
// sees only the object in the request: the dependency logic stays with the
// finalizer.
const (
	DeleteProtectionLabel = "tether.dev/delete-protection"
	PolicyName            = "tether-delete-protection"
	// GarbageCollector is the identity of the garbage collector, always let
	// through: what an owner's deletion removes must go.
	GarbageCollector = "system:serviceaccount:kube-system:generic-garbage-collector"
	// NamespaceController is the identity of the namespace controller,
	// always let through: a namespace being deleted must be able to go.
	// Both identities are those of a kube-controller-manager that runs
	// with --use-service-account-credentials (kubeadm's default).
	NamespaceController = "system:serviceaccount:kube-system:namespace-controller"
)

// DefaultAllowed are the user names the policy always lets through.
var DefaultAllowed = []string{GarbageCollector, NamespaceController}

// PolicyOptions shape the admission policy.
type PolicyOptions struct {
	// Allow are further user names let through, e.g.
	// system:kube-controller-manager where the controller manager runs
	// without service-account credentials.
	Allow []string
}

// Policy returns the ValidatingAdmissionPolicy and its binding.
func Policy(o PolicyOptions) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	allowed := append(slices.Clone(DefaultAllowed), o.Allow...)
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	fail := admissionv1.Fail
	labels := map[string]string{"app.kubernetes.io/name": "tether", "app.kubernetes.io/part-of": "tether"}
	p := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Labels: labels},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Delete},
						Rule: admissionv1.Rule{
							APIGroups:   []string{"", "cdi.kubevirt.io", "apps"},
							APIVersions: []string{"*"},
							Resources:   []string{"persistentvolumeclaims", "datavolumes", "controllerrevisions"},
						},
					},
				}},
			},
			MatchConditions: []admissionv1.MatchCondition{
				{Name: "labelled", Expression: fmt.Sprintf(
					"has(oldObject.metadata.labels) && %q in oldObject.metadata.labels && oldObject.metadata.labels[%q] == 'true'",
					DeleteProtectionLabel, DeleteProtectionLabel)},
				{Name: "not-exempt", Expression: fmt.Sprintf("!(request.userInfo.username in [%s])", strings.Join(quoted, ", "))},
			},
			Validations: []admissionv1.Validation{{
				Expression: "false",
				MessageExpression: `"tether: " + request.resource.resource + " " + request.namespace + "/" + request.name + ` +
					fmt.Sprintf("%q", DeletionRefusedMessage) +
					` + ": kubectl label -n " + request.namespace + " " + request.resource.resource + " " + request.name + " ` + DeleteProtectionLabel + `-"`,
				Reason: ptr(metav1.StatusReasonForbidden),
			}},
		},
	}
	b := &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Labels: labels},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        PolicyName,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	return p, b
}

// DeletionRefusedMessage is the middle of the refusal message, before the
// command that releases the protection (contract: docs/protection.md).
const DeletionRefusedMessage = " is delete-protected (label " + DeleteProtectionLabel + "=true); to delete it, first release the protection"

func ptr[T any](v T) *T { return &v }
