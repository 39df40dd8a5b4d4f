package observe

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// The functions below read one subject live (never from a cache) right
// before an action, so the check can be re-run on fresh state.

// ForVolume reads, live, the VMI subject ns/name (see VMI) for re-checking
// one hot-plugged volume, with the tenants that may serve the namespace.
//
// The order matters: a tenant read may take up to Options.TenantTimeout, so
// the tenants come first and the VMI and VM last. An action's write then
// rests on VMI and VM state read right before it, not on state as old as
// every tenant's timeout together.
func ForVolume(ctx context.Context, c client.Client, o Options, ns, name string) (*snapshot.Snapshot, error) {
	var tenants []snapshot.Tenant
	for _, t := range o.Tenants {
		if t.Namespace == "" || t.Namespace == ns {
			tenants = append(tenants, readTenant(ctx, t, o))
		}
	}
	return VMI(ctx, c, ns, name, Tenants{Read: tenants})
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
	s.VMIs = snapshot.VMIsOf(vmis.Items...)
	return snapshot.New(s), nil
}

// ForTenantNode reads, for re-checking TenantNodeDown on one tenant Node,
// the tenant called tenant (its nodes, attachments and PVs, as a pass reads
// it), then the infra VM and VMI the node resolves to by direct GETs, read
// last: "gone" is a 404 of a read by name, never the absence from a list.
// A tenant tether is not given, or a node that resolves to no VM, gives a
// snapshot without VM or VMI (the re-check then finds no safe action).
func ForTenantNode(ctx context.Context, c client.Client, o Options, tenant, node string) (*snapshot.Snapshot, error) {
	for _, t := range o.Tenants {
		if t.Name == tenant {
			return WithInfraOfNode(ctx, c, readTenant(ctx, t, o), node)
		}
	}
	return snapshot.New(snapshot.Snapshot{}), nil
}

// InfraOfNodeKinds are the kinds WithInfraOfNode reads of the infra
// cluster: what the controller's fence loop gathers there.
const InfraOfNodeKinds = snapshot.KindVMs | snapshot.KindVMIs

// WithInfraOfNode completes tenant t (as read, live or from a watch's
// caches) into the snapshot TenantNodeDown decides node on: with the infra
// VM and VMI the node resolves to, read from c by name (a cache in the
// controller, the API server in the live re-check). An unreachable tenant,
// or a node that resolves to no VM, gives a snapshot without VM or VMI.
func WithInfraOfNode(ctx context.Context, c client.Reader, t snapshot.Tenant, node string) (*snapshot.Snapshot, error) {
	s := snapshot.Snapshot{Tenants: []snapshot.Tenant{t}}
	if !t.Reachable {
		return snapshot.New(s), nil
	}
	for i := range t.Nodes {
		if t.Nodes[i].Name != node {
			continue
		}
		m := snapshot.ResolveTenantNode(&t.Nodes[i], t.Namespace, t.MatchNodesByName)
		if m.Unknown != "" {
			break
		}
		key := client.ObjectKey{Namespace: m.VM.Namespace, Name: m.VM.Name}
		var vm kubevirtv1.VirtualMachine
		if err := getOptional(ctx, c, key, &vm); err != nil {
			return nil, err
		} else if vm.Name != "" {
			s.VMs = []snapshot.VM{snapshot.VMOf(&vm)}
		}
		var vmi kubevirtv1.VirtualMachineInstance
		if err := getOptional(ctx, c, key, &vmi); err != nil {
			return nil, err
		} else if vmi.Name != "" {
			s.VMIs = []snapshot.VMI{snapshot.VMIOf(&vmi)}
		}
	}
	return snapshot.New(s), nil
}

// ForMigrationSourcePod reads, for re-checking MigrationSourcePodLeftover
// on one pod, the pod and the VMI that controls it, each by a direct GET.
// A pod that is gone gives an empty snapshot; a pod without a controlling
// VMI, or whose VMI is gone, a snapshot without VMI (the re-check then
// finds nothing).
func ForMigrationSourcePod(ctx context.Context, c client.Client, ns, name string) (*snapshot.Snapshot, error) {
	s := snapshot.Snapshot{}
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return snapshot.New(s), nil
		}
		return nil, fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	s.Pods = []corev1.Pod{pod}
	owner := metav1.GetControllerOf(&pod)
	if owner == nil || owner.Kind != "VirtualMachineInstance" {
		return snapshot.New(s), nil
	}
	var vmi kubevirtv1.VirtualMachineInstance
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: owner.Name}, &vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return snapshot.New(s), nil
		}
		return nil, fmt.Errorf("reading VMI %s/%s: %w", ns, owner.Name, err)
	}
	s.VMIs = snapshot.VMIsOf(vmi)
	return snapshot.New(s), nil
}
