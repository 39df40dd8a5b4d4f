package snapshot

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Key names a namespaced object.
type Key struct {
	Namespace string
	Name      string
}

// AttachPodRef is a VMI volume status entry that names an attachment pod.
type AttachPodRef struct {
	VMI    *VMI
	Volume string
	// PodUID is the attachPodUID of the entry; it may be empty.
	PodUID types.UID
}

// Index answers the lookups the checks need in constant time. It never
// changes what it answers. The parts every pass needs are built up front;
// the others on first use, safely for concurrent callers.
type Index struct {
	s *Snapshot
	// vms, pods and pvcs are keyed by namespace, then name (byNamespace).
	vms byNamespace[int32]
	// podRefs and migrationPods are only filled for namespaces that hold
	// attachment pods: nobody else asks.
	podRefs       map[Key][]AttachPodRef
	migrationPods map[types.UID]*VMI

	tenantsByNS map[string][]*TenantIndex
	tenantsAll  []*TenantIndex

	vmisOnce sync.Once
	vmis     map[Key]*VMI
	vmisByNS map[string][]*VMI
	// vmiAtByNS holds the same VMIs as their indexes in the snapshot.
	vmiAtByNS map[string][]int
	vmsOnce   sync.Once
	vmsByNS   map[string][]*VM
	// vmNS are the namespaces that hold a VM or a VMI.
	vmNS     []string
	podsOnce sync.Once
	pods     byNamespace[int32]
	pvcsOnce sync.Once
	pvcs     byNamespace[pvcEntry]
	dvsOnce  sync.Once
	dvs      map[Key]*cdiv1.DataVolume

	storageOnce sync.Once
	storage     storageIndex
}

func buildIndex(s *Snapshot) *Index {
	ix := &Index{
		s:             s,
		vms:           indexByNamespace(len(s.VMs), func(i int) (string, string, int32) { return s.VMs[i].Namespace, s.VMs[i].Name, int32(i) }),
		podRefs:       make(map[Key][]AttachPodRef, len(s.AttachmentPods)),
		migrationPods: map[types.UID]*VMI{},
		tenantsByNS:   map[string][]*TenantIndex{},
	}
	podNS := map[string]bool{}
	for i := range s.AttachmentPods {
		if ns := s.AttachmentPods[i].Namespace; i == 0 || ns != s.AttachmentPods[i-1].Namespace {
			podNS[ns] = true
		}
	}
	// Most pods are named by exactly one VMI: their ref lists are one-entry
	// windows into refBuf instead of separate allocations.
	refBuf := make([]AttachPodRef, 0, len(s.AttachmentPods))
	for i := range s.VMIs {
		if vmi := &s.VMIs[i]; podNS[vmi.Namespace] {
			refBuf = ix.indexVMIForPods(vmi, refBuf)
		}
	}
	ix.indexTenants(s.Tenants)
	return ix
}

// indexVMIs indexes VMIs by key and by namespace. LIST results come sorted
// by namespace, so a run of one namespace is appended at once.
func (ix *Index) indexVMIs() {
	vmis := ix.s.VMIs
	ix.vmis = make(map[Key]*VMI, len(vmis))
	ix.vmisByNS = map[string][]*VMI{}
	ix.vmiAtByNS = map[string][]int{}
	start := 0
	for i := range vmis {
		vmi := &vmis[i]
		ix.vmis[Key{vmi.Namespace, vmi.Name}] = vmi
		if i+1 == len(vmis) || vmis[i+1].Namespace != vmi.Namespace {
			list, at := ix.vmisByNS[vmi.Namespace], ix.vmiAtByNS[vmi.Namespace]
			for j := start; j <= i; j++ {
				list, at = append(list, &vmis[j]), append(at, j)
			}
			ix.vmisByNS[vmi.Namespace], ix.vmiAtByNS[vmi.Namespace] = list, at
			start = i + 1
		}
	}
}

