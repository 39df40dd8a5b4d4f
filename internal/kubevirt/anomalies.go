package kubevirt

import (
	"fmt"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// AnomalyFloor is how many hot-plugged volumes the infra side must show
// before a tenant that lists no attachment of its driver is called an
// anomaly.
const AnomalyFloor = 10

// Anomalies are the sanity checks of one observation that refuse an apply
// as a whole (plan.Guard): a tenant that could not be read (its evidence is
// partial), and a tenant that lists no VolumeAttachment of its driver while
// the VMIs of the namespaces it serves hold many hot-plugs (a wrong
// kubeconfig, a driver name that does not match, or rights that hide the
// list: every hot-plug would look unwanted).
func Anomalies(s *snapshot.Snapshot) []string {
	var out []string
	for i := range s.Tenants {
		t := &s.Tenants[i]
		if !t.Reachable {
			out = append(out, fmt.Sprintf("tenant %q could not be read (%s): its evidence is partial", t.Name, t.Error))
			continue
		}
		driver, vas := t.CSIDriver(), 0
		for j := range t.VolumeAttachments {
			if t.VolumeAttachments[j].Spec.Attacher == driver {
				vas++
			}
		}
		if vas > 0 {
			continue
		}
		hotplugs := 0
		for j := range s.VMIs {
			vmi := &s.VMIs[j]
			if t.Namespace != "" && vmi.Namespace != t.Namespace {
				continue
			}
			for k := range vmi.Status.VolumeStatus {
				if vmi.Status.VolumeStatus[k].HotplugVolume != nil {
					hotplugs++
				}
			}
		}
		if hotplugs >= AnomalyFloor {
			out = append(out, fmt.Sprintf("tenant %q lists no VolumeAttachment of driver %s, while the VMIs it serves have %d hot-plugged volumes", t.Name, driver, hotplugs))
		}
	}
	return out
}

// subjects counts what the checks judged.
func subjects(s *snapshot.Snapshot) int {
	n := len(s.VMIs) + len(s.VolumeAttachments) + len(s.AttachmentPods)
	for i := range s.Tenants {
		n += len(s.Tenants[i].Nodes)
	}
	return n
}
