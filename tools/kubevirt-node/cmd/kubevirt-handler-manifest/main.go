// Command kubevirt-handler-manifest prints, as YAML, the virt-handler
// DaemonSet virt-operator would install for a KubeVirt CR in the given
// namespace, from kubevirt.io/kubevirt's own install-strategy code: the
// containers, arguments, host paths, mount propagation, security context
// and probes of the release. tether's test world adapts it to its real node
// (images, kubelet paths, node selector) and changes nothing else.
package main

import (
	"flag"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/install"
	"kubevirt.io/kubevirt/pkg/virt-operator/util"
)

func main() {
	ns := flag.String("namespace", "kubevirt", "namespace KubeVirt is installed in")
	flag.Parse()
	if err := run(*ns); err != nil {
		fmt.Fprintf(os.Stderr, "kubevirt-handler-manifest: %v\n", err)
		os.Exit(1)
	}
}

func run(ns string) error {
	kv := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns}}
	s, err := install.GenerateCurrentInstallStrategy(util.GetTargetConfigFromKV(kv), "", ns)
	if err != nil {
		return fmt.Errorf("generating the install strategy: %w", err)
	}
	found := false
	for _, ds := range s.DaemonSets() {
		if ds.Name != "virt-handler" {
			continue
		}
		ds.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}
		b, err := yaml.Marshal(ds)
		if err != nil {
			return err
		}
		fmt.Printf("---\n%s", b)
		found = true
	}
	if !found {
		return fmt.Errorf("the install strategy has no virt-handler DaemonSet")
	}
	return nil
}
