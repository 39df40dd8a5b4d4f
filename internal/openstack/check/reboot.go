package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// Nova deletes a server's dangling mappings itself when the server reboots:
// nova/compute/manager.py _reboot_instance calls _delete_dangling_bdms, which
// reads the Cinder attachment each volume mapping records and destroys the
// mapping when the read answers 404 (VolumeAttachmentNotFound); then it
// deletes the server's Cinder attachments that no mapping records. It came
// with Nova 28.0.0 (2023.2, "Delete dangling bdms", bug 2019078); both kinds
// of reboot run it, and Nova's guide names the hard one
// (doc/source/admin/manage-volumes.rst). A mapping that records no
// attachment, or one that still exists, is left alone.
//
// tether knows the release by Nova's maximum microversion
// (nova/api/openstack/api_version_request.py): Zed ends at 2.93, 2023.1 and
// 2023.2 both at 2.95, 2024.1 at 2.96, 2025.1 at 2.100. As 2.95 does not
// tell 2023.2 from 2023.1, 2.96 is the first maximum that proves the
// clean-up.
var rebootCleanupFrom = [2]int{2, 96}

// NovaRebootCleansDangling says whether a Nova whose maximum microversion is
// max ("2.100"; empty when unknown) deletes, on a reboot, the mappings whose
// recorded Cinder attachment is gone.
func NovaRebootCleansDangling(max string) bool {
	v, ok := parseMicroversion(max)
	if !ok {
		return false
	}
	return v[0] > rebootCleanupFrom[0] || v[0] == rebootCleanupFrom[0] && v[1] >= rebootCleanupFrom[1]
}

// parseMicroversion reads "MAJOR.MINOR" as two numbers: 2.100 is above
// 2.96, which a comparison of strings gets wrong.
func parseMicroversion(s string) ([2]int, bool) {
	major, minor, ok := strings.Cut(s, ".")
	if !ok {
		return [2]int{}, false
	}
	a, err1 := strconv.Atoi(major)
	b, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil || a < 0 || b < 0 {
		return [2]int{}, false
	}
	return [2]int{a, b}, true
}

// rebootRepairs says whether a reboot of s makes Nova delete its mapping
// sv: Nova has the clean-up, the attachment the mapping records answered
// 404 to a read by ID (the same read Nova makes), and the server runs
// without a task (Nova refuses a reboot during one; a stopped server would
// be started by it, and tether repairs that one itself).
func (in Input) rebootRepairs(s *snapshot.Server, sv snapshot.ServerVolume) bool {
	return NovaRebootCleansDangling(in.Snapshot.NovaMaxMicroversion) &&
		sv.AttachmentID != "" && in.gone(sv.AttachmentID) &&
		!serverStopped(s) && s.TaskState == "" && !slices.Contains(transitionalServer, s.VMState)
}

func rebootRemedy(s *snapshot.Server, sv snapshot.ServerVolume, max string) string {
	return fmt.Sprintf("hard reboot: Nova repairs it itself. This cloud's Nova (maximum microversion %s, 2024.1 or later) deletes on a reboot each mapping whose Cinder attachment answers 404, as attachment %s does: `openstack server reboot --hard %s`, then `openstack server volume list %s` no longer lists volume %s. The guest restarts without the volume: make sure it no longer needs it first",
		max, sv.AttachmentID, s.ID, s.ID, sv.VolumeID)
}
