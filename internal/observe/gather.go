package observe

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/snapshot"
)

// The gatherers below build one subject each from any client.Reader: the
// controller's pass reads its informer caches with them, and the live
// re-check before an action reads the API server with the very same
// function, so the re-check reads what the pass read. Where the two must
// read differently, a parameter says so.

// Gates reads the KubeVirt CR's feature gates and observed version. Any
// failure, or no KubeVirt object, means "unknown".
func Gates(ctx context.Context, r client.Reader) snapshot.FeatureGates {
	var kvs kubevirtv1.KubeVirtList
	if err := r.List(ctx, &kvs); err != nil || len(kvs.Items) == 0 {
		return snapshot.FeatureGates{}
	}
	kv := kvs.Items[0]
	g := snapshot.FeatureGates{Known: true, KubeVirtVersion: kv.Status.ObservedKubeVirtVersion, Phase: string(kv.Status.Phase)}
	if dc := kv.Spec.Configuration.DeveloperConfiguration; dc != nil {
		g.Enabled = dc.FeatureGates
		g.Disabled = dc.DisabledFeatureGates
	}
	return g
}

// Tenants is the tenants' evidence a VMI subject carries. It is the one
// part of that subject the cache pass and the live re-check take from
// different places.
type Tenants struct {
	// Read is evidence read before the VMI. A live read of a tenant may
	// take up to its timeout, so it comes first and the VMI and VM last:
	// an action's write then rests on VMI and VM state read right before it.
	Read []snapshot.Tenant
	// Of, when set, gives evidence about the VMI once it is read: the
	// controller's tenant watches need its volumes.
	Of func(*kubevirtv1.VirtualMachineInstance) []snapshot.Tenant
}

// VMI gathers the subject of one VMI: the tenants' evidence, the KubeVirt
// feature gates, the VMI ns/name and its owning VM. A VMI that is gone
// yields an empty snapshot.
func VMI(ctx context.Context, r client.Reader, ns, name string, t Tenants) (*snapshot.Snapshot, error) {
	s := snapshot.Snapshot{Tenants: t.Read}
	s.FeatureGates = Gates(ctx, r)
	var vmi kubevirtv1.VirtualMachineInstance
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return snapshot.New(snapshot.Snapshot{}), nil
		}
		return nil, fmt.Errorf("reading VMI %s/%s: %w", ns, name, err)
	}
	s.VMIs = []kubevirtv1.VirtualMachineInstance{vmi}
	if owner := metav1.GetControllerOf(&vmi); owner != nil && owner.Kind == "VirtualMachine" {
		var vm kubevirtv1.VirtualMachine
		err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: owner.Name}, &vm)
		switch {
		case err == nil:
			s.VMs = []kubevirtv1.VirtualMachine{vm}
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading VM %s/%s: %w", ns, owner.Name, err)
		}
	}
	if t.Of != nil {
		s.Tenants = append(s.Tenants, t.Of(&s.VMIs[0])...)
	}
	return snapshot.New(s), nil
}

// Claims says which claims VMReferences reads: the one difference between
// the controller's pass over every reference of a starting VM and the live
// re-check of one reference.
type Claims struct {
	// Volume, when set, narrows the claims to those the volume names in the
	// namespace's VM specs and in the VMI (spec and status): one GET each of
	// PVC and DataVolume, after the VMs and the VMI they depend on. Empty
	// reads every PVC and DataVolume of the namespace, one LIST each.
	Volume string
	// NoDataVolumes: the DataVolume API is known not to be served (no CDI);
	// no DataVolume is read. Otherwise a missing API means no DataVolumes.
	NoDataVolumes bool
}

