// Command kubelet is the upstream Kubernetes node agent, built from the
// k8s.io/kubernetes Go module for the real node of tether's test world.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
