// Command tether finds and safely fixes drifted volume attachments in
// Kubernetes and KubeVirt clusters. Installed as kubectl-tether it is also a
// kubectl plugin: kubectl tether audit.
package main

import (
	"os"

	"github.com/tether-dev/tether/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
