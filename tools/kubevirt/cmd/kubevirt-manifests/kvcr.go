package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"
)

// kubeVirtCR is the KubeVirt CR whose install strategy is printed. The
// virt-template deployment is switched off, as an operator does in the CR:
// tether's world runs no virt-template components.
func kubeVirtCR(ns string) *v1.KubeVirt {
	off := false
	return &v1.KubeVirt{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns},
		Spec: v1.KubeVirtSpec{Configuration: v1.KubeVirtConfiguration{
			VirtTemplateDeployment: &v1.VirtTemplateDeployment{Enabled: &off},
		}},
	}
}