// VMReferences gathers what DanglingVolumeReference needs about the VM or
// VMI ns/name: the feature gates, the namespace's attachment pods, every VM
// of the namespace (another VM's dataVolumeTemplates may be about to create
// the DataVolume a reference names), the VMI of that name, and the PVCs and
// DataVolumes as c says.
//
// The VMs and the VMI come after the gates and pods, so that a write rests
// on VM state read right before it; only the claims follow, and every read
// is a quick one of the cluster's own apiserver.
func VMReferences(ctx context.Context, r client.Reader, ns, name string, c Claims) (*snapshot.Snapshot, error) {
	var s snapshot.Snapshot
	s.FeatureGates = Gates(ctx, r)
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{snapshot.AttachmentPodLabel: snapshot.AttachmentPodLabelValue}); err != nil {
		return nil, fmt.Errorf("listing attachment pods in %s: %w", ns, err)
	}
	s.AttachmentPods = pods.Items
	var vms kubevirtv1.VirtualMachineList
	if err := r.List(ctx, &vms, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing VMs in %s: %w", ns, err)
	}
	s.VMs = vms.Items
	var vmi kubevirtv1.VirtualMachineInstance
	if err := getOptional(ctx, r, client.ObjectKey{Namespace: ns, Name: name}, &vmi); err != nil {
		return nil, err
	}
	if vmi.Name != "" {
		s.VMIs = append(s.VMIs, vmi)
	}
	var err error
	if c.Volume == "" {
		err = allClaims(ctx, r, &s, ns, c.NoDataVolumes)
	} else {
		err = claimsNamed(ctx, r, &s, ns, claimsOf(&s, c.Volume), c.NoDataVolumes)
	}
	if err != nil {
		return nil, err
	}
	return snapshot.New(s), nil
}

// allClaims lists every PVC and DataVolume of ns into s.
func allClaims(ctx context.Context, r client.Reader, s *snapshot.Snapshot, ns string, noDataVolumes bool) error {
	var pvcs corev1.PersistentVolumeClaimList
	if err := r.List(ctx, &pvcs, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing PVCs in %s: %w", ns, err)
	}
	s.PVCs = pvcs.Items
	if noDataVolumes {
		return nil
	}
	var dvs cdiv1.DataVolumeList
	if err := r.List(ctx, &dvs, client.InNamespace(ns)); err != nil && !isNoKind(err) {
		return fmt.Errorf("listing DataVolumes in %s: %w", ns, err)
	}
	s.DataVolumes = dvs.Items
	return nil
}

// claimsNamed reads the PVC and the DataVolume of each name into s.
func claimsNamed(ctx context.Context, r client.Reader, s *snapshot.Snapshot, ns string, names []string, noDataVolumes bool) error {
	for _, claim := range names {
		key := client.ObjectKey{Namespace: ns, Name: claim}
		var pvc corev1.PersistentVolumeClaim
		if err := getOptional(ctx, r, key, &pvc); err != nil {
			return err
		}
		if pvc.Name != "" {
			s.PVCs = append(s.PVCs, pvc)
		}
		if noDataVolumes {
			continue
		}
		var dv cdiv1.DataVolume
		if err := getOptional(ctx, r, key, &dv); err != nil && !isNoKind(err) {
			return err
		}
		if dv.Name != "" {
			s.DataVolumes = append(s.DataVolumes, dv)
		}
	}
	return nil
}

// claimsOf returns every claim or DataVolume name the volume refers to in
// the VM specs, the VMI spec and the VMI status.
func claimsOf(s *snapshot.Snapshot, volume string) []string {
	var out []string
	add := func(n string) {
		for _, have := range out {
			if have == n {
				return
			}
		}
		if n != "" {
			out = append(out, n)
		}
	}
	for i := range s.VMs {
		add(snapshot.ClaimName(snapshot.VMVolume(&s.VMs[i], volume)))
	}
	for i := range s.VMIs {
		vmi := &s.VMIs[i]
		add(snapshot.ClaimName(snapshot.VMIVolume(vmi, volume)))
		for _, vs := range vmi.Status.VolumeStatus {
			if vs.Name == volume && vs.PersistentVolumeClaimInfo != nil {
				add(vs.PersistentVolumeClaimInfo.ClaimName)
			}
		}
	}
	return out
}

