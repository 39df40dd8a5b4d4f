package act

import (
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
)

// The unplug lifecycle of KubeVirt v1.9.0: virt-controller drops the
// volume from the VMI spec and keeps its status entry (Ready/MountedToPod
// kept, else Detaching; pkg/virt-controller/watch/vmi/storage.go:316-352),
// virt-handler unmounts it to UnMountedFromPod (pkg/virt-handler/vm.go:
// 514-522), virt-controller deletes the attachment pod, and the entry goes.
// A pod holding a Ready/MountedToPod volume is never deleted
// (volume-hotplug.go:105-117): that state does not end by itself.
func TestDecideUnplug(t *testing.T) {
	vmi := func(inSpec bool, phase kubevirtv1.VolumePhase, listed bool) *kubevirtv1.VirtualMachineInstance {
		v := &kubevirtv1.VirtualMachineInstance{}
		v.Status.NodeName = "node-7"
		if inSpec {
			v.Spec.Volumes = []kubevirtv1.Volume{{Name: "vol"}}
		}
		if listed {
			v.Status.VolumeStatus = []kubevirtv1.VolumeStatus{{Name: "vol", Phase: phase,
				HotplugVolume: &kubevirtv1.HotplugVolumeStatus{AttachPodName: "hp-volume-x"}}}
		}
		return v
	}
	for _, c := range []struct {
		name    string
		vmi     *kubevirtv1.VirtualMachineInstance
		outcome drift.Outcome
		cause   drift.Cause
		says    string
	}{
		{"entry gone", vmi(false, "", false), drift.Applied, "", "left the VMI status"},
		{"queued, spec still lists it", vmi(true, kubevirtv1.VolumeReady, true), drift.Pending, "", "virt-controller has not applied the removal"},
		{"unmounted, pod going", vmi(false, kubevirtv1.HotplugVolumeUnMounted, true), drift.Pending, "", "has unmounted it"},
		{"detaching", vmi(false, kubevirtv1.HotplugVolumeDetaching, true), drift.Pending, "", "attachment pod hp-volume-x is being removed"},
		{"Ready, handler has not unmounted", vmi(false, kubevirtv1.VolumeReady, true), drift.Failed, UnmountStuck, `virt-handler on node node-7 has not unmounted "vol" after 1m0s`},
		{"MountedToPod, handler has not unmounted", vmi(false, kubevirtv1.HotplugVolumeMounted, true), drift.Failed, UnmountStuck, "phase MountedToPod"},
	} {
		r := decideUnplug(c.vmi, "vol", virtapi.VMI, time.Minute)
		if r.Outcome != c.outcome || r.Cause != c.cause || !strings.Contains(r.Message, c.says) {
			t.Errorf("%s: got %s/%s %q, want %s/%s saying %q", c.name, r.Outcome, r.Cause, r.Message, c.outcome, c.cause, c.says)
		}
	}
}
