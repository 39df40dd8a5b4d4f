package check

import (
	"testing"

	"reflect"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// The checks only read: the controller hands them the objects of its
// informer caches without copying them, so a check that changed one would
// corrupt the cache. Every check runs on the storage benchmark's world, and
// every object must be unchanged afterwards.
func TestRun_changesNoObject(t *testing.T) {
	for name, build := range map[string]func() snapshot.Snapshot{
		"storage": storageBenchSnapshot,
	} {
		t.Run(name, func(t *testing.T) {
			s, before := build(), build()
			p := DefaultPolicy()
			p.Storage.FenceGoneNodesAfter = MinFenceGoneNodesAfter
			p.Storage.ForceDetach, p.AllowVMIOnlyDetach, p.DeleteAttachmentPods = true, true, true
			if len(Run(snapshot.New(s), p, now)) == 0 {
				t.Fatal("no finding: the world exercises nothing")
			}
			for _, c := range []struct {
				kind      string
				got, want any
			}{
				{"VMs", s.VMs, before.VMs}, {"VMIs", s.VMIs, before.VMIs}, {"AttachmentPods", s.AttachmentPods, before.AttachmentPods},
				{"PVCs", s.PVCs, before.PVCs}, {"DataVolumes", s.DataVolumes, before.DataVolumes}, {"Pods", s.Pods, before.Pods},
				{"Nodes", s.Nodes, before.Nodes}, {"VolumeAttachments", s.VolumeAttachments, before.VolumeAttachments},
				{"PVs", s.PVs, before.PVs}, {"CSIDrivers", s.CSIDrivers, before.CSIDrivers}, {"Tenants", s.Tenants, before.Tenants},
			} {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("the checks changed %s", c.kind)
				}
			}
		})
	}
}