// StorageRead says how Storage reads. The controller's pass and the CLI's
// read differ only in these fields.
type StorageRead struct {
	// Namespace narrows the namespaced kinds (VMs, pods, PVCs, DataVolumes);
	// empty reads all namespaces. Nodes, attachments, PVs and CSIDrivers are
	// cluster-scoped.
	Namespace string
	// PageSize pages each LIST; 0 reads each kind in one LIST, as a cache
	// must (it serves no continue tokens).
	PageSize int64
	// Shared lists objects shared with a cache rather than copies
	// (client.UnsafeDisableDeepCopy): the caller must never change them.
	Shared bool
	// NoVMs, NoDataVolumes: the API is known not to be served; not read.
	NoVMs, NoDataVolumes bool
	// Lenient is for a caller that may lack the cluster-wide rights (the
	// CLI, run by a namespaced user): Nodes, VolumeAttachments and PVs it
	// may not list (forbidden), or that are not served, leave an empty
	// storage view (with a warning when forbidden); CSIDrivers it cannot
	// list are left out; a DataVolume API that is not served means none.
	// Otherwise every failure is an error.
	Lenient bool
	// Progress, when set, is told the kind and count after each LIST.
	Progress func(kind string, n int)
}

// Storage gathers the storage view into s: the namespace's VMs, pods, PVCs
// and DataVolumes, then Nodes, VolumeAttachments, PVs and CSIDrivers. The
// Nodes, VolumeAttachments and PVs are read together or not at all: a
// VolumeAttachment seen without its Node would look like one whose node is
// gone.
func Storage(ctx context.Context, r client.Reader, s *snapshot.Snapshot, o StorageRead) error {
	var (
		vms     kubevirtv1.VirtualMachineList
		pods    corev1.PodList
		pvcs    corev1.PersistentVolumeClaimList
		dvs     cdiv1.DataVolumeList
		nodes   corev1.NodeList
		vas     storagev1.VolumeAttachmentList
		pvs     corev1.PersistentVolumeList
		drivers storagev1.CSIDriverList
	)
	namespaced := []storageStep{{"VirtualMachine", &vms, o.NoVMs}, {"Pod", &pods, false}, {"PersistentVolumeClaim", &pvcs, false}, {"DataVolume", &dvs, o.NoDataVolumes}}
	for _, st := range namespaced {
		if err := o.list(ctx, r, st, o.Namespace); err != nil && !(st.kind == "DataVolume" && o.Lenient && isNoKind(err)) {
			return err
		}
	}
	s.VMs, s.Pods, s.PVCs, s.DataVolumes = vms.Items, pods.Items, pvcs.Items, dvs.Items
	for _, st := range []storageStep{{"Node", &nodes, false}, {"VolumeAttachment", &vas, false}, {"PersistentVolume", &pvs, false}} {
		err := o.list(ctx, r, st, "")
		switch {
		case err == nil:
		case o.Lenient && apierrors.IsForbidden(err):
			s.Warnings = append(s.Warnings, fmt.Sprintf("cannot list %ss (forbidden): StaleVolumeAttachment, MultiAttachConflict and BlockedDeletion of PVs checked nothing; grant list on nodes, volumeattachments and persistentvolumes", st.kind))
			return nil
		case o.Lenient && isNoKind(err):
			return nil
		default:
			return err
		}
	}
	s.Nodes, s.VolumeAttachments, s.PVs = nodes.Items, vas.Items, pvs.Items
	if err := o.list(ctx, r, storageStep{"CSIDriver", &drivers, false}, ""); err != nil && !o.Lenient {
		return err
	}
	s.CSIDrivers = drivers.Items
	return nil
}

// storageStep is one kind Storage lists.
type storageStep struct {
	kind string
	list client.ObjectList
	skip bool
}

// list reads one kind as o says, and tells Progress.
func (o StorageRead) list(ctx context.Context, r client.Reader, st storageStep, ns string) error {
	if st.skip {
		return nil
	}
	var opts []client.ListOption
	if o.Shared {
		opts = append(opts, client.UnsafeDisableDeepCopy)
	}
	n, err := listAll(ctx, r, st.list, ns, o.PageSize, opts...)
	if err != nil {
		return fmt.Errorf("listing %s: %w", st.kind, err)
	}
	if o.Progress != nil {
		o.Progress(st.kind, n)
	}
	return nil
}
