// Command virt-controller is KubeVirt's virt-controller, built from the
// kubevirt.io/kubevirt Go module for tether's real-KubeVirt test world.
package main

import "kubevirt.io/kubevirt/pkg/virt-controller/watch"

func main() { watch.Execute() }
