// Command kube-controller-manager is the upstream Kubernetes controller
// manager (garbage collector, PV/PVC protection, attach/detach), built from the
// k8s.io/kubernetes Go module for tether's local control plane.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
