package snapshot

import "strings"

// Kinds is a set of the parts of a snapshot that an observer reads. A
// check declares the kinds it decides from (check.Reads), so that a run of
// some checks reads only what they need.
type Kinds uint16

// The parts of a snapshot. Tenants are read whenever they are configured.
const (
	KindVMs Kinds = 1 << iota
	KindVMIs
	// KindAttachmentPods: the pods labelled kubevirt.io=hotplug-disk.
	KindAttachmentPods
	// KindPods: every pod in scope (attachment pods included).
	KindPods
	KindPVCs
	KindDataVolumes
	// KindStorage: Nodes, VolumeAttachments and PVs, which are read together
	// or not at all (an attachment seen without its Node would look like
	// one whose node is gone), and the records of nodes gone.
	KindStorage
	KindCSIDrivers
	// KindKubeVirt: the KubeVirt CR's feature gates and version.
	KindKubeVirt
	// KindEvictionGuard: virt-api's ValidatingWebhookConfiguration, for
	// its guard of attachment pods against eviction.
	KindEvictionGuard

	AllKinds = KindVMs | KindVMIs | KindAttachmentPods | KindPods | KindPVCs | KindDataVolumes | KindStorage | KindCSIDrivers | KindKubeVirt | KindEvictionGuard
)

// Has reports whether k holds every kind of x.
func (k Kinds) Has(x Kinds) bool { return k&x == x }

var kindNames = []string{"VMs", "VMIs", "AttachmentPods", "Pods", "PVCs", "DataVolumes", "Storage", "CSIDrivers", "KubeVirt", "EvictionGuard"}

// String lists the kinds, e.g. "VMs,VMIs".
func (k Kinds) String() string {
	var out []string
	for i, n := range kindNames {
		if k.Has(1 << i) {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// Only returns a copy of s as an observer that read only the kinds k would
// leave it: the parts outside k empty, the objects shared, not indexed.
// Every pod read includes the attachment pods, so KindPods keeps them too.
func (s *Snapshot) Only(k Kinds) Snapshot {
	out := Snapshot{Tenants: s.Tenants, Warnings: s.Warnings}
	if k.Has(KindVMs) {
		out.VMs = s.VMs
	}
	if k.Has(KindVMIs) {
		out.VMIs = s.VMIs
	}
	if k.Has(KindAttachmentPods) || k.Has(KindPods) {
		out.AttachmentPods = s.AttachmentPods
	}
	if k.Has(KindPods) {
		out.Pods = s.Pods
	}
	if k.Has(KindPVCs) {
		out.PVCs = s.PVCs
	}
	if k.Has(KindDataVolumes) {
		out.DataVolumes = s.DataVolumes
	}
	if k.Has(KindStorage) {
		out.Nodes, out.VolumeAttachments, out.PVs, out.NodesGoneSince = s.Nodes, s.VolumeAttachments, s.PVs, s.NodesGoneSince
	}
	if k.Has(KindCSIDrivers) {
		out.CSIDrivers = s.CSIDrivers
	}
	if k.Has(KindKubeVirt) {
		out.FeatureGates = s.FeatureGates
	}
	if k.Has(KindEvictionGuard) {
		out.EvictionGuard = s.EvictionGuard
	}
	return out
}
