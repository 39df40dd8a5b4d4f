package realnode

import "github.com/tether-dev/tether/internal/testing/controlplane"

// Controllers are the controller manager's controllers a world with a real
// node needs beside controlplane.DefaultControllers: Deployments and their
// ReplicaSets, the kube-root-ca.crt ConfigMap every pod's token volume
// mounts, PodDisruptionBudgets' status, Services' endpoints, and the
// node lifecycle controller, which lifts the not-ready taint a kubelet
// registers its Node with.
func Controllers() []string {
	return append(append([]string(nil), controlplane.DefaultControllers...),
		"deployment-controller",
		"replicaset-controller",
		"root-ca-certificate-publisher-controller",
		"disruption-controller",
		"endpointslice-controller",
		"node-lifecycle-controller",
	)
}
