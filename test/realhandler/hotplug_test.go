package realhandler

import (
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
)

// A VMI-level addvolume reaches the guest: the attachment pod runs on the
// real node, virt-handler mounts the claim into the launcher, libvirt
// attaches it on the SCSI bus, the guest sees a disk whose serial is the
// volume's name, and the volume turns Ready; removevolume takes it out of
// the guest the same way.
func TestHotplug_VMIRoute_reachesTheGuestAndLeavesIt(t *testing.T) {
	w := newWorld(t)
	w.claims("hp1")
	w.guest("g1")
	w.addVolume(virtapi.VMI, "g1", "hp1")
	w.WaitPhase("g1", "hp1", kubevirtv1.VolumeReady)
	w.waitConsole("g1", time.Minute, `TETHER-DISK-ADDED name=sd\w+ serial=hp1 `)
	w.RemoveVolume(virtapi.VMI, "g1", "hp1")
	w.waitConsole("g1", 2*time.Minute, `TETHER-DISK-REMOVED name=sd\w+ serial=hp1`)
	t.Logf("the guest's console:\n%s", w.console("g1"))
}
