package restart

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
)

// The "on restart" mode keeps a Finding record per dangling reference of a
// starting VM, like the checks' reconcilers: filed under the VM, named as
// the records of DanglingVolumeReference (a check the controller does not
// run otherwise), kept by the records' one Sync with the settle period as
// grace (restart.go handle). Its new records are announced and its blocked
// findings counted as every check's are; its actions are claimed on the
// record first, so they count in the blast-radius window of every later
// process, and the record shows kubectl users what the mode did and why.

// vmSubject files a finding of the "on restart" mode under its VM.
func vmSubject(vm *kubevirtv1.VirtualMachine) records.Subject {
	return records.Subject{Namespace: vm.Namespace, Owner: metav1.OwnerReference{
		APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID,
	}}
}

// vmRecords returns the VM's records of the mode by finding id.
func (r *Reconciler) vmRecords(ctx context.Context, vm *kubevirtv1.VirtualMachine) (map[string]*v1alpha1.Finding, error) {
	var list v1alpha1.FindingList
	if err := r.Cache.List(ctx, &list, client.InNamespace(vm.Namespace), client.MatchingLabels{
		v1alpha1.LabelSubjectUID: string(vm.UID), v1alpha1.LabelCheck: check.DanglingVolumeReference,
	}); err != nil {
		return nil, err
	}
	out := make(map[string]*v1alpha1.Finding, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Spec.ID] = &list.Items[i]
	}
	return out, nil
}

// resolveVM resolves the VM's open records whose finding is not current
// (none is when the VM is not starting).
func (r *Reconciler) resolveVM(ctx context.Context, vm *kubevirtv1.VirtualMachine, current []drift.Finding) error {
	recs, err := r.vmRecords(ctx, vm)
	if err != nil || len(recs) == 0 {
		return err
	}
	return r.Records.ResolveGone(ctx, byID(current), recs, r.Now())
}

// byID indexes findings by id.
func byID(fs []drift.Finding) map[string]drift.Finding {
	out := make(map[string]drift.Finding, len(fs))
	for _, f := range fs {
		out[f.ID] = f
	}
	return out
}
