// Command kubevirt-manifests prints, as one YAML stream, the objects
// virt-operator would install for a KubeVirt CR in the given namespace:
// CRDs (the KubeVirt CRD included), service accounts, RBAC, webhook
// configurations, APIServices, services, config maps and the certificate
// secrets. It asks kubevirt.io/kubevirt's own install-strategy code, so the
// objects are exactly the release's. Deployments and DaemonSets are left
// out: tether's test world runs virt-api and virt-controller as processes.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/install"
	"kubevirt.io/kubevirt/pkg/virt-operator/util"
)

func main() {
	ns := flag.String("namespace", "kubevirt", "namespace KubeVirt is installed in")
	flag.Parse()
	if err := run(*ns); err != nil {
		fmt.Fprintf(os.Stderr, "kubevirt-manifests: %v\n", err)
		os.Exit(1)
	}
}

func run(ns string) error {
	kv := kubeVirtCR(ns)
	s, err := install.GenerateCurrentInstallStrategy(util.GetTargetConfigFromKV(kv), "", ns)
	if err != nil {
		return fmt.Errorf("generating the install strategy: %w", err)
	}
	kvCRD, err := components.NewKubeVirtCrd()
	if err != nil {
		return fmt.Errorf("generating the KubeVirt CRD: %w", err)
	}
	var objs []runtime.Object
	objs = append(objs, kvCRD)
	for _, o := range s.CRDs() {
		objs = append(objs, o)
	}
	for _, o := range s.ServiceAccounts() {
		objs = append(objs, o)
	}
	for _, o := range s.ClusterRoles() {
		objs = append(objs, o)
	}
	for _, o := range s.ClusterRoleBindings() {
		objs = append(objs, o)
	}
	for _, o := range s.Roles() {
		objs = append(objs, o)
	}
	for _, o := range s.RoleBindings() {
		objs = append(objs, o)
	}
	for _, o := range s.Services() {
		objs = append(objs, o)
	}
	for _, o := range s.ConfigMaps() {
		objs = append(objs, o)
	}
	for _, o := range s.CertificateSecrets() {
		objs = append(objs, o)
	}
	for _, o := range s.ValidatingWebhookConfigurations() {
		objs = append(objs, o)
	}
	for _, o := range s.MutatingWebhookConfigurations() {
		objs = append(objs, o)
	}
	for _, o := range s.APIServices() {
		objs = append(objs, o)
	}
	for _, o := range s.ValidatingAdmissionPolicies() {
		objs = append(objs, o)
	}
	for _, o := range s.ValidatingAdmissionPolicyBindings() {
		objs = append(objs, o)
	}
	seen := map[string]bool{}
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			return err
		}
		id := fmt.Sprintf("%T/%s/%s", o, m.GetNamespace(), m.GetName())
		if seen[id] {
			continue // the strategy lists some config maps twice
		}
		seen[id] = true
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		fmt.Printf("---\n%s", b)
	}
	return nil
}
