package observe

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/snapshot"
)

// The functions below read one subject live (never from a cache) right
// before an action, so the check can be re-run on fresh state.

// ForVolume reads the tenants, the feature gates, the VMI ns/name and its
// owning VM into a snapshot for re-checking one hot-plugged volume. A VMI
// that is gone yields an empty snapshot.
//
// The order matters: a tenant read may take up to Options.TenantTimeout, so
// the tenants come first and the VMI and VM last. An action's write then
// rests on VMI and VM state read right before it, not on state as old as
// every tenant's timeout together.
func ForVolume(ctx context.Context, c client.Client, o Options, ns, name string) (*snapshot.Snapshot, error) {
	s := snapshot.Snapshot{}
	for _, t := range o.Tenants {
		if t.Namespace == "" || t.Namespace == ns {
			s.Tenants = append(s.Tenants, readTenant(ctx, t, o))
		}
	}
	s.FeatureGates = ReadGates(ctx, c)
	var vmi kubevirtv1.VirtualMachineInstance
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return snapshot.New(snapshot.Snapshot{}), nil
		}
		return nil, fmt.Errorf("reading VMI %s/%s: %w", ns, name, err)
	}
	s.VMIs = []kubevirtv1.VirtualMachineInstance{vmi}
	if owner := metav1.GetControllerOf(&vmi); owner != nil && owner.Kind == "VirtualMachine" {
		var vm kubevirtv1.VirtualMachine
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: owner.Name}, &vm)
		switch {
		case err == nil:
			s.VMs = []kubevirtv1.VirtualMachine{vm}
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading VM %s/%s: %w", ns, owner.Name, err)
		}
	}
	return snapshot.New(s), nil
}

// ForAttachmentPod reads the pod ns/name and every VMI of its namespace (any
// of them may still list the pod's volumes) for re-checking one pod.
func ForAttachmentPod(ctx context.Context, c client.Client, o Options, ns, name string) (*snapshot.Snapshot, error) {
	s := snapshot.Snapshot{}
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return snapshot.New(s), nil
		}
		return nil, fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	s.AttachmentPods = []corev1.Pod{pod}
	var vmis kubevirtv1.VirtualMachineInstanceList
	if _, err := listAll(ctx, c, &vmis, ns, o.PageSize); err != nil {
		return nil, fmt.Errorf("listing VMIs in %s: %w", ns, err)
	}
	s.VMIs = vmis.Items
	return snapshot.New(s), nil
}
