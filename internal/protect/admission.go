package protect

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/protect/inuse"
)

// The admission side of protection: a VM write that adds a reference to a
// PVC or DataVolume already being deleted is refused, so that no VM can
// come to depend on an object whose release may be under way. The decision
// is pure: VMWrite and the states of the objects it newly references in,
// a Verdict out. The webhook (webhook.go) gathers the states live.

// VMWrite is one CREATE or UPDATE of a VirtualMachine as admission sees it.
type VMWrite struct {
	Operation   admissionv1.Operation
	SubResource string
	// Old is nil on CREATE.
	Old, New *kubevirtv1.VirtualMachine
}

// ParseVMWrite decodes an admission request for a VirtualMachine. A request
// for another kind is an error: the webhook configuration sends only VMs.
func ParseVMWrite(req *admissionv1.AdmissionRequest) (VMWrite, error) {
	w := VMWrite{Operation: req.Operation, SubResource: req.SubResource}
	if req.Kind.Group != kubevirtv1.SchemeGroupVersion.Group || req.Kind.Kind != "VirtualMachine" {
		return w, fmt.Errorf("admission request for %s, not for a %s VirtualMachine: check the webhook's rules", req.Kind.String(), kubevirtv1.SchemeGroupVersion.Group)
	}
	var err error
	if w.New, err = decodeVM(req.Object.Raw, "object"); err != nil || w.New == nil {
		return w, fmt.Errorf("%s of VirtualMachine %s/%s: %w", req.Operation, req.Namespace, req.Name, errOr(err, "no object"))
	}
	if w.Old, err = decodeVM(req.OldObject.Raw, "oldObject"); err != nil {
		return w, fmt.Errorf("%s of VirtualMachine %s/%s: %w", req.Operation, req.Namespace, req.Name, err)
	}
	if w.New.Namespace == "" {
		w.New.Namespace = req.Namespace
	}
	if w.Old != nil && w.Old.Namespace == "" {
		w.Old.Namespace = req.Namespace
	}
	return w, nil
}

func decodeVM(raw []byte, field string) (*kubevirtv1.VirtualMachine, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := json.Unmarshal(raw, vm); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", field, err)
	}
	return vm, nil
}

func errOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%s", msg)
}

// admitted kinds: the references admission checks. ControllerRevisions are
// left out: virt-controller itself writes their names into VM specs.
var admittedKinds = []inuse.Kind{inuse.KindPVC, inuse.KindDataVolume}

// AddedReferences lists the PVCs and DataVolumes w's new VM references that
// its old VM did not (all of them on CREATE), in inuse.Dependents' order. A write
// that needs no look-up returns none: anything but a CREATE or UPDATE of the
// VM itself (status and other subresources), and a VM that is being
// deleted.
func AddedReferences(w VMWrite) []inuse.Ref {
	if w.New == nil || w.SubResource != "" || w.New.DeletionTimestamp != nil {
		return nil
	}
	if w.Operation != admissionv1.Create && w.Operation != admissionv1.Update {
		return nil
	}
	var had []inuse.Ref
	if w.Old != nil && w.Operation == admissionv1.Update {
		had = inuse.DependentsOf(w.Old)
	}
	var out []inuse.Ref
	for _, d := range inuse.DependentsOf(w.New) {
		if slices.Contains(admittedKinds, d.Kind) && !slices.Contains(had, d) {
			out = append(out, d)
		}
	}
	return out
}

// ObjectState is what a live read found for one referenced object.
type ObjectState struct {
	// Deleting is set when it exists and has a deletionTimestamp.
	Deleting bool
	Since    metav1.Time
	// Err is set when it could not be read.
	Err error
}

// Verdict is the admission decision for one VM write.
type Verdict struct {
	Allowed bool
	// Refused names the newly referenced objects being deleted.
	Refused []inuse.Ref
	// Unknown names the objects that could not be read; they never refuse
	// a write (see docs/protection.md, failure policy).
	Unknown []inuse.Ref
	Message string
}

// Admit decides w, given the states of the objects AddedReferences(w)
// names; a reference missing from states was not found. covered says
// whether protection covers w's namespace. A write is refused only when it
// adds a reference to an object being deleted: references the VM already
// had, missing objects and objects that could not be read let it through.
func Admit(w VMWrite, covered bool, states map[inuse.Ref]ObjectState) Verdict {
	v := Verdict{Allowed: true}
	if !covered {
		return v
	}
	for _, r := range AddedReferences(w) {
		s := states[r]
		switch {
		case s.Err != nil:
			v.Unknown = append(v.Unknown, r)
		case s.Deleting:
			v.Refused = append(v.Refused, r)
		}
	}
	if len(v.Refused) > 0 {
		v.Allowed = false
		v.Message = RefusalMessage(w.New, v.Refused, states)
	}
	return v
}

// RefusalMessage says which references are refused and how to proceed
// (contract: docs/protection.md quotes it).
func RefusalMessage(vm *kubevirtv1.VirtualMachine, refused []inuse.Ref, states map[inuse.Ref]ObjectState) string {
	parts := make([]string, len(refused))
	for i, r := range refused {
		parts[i] = fmt.Sprintf("%s (deletion requested at %s)", r, states[r].Since.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return fmt.Sprintf("tether: VirtualMachine %s/%s may not start referencing %s: "+RefusalAdvice,
		vm.Namespace, vm.Name, strings.Join(parts, ", "))
}

// RefusalAdvice ends every refusal message.
const RefusalAdvice = "a VM must not come to depend on an object whose deletion may complete at any moment. " +
	"Remove the reference, or wait until the object is gone and create it again " +
	"(a dataVolumeTemplate then creates a fresh DataVolume)"
