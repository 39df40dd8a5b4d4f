// Package crdinstall creates or updates CustomResourceDefinitions and waits
// until the apiserver serves them. It never deletes a definition (that would
// delete every object of its kind) and never writes one that is unchanged.
package crdinstall

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// EstablishTimeout bounds the wait for each definition (the caller's
// context can end it sooner).
const EstablishTimeout = time.Minute

// API is the part of the CRD client Apply needs.
type API interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Create(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.CreateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Update(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.UpdateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}

// Install applies every definition, then waits until all are Established.
func Install(ctx context.Context, cfg *rest.Config, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		if err := Apply(ctx, api, crd); err != nil {
			return fmt.Errorf("installing %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := WaitEstablished(ctx, api, crd.Name); err != nil {
			return err
		}
	}
	return nil
}

// Apply creates want, or updates the stored definition's spec and labels
// where they differ from want.
func Apply(ctx context.Context, api API, want *apiextensionsv1.CustomResourceDefinition) error {
	_, err := api.Create(ctx, want.DeepCopy(), metav1.CreateOptions{})
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		// The server fills in defaults (conversion strategy, ...);
		// DeepDerivative ignores what the wanted spec leaves unset, so an
		// unchanged definition is not written again.
		if apiequality.Semantic.DeepDerivative(want.Spec, got.Spec) && hasLabels(got.Labels, want.Labels) {
			return nil
		}
		got.Spec = *want.Spec.DeepCopy()
		if got.Labels == nil {
			got.Labels = map[string]string{}
		}
		for k, v := range want.Labels {
			got.Labels[k] = v
		}
		_, err = api.Update(ctx, got, metav1.UpdateOptions{})
		return err
	})
}

// WaitEstablished polls until the definition is Established, and explains a
// name clash if that is why it is not.
func WaitEstablished(ctx context.Context, api API, name string) error {
	var last *apiextensionsv1.CustomResourceDefinition
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, EstablishTimeout, true,
		func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // keep polling through transient errors
			}
			last = got
			return Condition(got, apiextensionsv1.Established), nil
		})
	if err != nil {
		return fmt.Errorf("%s is not established: %w%s", name, err, namesProblem(last))
	}
	return nil
}

func hasLabels(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Condition reports whether the definition has condition t set to True.
func Condition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == t && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// namesProblem explains a definition that cannot be established because
// its names clash with another resource.
func namesProblem(crd *apiextensionsv1.CustomResourceDefinition) string {
	if crd == nil {
		return ""
	}
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
			return fmt.Sprintf(" (names not accepted: %s)", c.Message)
		}
	}
	return ""
}
