// Package crd holds the CustomResourceDefinition of tether's Finding
// resource (tether.dev/v1alpha1, see package api/v1alpha1) and installs it.
//
// The YAML file in this directory is the one definition: kustomize applies
// it (config/default), and this package embeds the same bytes. Install
// creates or updates the definition; it never deletes it, since deleting a
// CRD deletes every Finding with it.
package crd

import (
	"context"
	_ "embed"
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
	"sigs.k8s.io/yaml"
)

// Name is the definition's name.
const Name = "findings.tether.dev"

//go:embed tether.dev_findings.yaml
var definition []byte

// establishTimeout bounds the wait for the apiserver to serve the resource
// (it also ends with the caller's context).
const establishTimeout = time.Minute

// Object returns a fresh copy of the definition.
func Object() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(definition, crd); err != nil {
		return nil, fmt.Errorf("crd: tether.dev_findings.yaml: %w", err)
	}
	return crd, nil
}

// Install creates the definition, or updates its spec where it differs,
// and waits until the apiserver reports it Established.
func Install(ctx context.Context, cfg *rest.Config) error {
	want, err := Object()
	if err != nil {
		return err
	}
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("crd: %w", err)
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	if err := apply(ctx, api, want); err != nil {
		return fmt.Errorf("crd: installing %s: %w", want.Name, err)
	}
	var last *apiextensionsv1.CustomResourceDefinition
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, establishTimeout, true,
		func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // keep polling through transient errors
			}
			last = got
			return condition(got, apiextensionsv1.Established), nil
		})
	if err != nil {
		return fmt.Errorf("crd: %s is not established: %w%s", want.Name, err, namesProblem(last))
	}
	return nil
}

type crdAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Create(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.CreateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Update(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.UpdateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}

func apply(ctx context.Context, api crdAPI, want *apiextensionsv1.CustomResourceDefinition) error {
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

func hasLabels(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func condition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
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
