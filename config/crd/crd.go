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

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/crdinstall"
)

// Name is the definition's name.
const Name = "findings.tether.dev"

//go:embed tether.dev_findings.yaml
var definition []byte

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
	if err := crdinstall.Install(ctx, cfg, want); err != nil {
		return fmt.Errorf("crd: %w", err)
	}
	return nil
}
