// Package kubevirt talks to KubeVirt's API. This file is the typed client for
// the volume subresources of subresources.kubevirt.io/v1 (addvolume and
// removevolume on VMs and VMIs). It sends exactly what it is given: deciding
// whether a call is safe is the caller's job, and dry runs are the caller's
// choice (DryRunAll).
package virtapi

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	virtv1 "kubevirt.io/api/core/v1"
)

// SubresourceGroupVersion is the aggregated API that KubeVirt's virt-api
// serves the VM and VMI subresources under.
var SubresourceGroupVersion = schema.GroupVersion{Group: "subresources.kubevirt.io", Version: "v1"}

// Kind selects whether a subresource call addresses the VirtualMachine or the
// VirtualMachineInstance of the given name.
type Kind string

const (
	// VM addresses virtualmachines/<name>/<subresource>. With the deprecated
	// HotplugVolumes gate the change is queued in the VM's
	// status.volumeRequests; otherwise the VM spec is changed directly. Either
	// way it persists across restarts of the VM.
	VM Kind = "virtualmachines"
	// VMI addresses virtualmachineinstances/<name>/<subresource>: the change
	// lives only as long as the running instance. KubeVirt refuses it for a
	// VM-owned VMI unless the HotplugVolumes feature gate is on.
	VMI Kind = "virtualmachineinstances"
)

// DryRunAll asks the server to validate a request without persisting it; set
// it as the DryRun field of the options.
var DryRunAll = []string{metav1.DryRunAll}

// NewSubresourceClient returns a REST client for subresources.kubevirt.io/v1.
// Error responses that carry a metav1.Status come back as
// *apierrors.StatusError, so apierrors.IsConflict, IsNotFound, IsBadRequest
// and friends work on the errors of AddVolume and RemoveVolume.
func NewSubresourceClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &SubresourceGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(c)
}

// AddVolume calls <kind>/<name>/addvolume in namespace ns. KubeVirt answers
// 202 Accepted once the request is recorded; the volume is attached later.
// Set opts.DryRun to DryRunAll to have the server only validate it.
func AddVolume(ctx context.Context, c rest.Interface, kind Kind, ns, name string, opts *virtv1.AddVolumeOptions) error {
	if opts == nil {
		return fmt.Errorf("kubevirt: addvolume %s %s/%s: no options", kind, ns, name)
	}
	return put(ctx, c, kind, ns, name, "addvolume", opts)
}

// RemoveVolume calls <kind>/<name>/removevolume in namespace ns. Set
// opts.DryRun to DryRunAll to have the server only validate it.
func RemoveVolume(ctx context.Context, c rest.Interface, kind Kind, ns, name string, opts *virtv1.RemoveVolumeOptions) error {
	if opts == nil {
		return fmt.Errorf("kubevirt: removevolume %s %s/%s: no options", kind, ns, name)
	}
	return put(ctx, c, kind, ns, name, "removevolume", opts)
}

func put(ctx context.Context, c rest.Interface, kind Kind, ns, name, sub string, body any) error {
	if kind != VM && kind != VMI {
		return fmt.Errorf("kubevirt: %s: unknown kind %q", sub, kind)
	}
	if ns == "" || name == "" {
		return fmt.Errorf("kubevirt: %s %s: namespace and name are required", sub, kind)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.Put().
		Namespace(ns).
		Resource(string(kind)).
		Name(name).
		SubResource(sub).
		SetHeader("Content-Type", "application/json").
		Body(data).
		Do(ctx).
		Error()
}
