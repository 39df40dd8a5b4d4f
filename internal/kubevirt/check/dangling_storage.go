package check

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// storageState is what the snapshot says about the storage behind one
// volume reference.
type storageState int

const (
	// storagePresent: the PVC exists and is not being deleted, or a
	// dataVolumeTemplate of the VM will create the DataVolume.
	storagePresent storageState = iota
	// storageProvisioning: a DataVolume exists and has not finished; the
	// reference is not dangling yet.
	storageProvisioning
	// storageMissing: neither the PVC nor a DataVolume that provides it exists.
	storageMissing
	// storageFailed: the DataVolume is in phase Failed.
	storageFailed
	// storagePostponed: the PVC or DataVolume has a deletionTimestamp, and
	// finalizers keep it. It still exists: Kubernetes removes an object only
	// once its last finalizer is gone (kubernetes.io/pvc-protection while a
	// pod uses a claim, tether.dev/in-use while a VM refers to it), so the
	// reference is not dangling. It is reported, never acted on.
	storagePostponed
)

// dangling reports whether the storage is missing or failed: the reference
// points at nothing usable.
func (s storageState) dangling() bool { return s == storageMissing || s == storageFailed }

// reported reports whether the reference gets a finding: its storage is
// dangling, or its deletion is postponed.
func (s storageState) reported() bool { return s.dangling() || s == storagePostponed }

// source is what a volume refers to: a PVC or a DataVolume, by name.
type source struct {
	kind string // "PVC" or "DataVolume"
	name string
}

func volumeSource(v *kubevirtv1.Volume) (source, bool) {
	switch {
	case v == nil:
	case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName != "":
		return source{kind: "PVC", name: v.PersistentVolumeClaim.ClaimName}, true
	case v.DataVolume != nil && v.DataVolume.Name != "":
		return source{kind: "DataVolume", name: v.DataVolume.Name}, true
	}
	return source{}, false
}

// storage is the judged state of one source with what it was judged from.
type storage struct {
	state storageState
	// gone: no PVC and no DataVolume of the referenced name exists at all
	// (not even one being deleted), so nothing can mount the claim from now
	// on and nothing will re-create it. Only then may a reference be removed.
	gone bool
	// kept names the object whose deletion is postponed (storagePostponed),
	// keptBy the finalizers that postpone it.
	kept, keptBy string
	// why is what decided the state, pvc and dv what was found of the
	// name: the evidence (storageFacts) says it from them.
	why storageWhy
	pvc *corev1.PersistentVolumeClaim
	dv  *cdiv1.DataVolume
}

// storageWhy is what decided a storage state other than present or
// provisioning.
type storageWhy int

const (
	whyFound       storageWhy = iota // present or provisioning: no evidence
	whyPVCDeleting                   // the PVC is being deleted
	whyDVDeleting                    // the DataVolume is being deleted
	whyDVFailed                      // the DataVolume failed
	whyDVSucceeded                   // the DataVolume succeeded, its PVC is missing
	whyNothing                       // no PVC, no DataVolume
)

// judgeStorage decides about src in namespace ns. templated says the VM has
// a dataVolumeTemplate of that name.
//
// A PVC reference is satisfied by the PVC; while it is missing, a DataVolume
// of the same name that is still provisioning will create it. A DataVolume
// reference is satisfied by a Succeeded DataVolume with its PVC, by a
// dataVolumeTemplate (virt-controller creates the DataVolume), or by the PVC
// alone (CDI garbage-collects succeeded DataVolumes and keeps their PVCs).
func judgeStorage(in Input, ns string, src source, templated bool) storage {
	pvc, pvcDeleting := in.Index.PVCState(ns, src.name)
	return judgeFound(in, ns, src, templated, pvc, pvcDeleting)
}

// judgeFound is judgeStorage once the PVC of src's name has been looked up.
func judgeFound(in Input, ns string, src source, templated bool, pvc *corev1.PersistentVolumeClaim, pvcDeleting bool) storage {
	dv := in.Index.DataVolume(ns, src.name)
	st := storage{gone: pvc == nil && dv == nil, pvc: pvc, dv: dv}
	postponed := func(kind string, obj metav1.Object, why storageWhy) {
		st.state, st.why, st.kept, st.keptBy = storagePostponed, why, kind+" "+ns+"/"+src.name, finalizerList(obj.GetFinalizers())
	}
	if src.kind == "PVC" {
		switch {
		case pvc != nil && !pvcDeleting:
			st.state = storagePresent
		case dv != nil && !IsTerminating(dv) && provisioning(dv):
			st.state = storageProvisioning // CDI may be re-creating the PVC
		case pvc != nil:
			postponed("PVC", pvc, whyPVCDeleting)
		case dv != nil && IsTerminating(dv):
			postponed("DataVolume", dv, whyDVDeleting)
		case dv != nil && dv.Status.Phase == cdiv1.Failed:
			st.state, st.why = storageFailed, whyDVFailed
		case dv == nil && templated:
			st.state = storagePresent
		case dv != nil:
			// A Succeeded DataVolume without its PVC: CDI may re-create it.
			st.state, st.why = storageMissing, whyDVSucceeded
		default:
			st.state, st.why = storageMissing, whyNothing
		}
		return st
	}
	switch {
	case dv != nil && IsTerminating(dv):
		postponed("DataVolume", dv, whyDVDeleting)
	case dv != nil && dv.Status.Phase == cdiv1.Failed:
		st.state, st.why = storageFailed, whyDVFailed
	case dv != nil && provisioning(dv):
		st.state = storageProvisioning
	case pvc != nil && pvcDeleting:
		postponed("PVC", pvc, whyPVCDeleting)
	case pvc != nil:
		st.state = storagePresent
	case dv == nil && templated:
		st.state = storagePresent
	case dv != nil:
		st.state, st.why = storageMissing, whyDVSucceeded
	default:
		st.state, st.why = storageMissing, whyNothing
	}
	return st
}

