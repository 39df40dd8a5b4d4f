package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"
)

// kubeVirtCR is the KubeVirt CR whose install strategy is printed
// (KubeVirt v1.7 has no virt-template deployment).
func kubeVirtCR(ns string) *v1.KubeVirt {
	return &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns}}
}
