// Command kube-scheduler is the upstream Kubernetes scheduler, built from the
// k8s.io/kubernetes Go module, so that the pods of Deployments in tether's
// test world with a real node are placed as on any cluster.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
