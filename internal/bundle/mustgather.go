package bundle

import (
	"bufio"
	"io"
	"strings"
)

// What a must-gather holds beyond its files, from its gatherers' sources.
//
// OpenShift's must-gather (openshift/must-gather collection-scripts/gather)
// inspects nodes, persistentvolumes, volumeattachments, csidrivers and
// csinodes in one `oc adm inspect` of their resource types, which writes
// every object of each (cluster-scoped-resources/GROUP/RESOURCE/NAME.yaml)
// and no file for a type without objects. So where the nodes were
// inspected, a storage kind without a file has no object.
//
// KubeVirt's must-gather (kubevirt/must-gather collection-scripts) always
// runs gather_crs (every object of every kubevirt.io CRD in every
// namespace, VirtualMachines aside: namespaces/NS/crs/RESOURCE.GROUP/),
// gather_virtualmachines (vmConvertor: every VM,
// namespaces/NS/kubevirt.io/virtualmachines/TYPE/) and gather_cdi (`oc adm
// inspect` of every PVC), and its image's folder has a "version" file
// whose first line is "kubevirt/must-gather". So where it ran, VMs, VMIs, DataVolumes, the
// KubeVirt CR and PVCs are held in every namespace, none of a kind being
// none in the cluster.

// mustGatherCoverage is the coverage the gatherers' runs imply.
func (f *facts) mustGatherCoverage() []covered {
	var out []covered
	if f.inspectedNodes {
		for _, r := range []string{"persistentvolumes", "volumeattachments", "csidrivers", "csinodes"} {
			out = append(out, covered{resource: r})
		}
	}
	if f.kubevirtMustGather {
		for _, r := range []string{"virtualmachines", "virtualmachineinstances", "datavolumes", "kubevirts", "persistentvolumeclaims"} {
			out = append(out, covered{resource: r})
		}
	}
	return out
}

// readVersion reads a must-gather image's version file, whose first line
// KubeVirt's names it by (collection-scripts/version).
func (f *facts) readVersion(r io.Reader) {
	line, _ := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if strings.TrimSpace(line) == "kubevirt/must-gather" {
		f.kubevirtMustGather = true
	}
}

// sawClusterScoped notes a file under cluster-scoped-resources/: rest
// follows it.
func (f *facts) sawClusterScoped(rest []string) {
	if len(rest) >= 2 && rest[0] == "core" && (rest[1] == "nodes" || rest[1] == "nodes.yaml") {
		f.inspectedNodes = true
	}
}
