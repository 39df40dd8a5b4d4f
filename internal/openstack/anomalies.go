package openstack

import (
	"fmt"

	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// AnomalyFloor is how many objects one source must show before the other
// listing none of them is called an anomaly (below it, an empty list may
// well be true).
const AnomalyFloor = 10

// Anomalies are the cross-source sanity checks of one observation: Nova and
// Cinder each list what the other's records imply. A source that lists
// none of a kind the other says exists is a half-read world (a wrong
// endpoint, a project filter, a policy that hides), not mass drift (the
// nannies of openstack-nannies stop on Cinder listing zero volumes).
func Anomalies(s *snapshot.Snapshot) []string {
	var out []string
	withVolumes, inUse := 0, 0
	for _, sv := range s.Servers {
		if len(sv.Volumes) > 0 {
			withVolumes++
		}
	}
	for _, v := range s.Volumes {
		if v.Status == "in-use" {
			inUse++
		}
	}
	if withVolumes >= AnomalyFloor && len(s.Volumes) == 0 {
		out = append(out, fmt.Sprintf("Nova lists %d servers with volumes, but Cinder lists no volume", withVolumes))
	}
	if inUse >= AnomalyFloor && len(s.Attachments) == 0 {
		out = append(out, fmt.Sprintf("Cinder lists %d volumes in-use, but no attachment record", inUse))
	}
	if inUse >= AnomalyFloor && withVolumes == 0 {
		out = append(out, fmt.Sprintf("Cinder lists %d volumes in-use, but Nova lists no server with a volume", inUse))
	}
	return out
}

// subjects counts what the checks judged: servers, volumes, attachments.
func subjects(s *snapshot.Snapshot) int { return len(s.Servers) + len(s.Volumes) + len(s.Attachments) }