// indexVMIForPods records which attachment pods a VMI names.
func (ix *Index) indexVMIForPods(vmi *VMI, refBuf []AttachPodRef) []AttachPodRef {
	if ms := vmi.Status.MigrationState; ms != nil && ms.TargetAttachmentPodUID != "" {
		ix.migrationPods[ms.TargetAttachmentPodUID] = vmi
	}
	var last *kubevirtv1.HotplugVolumeStatus
	for i := range vmi.Status.VolumeStatus {
		vs := &vmi.Status.VolumeStatus[i]
		hp := vs.HotplugVolume
		if hp == nil || hp.AttachPodName == "" {
			continue
		}
		if last != nil && *last == *hp {
			continue // one pod usually attaches all of a VMI's hot-plugs
		}
		last = hp
		ref := AttachPodRef{VMI: vmi, Volume: vs.Name, PodUID: hp.AttachPodUID}
		k := Key{vmi.Namespace, hp.AttachPodName}
		if refs, ok := ix.podRefs[k]; ok {
			ix.podRefs[k] = append(refs, ref)
			continue
		}
		refBuf = append(refBuf, ref)
		ix.podRefs[k] = refBuf[len(refBuf)-1 : len(refBuf) : len(refBuf)]
	}
	return refBuf
}

// VM returns the VirtualMachine ns/name, or nil.
func (ix *Index) VM(ns, name string) *VM {
	if i, ok := ix.vms[ns][name]; ok {
		return &ix.s.VMs[i]
	}
	return nil
}

// VMI returns the VirtualMachineInstance ns/name, or nil.
func (ix *Index) VMI(ns, name string) *VMI {
	ix.vmisOnce.Do(ix.indexVMIs)
	return ix.vmis[Key{ns, name}]
}

// VMIsIn returns the VMIs of namespace ns, in snapshot order.
func (ix *Index) VMIsIn(ns string) []*VMI {
	ix.vmisOnce.Do(ix.indexVMIs)
	return ix.vmisByNS[ns]
}

// VMIIndexesIn returns the indexes in the snapshot's VMIs of the VMIs of
// namespace ns, in snapshot order (the VMIs of VMIsIn).
func (ix *Index) VMIIndexesIn(ns string) []int {
	ix.vmisOnce.Do(ix.indexVMIs)
	return ix.vmiAtByNS[ns]
}

// VMsIn returns the VMs of namespace ns, in snapshot order.
func (ix *Index) VMsIn(ns string) []*VM {
	ix.vmsOnce.Do(ix.indexVMNamespaces)
	return ix.vmsByNS[ns]
}

// VMNamespaces returns the namespaces that hold a VM or a VMI, each once,
// in the order the snapshot first names them (its VMs, then its VMIs).
func (ix *Index) VMNamespaces() []string {
	ix.vmsOnce.Do(ix.indexVMNamespaces)
	return ix.vmNS
}

// indexVMNamespaces indexes VMs by namespace and lists the namespaces of
// the VMs and VMIs. LIST results come sorted by namespace, so a run of one
// namespace is appended at once.
func (ix *Index) indexVMNamespaces() {
	vms := ix.s.VMs
	ix.vmsByNS = map[string][]*VM{}
	seen := map[string]bool{}
	add := func(ns string) {
		if !seen[ns] {
			seen[ns] = true
			ix.vmNS = append(ix.vmNS, ns)
		}
	}
	start := 0
	for i := range vms {
		if ns := vms[i].Namespace; i+1 == len(vms) || vms[i+1].Namespace != ns {
			add(ns)
			list := ix.vmsByNS[ns]
			for j := start; j <= i; j++ {
				list = append(list, &vms[j])
			}
			ix.vmsByNS[ns] = list
			start = i + 1
		}
	}
	vmis := ix.s.VMIs
	for i := range vmis {
		if ns := vmis[i].Namespace; i+1 == len(vmis) || vmis[i+1].Namespace != ns {
			add(ns)
		}
	}
}

// AttachmentPod returns the attachment pod ns/name, or nil.
func (ix *Index) AttachmentPod(ns, name string) *corev1.Pod {
	pods := ix.s.AttachmentPods
	ix.podsOnce.Do(func() {
		ix.pods = indexByNamespace(len(pods), func(i int) (string, string, int32) { return pods[i].Namespace, pods[i].Name, int32(i) })
	})
	if i, ok := ix.pods[ns][name]; ok {
		return &pods[i]
	}
	return nil
}

// pvcEntry is an indexed claim (its index in the snapshot's PVCs) and
// whether it is being deleted: the common question is answered without
// reading the claim itself, from an entry no larger than a pointer.
type pvcEntry struct {
	at       int32
	deleting bool
}

// PVC returns the PersistentVolumeClaim ns/name, or nil.
func (ix *Index) PVC(ns, name string) *corev1.PersistentVolumeClaim {
	pvc, _ := ix.PVCState(ns, name)
	return pvc
}

