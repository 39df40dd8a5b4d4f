package realkubevirt

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/crdinstall"
	"github.com/tether-dev/tether/internal/testing/controlplane"
	"github.com/tether-dev/tether/internal/testing/emulator/crds"
)

// cdiCRDs are the CDI kinds virt-controller watches once a DataVolume CRD
// exists (CDI itself does not run here: tests create the PVCs).
//
//go:embed cdi.yaml
var cdiCRDs []byte

// virtAPIService is the Service virt-api's APIServices and webhooks name.
const virtAPIService = "virt-api"

// install creates what virt-operator would: the generated objects, with
// virt-api's Service, APIServices and webhooks pointed at the local virt-api
// process and its CA, and without what belongs to components that do not
// run here (virt-operator's own webhook and the APIServices of services
// that are absent, which would break discovery).
func (k *KubeVirt) install(ctx, _ context.Context) error {
	objs, err := readManifests(filepath.Join(k.o.Home, "manifests", "kubevirt.yaml"))
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	k.apiPort = port
	ca, serving, err := k.writeCerts()
	if err != nil {
		return err
	}
	var defs []*apiextensionsv1.CustomResourceDefinition
	var rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
				return fmt.Errorf("CRD %s: %w", o.GetName(), err)
			}
			defs = append(defs, crd)
			continue
		}
		keep, err := adapt(o, local{port: int64(port), ca: ca, serving: serving})
		if err != nil {
			return err
		}
		if keep {
			rest = append(rest, o)
		}
	}
	extra, err := extraCRDs()
	if err != nil {
		return err
	}
	if err := crdinstall.Install(ctx, k.o.Config, append(defs, extra...)...); err != nil {
		return err
	}
	c, err := client.New(k.o.Config, client.Options{})
	if err != nil {
		return err
	}
	k.ctrl = c
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": Namespace},
	}}
	for _, o := range append([]*unstructured.Unstructured{ns}, rest...) {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return k.createKubeVirtCR(ctx)
}

// local is what the generated objects are adapted to: virt-api's port on
// loopback, its CA and serving certificate.
type local struct {
	port        int64
	ca, serving *controlplane.KeyPair
}

// adapt changes one generated object for the local world and says whether
// to keep it.
func adapt(o *unstructured.Unstructured, l local) (bool, error) {
	ca, port := base64.StdEncoding.EncodeToString(l.ca.CertPEM), l.port
	switch o.GetKind() {
	case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		// KubeVirt's install strategy types these as apiVersion "v1"
		// (virt-operator writes them with a typed client, which does not
		// care); the API group is admissionregistration.k8s.io.
		o.SetAPIVersion("admissionregistration.k8s.io/v1")
	case "Service":
		if o.GetName() != virtAPIService {
			return true, nil
		}
		// The aggregator and the webhooks reach virt-api on loopback.
		return true, unstructured.SetNestedField(o.Object, map[string]any{
			"type": "ExternalName", "externalName": "localhost",
			"ports": []any{map[string]any{"name": "https", "protocol": "TCP", "port": port, "targetPort": port}},
		}, "spec")
	case "APIService":
		svc, _, _ := unstructured.NestedString(o.Object, "spec", "service", "name")
		if svc != virtAPIService {
			return false, nil
		}
		if err := unstructured.SetNestedField(o.Object, port, "spec", "service", "port"); err != nil {
			return false, err
		}
		return true, unstructured.SetNestedField(o.Object, ca, "spec", "caBundle")
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		var kept []any
		for _, h := range hooks {
			m := h.(map[string]any)
			if svc, _, _ := unstructured.NestedString(m, "clientConfig", "service", "name"); svc != virtAPIService {
				continue // virt-operator's own webhook: virt-operator does not run here
			}
			_ = unstructured.SetNestedField(m, port, "clientConfig", "service", "port")
			_ = unstructured.SetNestedField(m, ca, "clientConfig", "caBundle")
			kept = append(kept, m)
		}
		if len(kept) == 0 {
			return false, nil
		}
		return true, unstructured.SetNestedSlice(o.Object, kept, "webhooks")
	case "ConfigMap":
		if o.GetName() == "kubevirt-ca" {
			return true, unstructured.SetNestedField(o.Object, string(l.ca.CertPEM), "data", "ca-bundle")
		}
	case "Secret":
		// virt-operator fills the certificate secrets; the processes here
		// read their certificates from files, so any valid pair will do.
		return true, unstructured.SetNestedStringMap(o.Object, map[string]string{
			"tls.crt": base64.StdEncoding.EncodeToString(l.serving.CertPEM),
			"tls.key": base64.StdEncoding.EncodeToString(l.serving.KeyPEM),
		}, "data")
	}
	return true, nil
}

func readManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading KubeVirt manifests: %w (run hack/kubevirt.sh)", err)
	}
	r := utilyaml.NewYAMLReader(bufioReader(data))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "---" {
			continue
		}
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &o.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(o.Object) == 0 {
			continue
		}
		unstructured.RemoveNestedField(o.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(o.Object, "status")
		out = append(out, o)
	}
}

// extraCRDs are DataVolume (the definition tether's emulator installs) and
// the other CDI kinds virt-controller watches in CDI mode.
func extraCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := crds.Objects()
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, c := range all {
		if c.Spec.Group == "cdi.kubevirt.io" {
			out = append(out, c)
		}
	}
	r := utilyaml.NewYAMLReader(bufioReader(cdiCRDs))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, c); err != nil {
			return nil, fmt.Errorf("cdi.yaml: %w", err)
		}
		if c.Name != "" {
			out = append(out, c)
		}
	}
}

// writeCerts makes virt-api's CA and serving certificate (for the names the
// aggregator and the webhooks use) and writes them under Dir/pki.
func (k *KubeVirt) writeCerts() (ca, serving *controlplane.KeyPair, err error) {
	if ca, err = controlplane.NewCA("kubevirt-ca"); err != nil {
		return nil, nil, err
	}
	svc := virtAPIService + "." + Namespace + ".svc"
	if serving, err = ca.IssueServing("virt-api", []string{svc, svc + ".cluster.local", "localhost", "127.0.0.1"}); err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(k.o.Dir, "pki")
	if _, _, err := ca.Write(dir, "kubevirt-ca"); err != nil {
		return nil, nil, err
	}
	if k.apiCert, k.apiKey, err = serving.Write(dir, "virt-api"); err != nil {
		return nil, nil, err
	}
	return ca, serving, nil
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
