// Package crds holds the CustomResourceDefinitions of the KubeVirt and CDI
// kinds that tether reads (VirtualMachine, VirtualMachineInstance,
// VirtualMachineInstanceMigration, KubeVirt, DataVolume) and installs them
// into a cluster.
//
// The schemas preserve unknown fields: they are for test clusters and the
// KubeVirt emulator, which play KubeVirt without its validating webhooks. The
// YAML files can also be applied with kubectl. Install never deletes or
// shrinks anything: it creates what is missing and updates what differs.
package crds

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// Objects returns fresh copies of all the definitions, sorted by name.
func Objects() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("crds: %s: %w", name, err)
		}
		out = append(out, crd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Install creates or updates every definition and waits until the apiserver
// reports all of them Established (or ctx ends).
func Install(ctx context.Context, cfg *rest.Config) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	want, err := Objects()
	if err != nil {
		return err
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range want {
		if err := apply(ctx, api, crd); err != nil {
			return fmt.Errorf("crds: install %s: %w", crd.Name, err)
		}
	}
	for _, crd := range want {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true,
			func(ctx context.Context) (bool, error) {
				got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
				if err != nil {
					return false, nil //nolint:nilerr // keep polling through transient errors
				}
				return established(got), nil
			})
		if err != nil {
			return fmt.Errorf("crds: %s not established: %w", crd.Name, err)
		}
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
		if sameSpec(got, want) {
			return nil
		}
		got.Spec = *want.Spec.DeepCopy()
		_, err = api.Update(ctx, got, metav1.UpdateOptions{})
		return err
	})
}

func sameSpec(got, want *apiextensionsv1.CustomResourceDefinition) bool {
	a, errA := yaml.Marshal(got.Spec)
	b, errB := yaml.Marshal(want.Spec)
	return errA == nil && errB == nil && string(a) == string(b)
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
