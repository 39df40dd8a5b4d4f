// Package virttemplate gives a REST client for template.kubevirt.io/v1beta1,
// only as far as kubevirt.io/kubevirt's informer factory needs one.
package virttemplate

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// TemplateV1beta1Interface reaches the v1beta1 version of the group.
type TemplateV1beta1Interface interface {
	RESTClient() rest.Interface
}

// Interface is the client set.
type Interface interface {
	TemplateV1beta1() TemplateV1beta1Interface
}

type clientset struct{ rc rest.Interface }

func (c *clientset) TemplateV1beta1() TemplateV1beta1Interface { return c }
func (c *clientset) RESTClient() rest.Interface                { return c.rc }

// NewForConfig builds the client set for template.kubevirt.io/v1beta1.
func NewForConfig(c *rest.Config) (Interface, error) {
	cfg := rest.CopyConfig(c)
	cfg.GroupVersion = &schema.GroupVersion{Group: "template.kubevirt.io", Version: "v1beta1"}
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &clientset{rc: rc}, nil
}
