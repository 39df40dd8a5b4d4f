package snapshot

import (
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

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

// String lists the kinds, e.g. "VMs,VMIs".
func (k Kinds) String() string {
	var out []string
	for _, row := range kindTable {
		if k.Has(row.Kind) {
			out = append(out, row.Name)
		}
	}
	return strings.Join(out, ",")
}

// Resource is one API resource a kind is read from.
type Resource struct {
	schema.GroupVersionKind
	// Resource is the plural the API paths and RBAC rules name it by.
	Resource string
	// Namespaced: its objects live in namespaces; else cluster-scoped.
	Namespaced bool
}

// Watch says how the controller's informer caches hold a kind.
type Watch uint8

const (
	// NotWatched: no cache; read by a GET where it is needed.
	NotWatched Watch = iota
	// WatchWhole: an informer of whole objects (their managedFields
	// dropped).
	WatchWhole
	// WatchLean: an informer of lean objects (Lean): what no decision
	// reads is dropped as each object arrives.
	WatchLean
	// WatchCompact: an informer of compact objects (Compact), expanded
	// to lean ones for every reader and event handler.
	WatchCompact
)

func (w Watch) String() string {
	return [...]string{"not watched", "whole", "lean", "compact"}[w]
}

// KindRow is one row of the kind table: where a part of a snapshot is
// read from and how. The observers' reads, the controller's caches and
// watches, the RBAC the controller asks for at start and the rules of
// config/rbac follow from it, or are tested against it.
type KindRow struct {
	Kind Kinds
	// Name is how String names it.
	Name      string
	Resources []Resource
	// Label, when set (key=value), picks the kind's objects out of its
	// resource's: the server is asked for those alone.
	Label string
	// AnyNamespace: read in every namespace, also when a scope names
	// some (the KubeVirt CR lives in KubeVirt's own namespace).
	AnyNamespace bool
	// Watch is how the controller's caches hold it.
	Watch Watch
	// ByName: read by name too (get), by a gatherer or by the live re-read
	// before an action, besides any list.
	ByName bool
}

// Verbs are the RBAC verbs reading the kind takes: list and watch where
// the controller caches it, get where it is read by name.
func (r KindRow) Verbs() []string {
	var out []string
	if r.ByName {
		out = append(out, "get")
	}
	if r.Watch != NotWatched {
		out = append(out, "list", "watch")
	}
	return out
}

// ClusterWide reports whether res of the kind is read across namespaces
// whatever the scope: a cluster-scoped resource, or one AnyNamespace.
func (r KindRow) ClusterWide(res Resource) bool { return !res.Namespaced || r.AnyNamespace }

func apiResource(gv schema.GroupVersion, kind, plural string, namespaced bool) Resource {
	return Resource{GroupVersionKind: gv.WithKind(kind), Resource: plural, Namespaced: namespaced}
}

// The groups and versions of the resources tether reads.
var (
	kubevirtGV = kubevirtv1.SchemeGroupVersion
	coreGV     = corev1.SchemeGroupVersion
	storageGV  = storagev1.SchemeGroupVersion
	// podResource holds both the attachment pods and every pod.
	podResource = apiResource(coreGV, "Pod", "pods", true)
)

// kindTable is the kind table, in the order of the kinds' bits.
var kindTable = []KindRow{
	{Kind: KindVMs, Name: "VMs", Watch: WatchCompact, ByName: true,
		Resources: []Resource{apiResource(kubevirtGV, "VirtualMachine", "virtualmachines", true)}},
	{Kind: KindVMIs, Name: "VMIs", Watch: WatchCompact, ByName: true,
		Resources: []Resource{apiResource(kubevirtGV, "VirtualMachineInstance", "virtualmachineinstances", true)}},
	{Kind: KindAttachmentPods, Name: "AttachmentPods", Watch: WatchLean, ByName: true,
		Resources: []Resource{podResource}, Label: AttachmentPodLabel + "=" + AttachmentPodLabelValue},
	{Kind: KindPods, Name: "Pods", Watch: WatchLean, ByName: true,
		Resources: []Resource{podResource}},
	{Kind: KindPVCs, Name: "PVCs", Watch: WatchLean, ByName: true,
		Resources: []Resource{apiResource(coreGV, "PersistentVolumeClaim", "persistentvolumeclaims", true)}},
	{Kind: KindDataVolumes, Name: "DataVolumes", Watch: WatchLean, ByName: true,
		Resources: []Resource{apiResource(cdiv1.SchemeGroupVersion, "DataVolume", "datavolumes", true)}},
	{Kind: KindStorage, Name: "Storage", Watch: WatchLean, ByName: true,
		Resources: []Resource{
			apiResource(coreGV, "Node", "nodes", false),
			apiResource(storageGV, "VolumeAttachment", "volumeattachments", false),
			apiResource(coreGV, "PersistentVolume", "persistentvolumes", false),
		}},
	{Kind: KindCSIDrivers, Name: "CSIDrivers", Watch: WatchWhole,
		Resources: []Resource{apiResource(storageGV, "CSIDriver", "csidrivers", false)}},
	{Kind: KindKubeVirt, Name: "KubeVirt", Watch: WatchWhole, AnyNamespace: true,
		Resources: []Resource{apiResource(kubevirtGV, "KubeVirt", "kubevirts", true)}},
	// Read by the CLI alone (DrainEvictsHotplug): one GET of virt-api's
	// ValidatingWebhookConfiguration.
	{Kind: KindEvictionGuard, Name: "EvictionGuard", Watch: NotWatched, ByName: true,
		Resources: []Resource{apiResource(admissionregistrationv1.SchemeGroupVersion, "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false)}},
}

// KindTable returns the kind table: one row per kind, in the order of
// their bits. The rows are shared: do not change them.
func KindTable() []KindRow { return kindTable }

// Rows returns the rows of the kinds in k.
func (k Kinds) Rows() []KindRow {
	var out []KindRow
	for _, row := range kindTable {
		if k.Has(row.Kind) {
			out = append(out, row)
		}
	}
	return out
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