// storageFacts is the evidence of a judgement of src in ns: that the PVC a
// PVC reference names does not exist, then what was found instead.
func (in Input) storageFacts(ns string, src source, st storage) []string {
	if st.why == whyFound {
		return nil
	}
	var out []string
	if src.kind == "PVC" && st.why != whyPVCDeleting {
		out = append(out, fmt.Sprintf("PVC %s/%s does not exist", ns, src.name))
	}
	switch st.why {
	case whyPVCDeleting:
		out = append(out, in.deletingFact("PVC", st.pvc))
	case whyDVDeleting:
		out = append(out, in.deletingFact("DataVolume", st.dv))
	case whyDVFailed:
		out = append(out, in.failedFact(st.dv))
	case whyDVSucceeded:
		out = append(out, in.succeededFact(st.dv))
	case whyNothing:
		if src.kind != "PVC" {
			out = append(out, fmt.Sprintf("DataVolume %s/%s does not exist, nor a PVC of that name, nor a dataVolumeTemplate that would create it", ns, src.name))
		}
	}
	return out
}

// provisioning reports whether a DataVolume has neither succeeded nor
// failed. Unknown and unset phases count as provisioning: that errs towards
// "not dangling".
func provisioning(dv *cdiv1.DataVolume) bool {
	return dv.Status.Phase != cdiv1.Succeeded && dv.Status.Phase != cdiv1.Failed
}

// deletingFact says that obj is being deleted and which finalizers
// postpone its deletion.
func (in Input) deletingFact(kind string, obj metav1.Object) string {
	del := obj.GetDeletionTimestamp()
	return fmt.Sprintf("%s %s/%s (uid %s, %s) is being deleted (deletionTimestamp %s, %s ago), deletion postponed by %s",
		kind, obj.GetNamespace(), obj.GetName(), orNone(string(obj.GetUID())), in.age(obj.GetCreationTimestamp()),
		del.UTC().Format(time.RFC3339), in.Now.Sub(del.Time).Round(time.Second), finalizerList(obj.GetFinalizers()))
}

// finalizerList names the finalizers for a human: "finalizer a",
// "finalizers a, b", or "no finalizer listed".
func finalizerList(fins []string) string {
	switch len(fins) {
	case 0:
		return "no finalizer listed"
	case 1:
		return "finalizer " + fins[0]
	}
	return "finalizers " + strings.Join(fins, ", ")
}

func (in Input) succeededFact(dv *cdiv1.DataVolume) string {
	return fmt.Sprintf("DataVolume %s/%s (uid %s, %s) is Succeeded but its PVC %s/%s does not exist",
		dv.Namespace, dv.Name, orNone(string(dv.UID)), in.age(dv.CreationTimestamp), dv.Namespace, dv.Name)
}

func (in Input) failedFact(dv *cdiv1.DataVolume) string {
	return fmt.Sprintf("DataVolume %s/%s (uid %s, %s) is in phase Failed", dv.Namespace, dv.Name, orNone(string(dv.UID)), in.age(dv.CreationTimestamp))
}

// age says how old an object is: "age 1h0m0s" or "age unknown".
func (in Input) age(created metav1.Time) string {
	if created.IsZero() {
		return "age unknown"
	}
	return "age " + in.Now.Sub(created.Time).Round(time.Second).String()
}

// attachedPhase reports whether a volume status phase means the volume is
// (being) attached through an attachment pod.
func attachedPhase(p kubevirtv1.VolumePhase) bool {
	return p == kubevirtv1.HotplugVolumeAttachedToNode || p == kubevirtv1.HotplugVolumeMounted || p == kubevirtv1.VolumeReady
}

// mountingPods returns the attachment pods in ns that mount claim, built once
// per namespace.
func (r *danglingRun) mountingPods(ns, claim string) []*corev1.Pod {
	if r.podsByClaim == nil {
		r.podsByClaim = map[string]map[string][]*corev1.Pod{}
	}
	byClaim, ok := r.podsByClaim[ns]
	if !ok {
		byClaim = map[string][]*corev1.Pod{}
		pods := r.in.Snapshot.AttachmentPods
		for i := range pods {
			if pods[i].Namespace != ns {
				continue
			}
			for _, c := range PodClaims(&pods[i]) {
				byClaim[c] = append(byClaim[c], &pods[i])
			}
		}
		r.podsByClaim[ns] = byClaim
	}
	return byClaim[claim]
}
