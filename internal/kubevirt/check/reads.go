package check

import "github.com/tether-dev/tether/internal/kubevirt/snapshot"

// reads are the kinds each check decides from. A check must find the same
// with only these as with a whole snapshot (TestChecksReadOnlyWhatTheyDeclare):
// an observer that leaves the rest unread makes no check see a missing
// object where there is one.
var reads = map[string]snapshot.Kinds{
	OrphanHotplugVolume:     snapshot.KindVMs | snapshot.KindVMIs | snapshot.KindDataVolumes | snapshot.KindKubeVirt,
	OrphanAttachmentPod:     snapshot.KindVMIs | snapshot.KindAttachmentPods,
	DanglingVolumeReference: snapshot.KindVMs | snapshot.KindVMIs | snapshot.KindAttachmentPods | snapshot.KindPVCs | snapshot.KindDataVolumes | snapshot.KindKubeVirt,
	StaleVolumeAttachment:   snapshot.KindStorage | snapshot.KindPods | snapshot.KindPVCs,
	MultiAttachConflict:     snapshot.KindStorage | snapshot.KindPods | snapshot.KindPVCs | snapshot.KindCSIDrivers,
	BlockedDeletion:         snapshot.KindStorage | snapshot.KindPods | snapshot.KindPVCs | snapshot.KindDataVolumes | snapshot.KindVMs,
}

// Reads returns the kinds the named checks decide from; no names means
// every check. An unknown name reads everything.
func Reads(names []string) snapshot.Kinds {
	if len(names) == 0 {
		return snapshot.AllKinds
	}
	var k snapshot.Kinds
	for _, n := range names {
		r, ok := reads[n]
		if !ok {
			return snapshot.AllKinds
		}
		k |= r
	}
	return k
}
