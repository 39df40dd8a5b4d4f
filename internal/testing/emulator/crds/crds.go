// Package crds holds the CustomResourceDefinitions of the KubeVirt and CDI
// kinds that tether reads (VirtualMachine, VirtualMachineInstance,
// VirtualMachineInstanceMigration, KubeVirt, DataVolume) and installs them
// into a cluster.
//
// The schemas preserve unknown fields (KubeVirt's structural schemas prune
// them): they are for test clusters and the KubeVirt emulator, which play
// KubeVirt without its validating webhooks. As in KubeVirt, the VMI has no
// status subresource: its status is written with the object. The
// YAML files can also be applied with kubectl. Install never deletes or
// shrinks anything: it creates what is missing and updates what differs.
package crds

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/crdinstall"
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
	want, err := Objects()
	if err != nil {
		return err
	}
	if err := crdinstall.Install(ctx, cfg, want...); err != nil {
		return fmt.Errorf("crds: %w", err)
	}
	return nil
}
