package bundle

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// kind is one kind tether reads from a bundle: the version its objects are
// decoded as, the other versions whose objects have the same schema, the
// resource name layouts name their files and folders after, and the part
// of a snapshot it fills.
type kind struct {
	gvk      schema.GroupVersionKind
	also     []string
	resource string
	cluster  bool
	part     snapshot.Kinds
	// short are kubectl's short names of the resource.
	short []string
}

// kinds are the kinds a bundle is read for: those observe reads (see
// observe.StorageRead and observe.Gates) and the tenants' CSINodes. Every
// other kind in a bundle is counted and left.
var kinds = []kind{
	{gvk: gvk("kubevirt.io", "v1", "VirtualMachineInstance"), also: []string{"v1alpha3"}, resource: "virtualmachineinstances", short: []string{"vmi", "vmis"}, part: snapshot.KindVMIs},
	{gvk: gvk("kubevirt.io", "v1", "VirtualMachine"), also: []string{"v1alpha3"}, resource: "virtualmachines", short: []string{"vm", "vms"}, part: snapshot.KindVMs},
	{gvk: gvk("kubevirt.io", "v1", "KubeVirt"), also: []string{"v1alpha3"}, resource: "kubevirts", short: []string{"kv", "kvs"}, part: snapshot.KindKubeVirt},
	{gvk: gvk("", "v1", "Pod"), resource: "pods", short: []string{"po"}, part: snapshot.KindPods | snapshot.KindAttachmentPods},
	{gvk: gvk("", "v1", "PersistentVolumeClaim"), resource: "persistentvolumeclaims", short: []string{"pvc"}, part: snapshot.KindPVCs},
	{gvk: gvk("cdi.kubevirt.io", "v1beta1", "DataVolume"), resource: "datavolumes", short: []string{"dv", "dvs"}, part: snapshot.KindDataVolumes},
	{gvk: gvk("", "v1", "Node"), resource: "nodes", short: []string{"no"}, cluster: true, part: snapshot.KindStorage},
	{gvk: gvk("", "v1", "PersistentVolume"), resource: "persistentvolumes", short: []string{"pv"}, cluster: true, part: snapshot.KindStorage},
	{gvk: gvk("storage.k8s.io", "v1", "VolumeAttachment"), resource: "volumeattachments", cluster: true, part: snapshot.KindStorage},
	{gvk: gvk("storage.k8s.io", "v1", "CSIDriver"), resource: "csidrivers", cluster: true, part: snapshot.KindCSIDrivers},
	{gvk: gvk("storage.k8s.io", "v1", "CSINode"), resource: "csinodes", cluster: true},
	{gvk: gvk("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"), resource: "validatingwebhookconfigurations", cluster: true, part: snapshot.KindEvictionGuard},
}

func gvk(group, version, k string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: group, Version: version, Kind: k}
}

// kindOf returns the kind read for group and kind name, if tether reads it.
func kindOf(group, name string) (*kind, bool) {
	for i := range kinds {
		if kinds[i].gvk.Group == group && kinds[i].gvk.Kind == name {
			return &kinds[i], true
		}
	}
	return nil, false
}

// kindOfResource returns the kind read whose resource is res, named as
// layouts name it: "pods", or "virtualmachines.kubevirt.io" with its group.
func kindOfResource(res string) (*kind, bool) {
	for i := range kinds {
		k := &kinds[i]
		if res == k.resource || (k.gvk.Group != "" && res == k.resource+"."+k.gvk.Group) {
			return k, true
		}
	}
	return nil, false
}

// kindNamed returns the kind read that a file name names: its resource
// (with or without its group), its kind in lower case or a short name
// (pv.yaml, persistentvolume.yaml, persistentvolumes.json).
func kindNamed(name string) (*kind, bool) {
	if k, ok := kindOfResource(name); ok {
		return k, true
	}
	for i := range kinds {
		k := &kinds[i]
		if name == strings.ToLower(k.gvk.Kind) || slices.Contains(k.short, name) {
			return k, true
		}
	}
	return nil, false
}

// reads says whether version v of k is one tether decodes.
func (k *kind) reads(v string) bool {
	if v == k.gvk.Version {
		return true
	}
	for _, a := range k.also {
		if a == v {
			return true
		}
	}
	return false
}