// PVCState returns the PersistentVolumeClaim ns/name, or nil, and whether
// it has a deletionTimestamp.
func (ix *Index) PVCState(ns, name string) (pvc *corev1.PersistentVolumeClaim, deleting bool) {
	at, deleting := ix.PVCIndex(ns, name)
	if at < 0 {
		return nil, false
	}
	return &ix.s.PVCs[at], deleting
}

// PVCIndex returns the index in the snapshot's PVCs of the claim ns/name
// (-1 when there is none) and whether it has a deletionTimestamp: for
// callers that keep what they found in a compact table.
func (ix *Index) PVCIndex(ns, name string) (at int, deleting bool) {
	return ix.ClaimsIn(ns).Index(name)
}

// ClaimsIn returns the claims of namespace ns, for a caller that looks up
// many names in one namespace: the namespace is found once.
func (ix *Index) ClaimsIn(ns string) Claims {
	pvcs := ix.s.PVCs
	ix.pvcsOnce.Do(func() {
		ix.pvcs = indexByNamespace(len(pvcs), func(i int) (string, string, pvcEntry) {
			return pvcs[i].Namespace, pvcs[i].Name, pvcEntry{at: int32(i), deleting: pvcs[i].DeletionTimestamp != nil}
		})
	})
	return Claims{byName: ix.pvcs[ns]}
}

// Claims are the indexed claims of one namespace (Index.ClaimsIn).
type Claims struct {
	byName map[string]pvcEntry
}

// Index returns the index in the snapshot's PVCs of the claim called name
// (-1 when there is none) and whether it has a deletionTimestamp.
func (c Claims) Index(name string) (at int, deleting bool) {
	e, ok := c.byName[name]
	if !ok {
		return -1, false
	}
	return int(e.at), e.deleting
}

// byNamespace maps a namespace, then a name, to a small value (an index
// into one of the snapshot's slices): a lookup hashes and compares the name
// alone, in a map whose entries are no larger than a pointer.
type byNamespace[V any] map[string]map[string]V

// indexByNamespace indexes n objects; entry i gives object i's namespace,
// name and value. Of two objects of one name, the later is kept. LIST
// results come sorted by namespace: each run of one namespace is counted
// first, so that its map is made to size.
func indexByNamespace[V any](n int, entry func(i int) (ns, name string, v V)) byNamespace[V] {
	out := byNamespace[V]{}
	for i := 0; i < n; {
		ns, _, _ := entry(i)
		j := i + 1
		for ; j < n; j++ {
			if next, _, _ := entry(j); next != ns {
				break
			}
		}
		byName := out[ns]
		if byName == nil {
			byName = make(map[string]V, j-i)
			out[ns] = byName
		}
		for ; i < j; i++ {
			_, name, v := entry(i)
			byName[name] = v
		}
	}
	return out
}

// DataVolume returns the DataVolume ns/name, or nil.
func (ix *Index) DataVolume(ns, name string) *cdiv1.DataVolume {
	ix.dvsOnce.Do(func() {
		ix.dvs = make(map[Key]*cdiv1.DataVolume, len(ix.s.DataVolumes))
		for i := range ix.s.DataVolumes {
			dv := &ix.s.DataVolumes[i]
			ix.dvs[Key{dv.Namespace, dv.Name}] = dv
		}
	})
	return ix.dvs[Key{ns, name}]
}

// AttachPodRefs returns the VMI volume statuses in ns that name attachment
// pod name. Only answered for namespaces that hold attachment pods.
func (ix *Index) AttachPodRefs(ns, name string) []AttachPodRef {
	return ix.podRefs[Key{ns, name}]
}

// MigrationTargetOf returns the VMI in ns whose migration state names the
// attachment pod uid as its target attachment pod, or nil.
func (ix *Index) MigrationTargetOf(ns string, uid types.UID) *VMI {
	vmi := ix.migrationPods[uid]
	if vmi == nil || vmi.Namespace != ns {
		return nil
	}
	return vmi
}

// TenantsFor returns the tenants whose evidence applies to VMIs in ns: those
// configured for ns and those configured for every namespace.
func (ix *Index) TenantsFor(ns string) []*TenantIndex {
	if t, ok := ix.tenantsByNS[ns]; ok {
		return t
	}
	return ix.tenantsAll
}
