// Package inuse holds the rules of the tether.dev/in-use finalizer: which
// objects a KubeVirt VM depends on (its PVCs and DataVolumes, even while
// the VM is stopped and has no pod, and the instancetype/preference
// ControllerRevisions it references), which VMs hold one object, and what
// to do about the object's finalizer.
//
// They are pure functions of one object and the VMs that reference it
// (Dependents, Users, Decide, ReleaseTiming): no client, no clock, no
// controller framework. Package protect feeds them from informer caches
// and live reads; the BlockedDeletion check explains with them why an
// object is stuck terminating.
package inuse

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Finalizer is the finalizer tether keeps on objects a VM uses (contract).
const Finalizer = "tether.dev/in-use"

// Kind is a kind of object tether protects.
type Kind string

// The protected kinds.
const (
	KindPVC                Kind = "PersistentVolumeClaim"
	KindDataVolume         Kind = "DataVolume"
	KindControllerRevision Kind = "ControllerRevision"
)

// Kinds lists the protected kinds in a stable order.
var Kinds = []Kind{KindPVC, KindDataVolume, KindControllerRevision}

// Ref names one object a VM depends on. Dependents always live in the VM's
// namespace.
type Ref struct {
	Kind      Kind   `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (r Ref) String() string { return string(r.Kind) + " " + r.Namespace + "/" + r.Name }

// Dependents lists what vm references, sorted and without duplicates:
//   - spec volumes: persistentVolumeClaim.claimName (PVC), dataVolume.name
//     (the DataVolume and the PVC of the same name that CDI creates for it);
//   - spec.dataVolumeTemplates (DataVolume and its PVC);
//   - spec.instancetype.revisionName, spec.preference.revisionName and
//     status.instancetypeRef/preferenceRef.controllerRevisionRef.name
//     (ControllerRevisions).
//
// Whether the VM is running does not matter: a stopped VM uses its disks.
func Dependents(vm *snapshot.VM) []Ref {
	ns := vm.Namespace
	seen := map[Ref]bool{}
	add := func(k Kind, name string) {
		if name != "" {
			seen[Ref{Kind: k, Namespace: ns, Name: name}] = true
		}
	}
	for _, t := range vm.Spec.DataVolumeTemplates {
		add(KindDataVolume, t.Name)
		add(KindPVC, t.Name)
	}
	if tpl := vm.Spec.Template; tpl != nil {
		for _, v := range tpl.Spec.Volumes {
			switch {
			case v.PersistentVolumeClaim != nil:
				add(KindPVC, v.PersistentVolumeClaim.ClaimName)
				// The claim may be a DataVolume's PVC: deleting the
				// DataVolume would take the claim with it.
				add(KindDataVolume, v.PersistentVolumeClaim.ClaimName)
			case v.Ephemeral != nil && v.Ephemeral.PersistentVolumeClaim != nil:
				add(KindPVC, v.Ephemeral.PersistentVolumeClaim.ClaimName)
			case v.MemoryDump != nil:
				add(KindPVC, v.MemoryDump.ClaimName)
			case v.DataVolume != nil:
				add(KindDataVolume, v.DataVolume.Name)
				add(KindPVC, v.DataVolume.Name)
			}
		}
	}
	if it := vm.Spec.Instancetype; it != nil {
		add(KindControllerRevision, it.RevisionName)
	}
	if p := vm.Spec.Preference; p != nil {
		add(KindControllerRevision, p.RevisionName)
	}
	for _, s := range []*kubevirtv1.InstancetypeStatusRef{vm.Status.InstancetypeRef, vm.Status.PreferenceRef} {
		if s != nil && s.ControllerRevisionRef != nil {
			add(KindControllerRevision, s.ControllerRevisionRef.Name)
		}
	}
	out := make([]Ref, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	return out
}

// DependentsOf is Dependents of a VM as read (a webhook's request, a
// watch event).
func DependentsOf(vm *kubevirtv1.VirtualMachine) []Ref {
	v := snapshot.VMOf(vm)
	return Dependents(&v)
}

// References reports whether vm references ref.
func References(vm *snapshot.VM, ref Ref) bool {
	return vm.Namespace == ref.Namespace && slices.Contains(Dependents(vm), ref)
}

// Holds reports whether vm keeps obj (named by ref) from being deleted: it
// references it, and it is not itself being deleted with obj as one of its
// owned dependents. The exception keeps a foreground deletion of the VM
// from waiting forever on a dependent that waits for the VM: the garbage
// collector deletes what the VM owns because the VM goes. A terminating VM
// still holds what it does not own, until it is gone.
func Holds(vm *snapshot.VM, ref Ref, obj metav1.Object) bool {
	if !References(vm, ref) {
		return false
	}
	if vm.DeletionTimestamp != nil && ownedBy(obj, vm.UID) {
		return false
	}
	return true
}

func ownedBy(obj metav1.Object, uid types.UID) bool {
	if obj == nil || uid == "" {
		return false
	}
	for _, o := range obj.GetOwnerReferences() {
		if o.UID == uid {
			return true
		}
	}
	return false
}

// Users returns the sorted names of the VMs among vms that hold obj.
func Users(ref Ref, obj metav1.Object, vms []snapshot.VM) []string {
	var out []string
	for i := range vms {
		if Holds(&vms[i], ref, obj) {
			out = append(out, vms[i].Name)
		}
	}
	sort.Strings(out)
	return out
}

// HasFinalizer reports whether obj carries Finalizer.
func HasFinalizer(obj metav1.Object) bool {
	return slices.Contains(obj.GetFinalizers(), Finalizer)
}

// Decision is what to do about one object's finalizer.
type Decision string

// The decisions.
const (
	// None: the finalizer is where it belongs (or nothing can be done).
	None Decision = "None"
	// Add the finalizer: a VM holds the object and it lacks it.
	Add Decision = "Add"
	// Release: remove the finalizer. This only makes the object a
	// candidate: the reconciler waits for its deletion and the release
	// delay (ReleaseTiming), and a live read must confirm there is no
	// user.
	Release Decision = "Release"
	// Postpone: the object is being deleted while a VM still holds it; the
	// finalizer stays and the deletion waits (an Event says who holds it).
	Postpone Decision = "Postpone"
)

// Decide is the whole policy for one object, given the VMs that hold it
// and whether its namespace is being deleted:
//   - in a terminating namespace, release (the VMs go with the namespace,
//     and a finalizer must never keep a namespace from going away);
//   - held and not carrying the finalizer: add it, unless the object is
//     already being deleted (no finalizer can be added then);
//   - held, carrying it and being deleted: postpone;
//   - not held and carrying it: a release candidate. The reconciler
//     releases it only once its deletion is requested and the release
//     delay has passed (ReleaseTiming), after a live confirmation.
func Decide(obj metav1.Object, users []string, namespaceTerminating bool) Decision {
	has := HasFinalizer(obj)
	deleting := obj.GetDeletionTimestamp() != nil
	switch {
	case namespaceTerminating:
		if has {
			return Release
		}
		return None
	case len(users) > 0:
		switch {
		case !has && !deleting:
			return Add
		case has && deleting:
			return Postpone
		}
		return None
	case has:
		return Release
	}
	return None
}

// NeedToAddFinalizer is Decide's add rule alone.
func NeedToAddFinalizer(obj metav1.Object, users []string) bool {
	return Decide(obj, users, false) == Add
}

// deletionTimestampGranularity: a deletionTimestamp is stored in whole
// seconds, so the deletion happened up to this long after it reads.
const deletionTimestampGranularity = time.Second

// ReleaseTiming says whether the reconciler may release obj, a release
// candidate, at now, and otherwise how long to wait before looking again
// (zero: until it changes).
//
//   - Not being deleted: keep the finalizer until the deletion is
//     requested, however long no VM uses the object (like Kubernetes' own
//     pvc-protection). Releasing it earlier opens a window no live read
//     closes: a VM created just after the final LIST, and a deletion that
//     arrives before the finalizer is added back, lose the object.
//   - Being deleted: release once delay has passed since the deletion
//     (deletionTimestamp, which is stored in whole seconds, plus one
//     second). delay must cover the admission webhook's timeout and the
//     clock skew between the API server and the controller
//     (docs/protection.md, "the release window").
func ReleaseTiming(obj metav1.Object, now time.Time, delay time.Duration) (release bool, wait time.Duration) {
	dt := obj.GetDeletionTimestamp()
	if dt == nil {
		return false, 0
	}
	if wait = dt.Add(deletionTimestampGranularity + delay).Sub(now); delay > 0 && wait > 0 {
		return false, wait
	}
	return true, 0
}

// IsReleaseCandidate is Decide's release rule alone, for a namespace that is
// not terminating.
func IsReleaseCandidate(obj metav1.Object, users []string) bool {
	return Decide(obj, users, false) == Release
}

// PostponedMessage explains why the deletion of ref waits (contract: the
// same words appear in the protection controller's Event and in `tether
// audit`).
func PostponedMessage(ref Ref, users []string) string {
	return fmt.Sprintf("deletion of %s is postponed: it is used by VirtualMachine(s) %s; delete those VMs or remove the reference from their spec first (finalizer %s)",
		ref, strings.Join(users, ", "), Finalizer)
}
