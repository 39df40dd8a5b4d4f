package snapshot

import (
	"encoding/json"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Names the storage checks read (facts of Kubernetes and of the CSI sidecars,
// not tether's own contract).
const (
	// OutOfServiceTaint is the operator's assertion that a node is really
	// down (powered off or fenced): the attach/detach controller then
	// detaches its volumes without waiting for the unmount.
	OutOfServiceTaint = corev1.TaintNodeOutOfService
	// ControllerManagedAttachAnnotation on a Node says the attach/detach
	// controller (not the kubelet) attaches and detaches its volumes.
	ControllerManagedAttachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"
	// VANodeIDAnnotation is where external-attacher records, on a
	// VolumeAttachment, the CSI node ID it attached the volume to.
	VANodeIDAnnotation = "csi.alpha.kubernetes.io/node-id"
	// NodeIDAnnotation on a Node maps CSI driver names to the node's CSI node
	// IDs (JSON), as the kubelet registers them.
	NodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"
	// PVCProtectionFinalizer and PVProtectionFinalizer are
	// kube-controller-manager's "in use" finalizers.
	PVCProtectionFinalizer = "kubernetes.io/pvc-protection"
	PVProtectionFinalizer  = "kubernetes.io/pv-protection"
	// AttacherFinalizerPrefix starts the finalizer external-attacher keeps on
	// VolumeAttachments (and PVs) until its driver confirms the detach.
	AttacherFinalizerPrefix = "external-attacher/"
)

var driverNameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9-]`)

// AttacherFinalizer is external-attacher's finalizer for a CSI driver: the
// prefix and the driver name with every character other than letters,
// digits and '-' replaced by '-'.
func AttacherFinalizer(driver string) string {
	return AttacherFinalizerPrefix + driverNameUnsafe.ReplaceAllString(driver, "-")
}

// CSINodeID returns the CSI node ID a Node's annotation records for driver,
// or "".
func CSINodeID(node *corev1.Node, driver string) string {
	raw := node.Annotations[NodeIDAnnotation]
	if raw == "" {
		return ""
	}
	var ids map[string]string
	if json.Unmarshal([]byte(raw), &ids) != nil {
		return ""
	}
	return ids[driver]
}

// NodeReady returns the status of a Node's Ready condition (Unknown when it
// has none).
func NodeReady(node *corev1.Node) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// HasOutOfServiceTaint reports whether the Node carries the out-of-service
// taint (any value, any effect), as the attach/detach controller checks it.
func HasOutOfServiceTaint(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == OutOfServiceTaint {
			return true
		}
	}
	return false
}

// PodTerminal reports whether a pod has finished (phase Succeeded or Failed).
func PodTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// PodClaimNames returns the PVC claim names of a pod's volumes, in order.
func PodClaimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName != "" {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		} else if v.Ephemeral != nil {
			out = append(out, pod.Name+"-"+v.Name)
		}
	}
	return out
}

// storageIndex answers the storage lookups; built on first use.
type storageIndex struct {
	nodes       map[string]*corev1.Node
	pvs         map[string]*corev1.PersistentVolume
	drivers     map[string]*storagev1.CSIDriver
	podsOnNode  map[string][]*corev1.Pod
	podsByClaim map[Key][]*corev1.Pod
	vasByPV     map[string][]*storagev1.VolumeAttachment
	claimsByPV  map[string][]Key
}

func (ix *Index) storageView() *storageIndex {
	ix.storageOnce.Do(func() {
		s := ix.s
		st := storageIndex{
			nodes:       make(map[string]*corev1.Node, len(s.Nodes)),
			pvs:         make(map[string]*corev1.PersistentVolume, len(s.PVs)),
			drivers:     make(map[string]*storagev1.CSIDriver, len(s.CSIDrivers)),
			podsOnNode:  map[string][]*corev1.Pod{},
			podsByClaim: map[Key][]*corev1.Pod{},
			vasByPV:     map[string][]*storagev1.VolumeAttachment{},
			claimsByPV:  map[string][]Key{},
		}
		for i := range s.PVCs {
			if pvc := &s.PVCs[i]; pvc.Spec.VolumeName != "" {
				st.claimsByPV[pvc.Spec.VolumeName] = append(st.claimsByPV[pvc.Spec.VolumeName], Key{pvc.Namespace, pvc.Name})
			}
		}
		for i := range s.Nodes {
			st.nodes[s.Nodes[i].Name] = &s.Nodes[i]
		}
		for i := range s.PVs {
			st.pvs[s.PVs[i].Name] = &s.PVs[i]
		}
		for i := range s.CSIDrivers {
			st.drivers[s.CSIDrivers[i].Name] = &s.CSIDrivers[i]
		}
		for i := range s.Pods {
			pod := &s.Pods[i]
			if pod.Spec.NodeName != "" {
				st.podsOnNode[pod.Spec.NodeName] = append(st.podsOnNode[pod.Spec.NodeName], pod)
			}
			seen := map[string]bool{}
			for _, c := range PodClaimNames(pod) {
				if !seen[c] {
					seen[c] = true
					k := Key{pod.Namespace, c}
					st.podsByClaim[k] = append(st.podsByClaim[k], pod)
				}
			}
		}
		for i := range s.VolumeAttachments {
			va := &s.VolumeAttachments[i]
			if pv := va.Spec.Source.PersistentVolumeName; pv != nil && *pv != "" {
				st.vasByPV[*pv] = append(st.vasByPV[*pv], va)
			}
		}
		ix.storage = st
	})
	return &ix.storage
}

// Node returns the Node name, or nil.
func (ix *Index) Node(name string) *corev1.Node { return ix.storageView().nodes[name] }

// PV returns the PersistentVolume name, or nil.
func (ix *Index) PV(name string) *corev1.PersistentVolume { return ix.storageView().pvs[name] }

// CSIDriver returns the CSIDriver name, or nil.
func (ix *Index) CSIDriver(name string) *storagev1.CSIDriver { return ix.storageView().drivers[name] }

// PodsOnNode returns the pods bound to node (spec.nodeName), any phase.
func (ix *Index) PodsOnNode(node string) []*corev1.Pod { return ix.storageView().podsOnNode[node] }

// PodsUsingClaim returns the pods in ns with a volume using claim, any phase
// and whether scheduled or not.
func (ix *Index) PodsUsingClaim(ns, claim string) []*corev1.Pod {
	return ix.storageView().podsByClaim[Key{ns, claim}]
}

// ClaimsBoundTo returns the claims whose spec.volumeName is pv.
func (ix *Index) ClaimsBoundTo(pv string) []Key { return ix.storageView().claimsByPV[pv] }

// VolumeAttachmentsOf returns the VolumeAttachments of PV pv.
func (ix *Index) VolumeAttachmentsOf(pv string) []*storagev1.VolumeAttachment {
	return ix.storageView().vasByPV[pv]
}

// ClaimOf returns the namespace and name of the claim a PV is bound to,
// or "", "".
func ClaimOf(pv *corev1.PersistentVolume) (string, string) {
	if pv == nil || pv.Spec.ClaimRef == nil {
		return "", ""
	}
	return pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name
}
