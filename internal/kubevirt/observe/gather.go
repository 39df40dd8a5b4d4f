package observe

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
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
	if es := kv.Spec.Configuration.EvictionStrategy; es != nil {
		g.EvictionStrategy = string(*es)
	}
	return g
}

// EvictionGuard reads virt-api's ValidatingWebhookConfiguration for the
// webhook that sends attachment pods' evictions to virt-api. One GET; a
// configuration that does not exist is read (Found false), any other
// failure leaves the guard's registration unknown.
func EvictionGuard(ctx context.Context, r client.Reader) snapshot.EvictionGuard {
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	switch err := r.Get(ctx, client.ObjectKey{Name: snapshot.VirtAPIValidatorName}, &vwc); {
	case apierrors.IsNotFound(err):
		return snapshot.EvictionGuard{Read: true}
	case err != nil:
		return snapshot.EvictionGuard{Err: err.Error()}
	}
	g := snapshot.EvictionGuard{Read: true, Found: true}
	for i := range vwc.Webhooks {
		h := &vwc.Webhooks[i]
		hook := snapshot.GuardHook{Name: h.Name, Conditions: len(h.MatchConditions)}
		if s := h.ClientConfig.Service; s != nil && s.Path != nil {
			hook.Path = *s.Path
		}
		for _, r := range h.Rules {
			for _, op := range r.Operations {
				for _, res := range r.Resources {
					hook.Rules = append(hook.Rules, string(op)+" "+res)
				}
			}
		}
		if !snapshot.GuardWebhookOf(hook) {
			continue
		}
		g.Webhook, g.FailurePolicy = h.Name, string(admissionregistrationv1.Fail)
		if h.FailurePolicy != nil {
			g.FailurePolicy = string(*h.FailurePolicy)
		}
		if g.FailurePolicy == string(admissionregistrationv1.Fail) {
			break // the strongest registration decides
		}
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
	Of func(*snapshot.VMI) []snapshot.Tenant
}

// VMIKinds are the kinds VMI reads: what the hot-plug loop's checks may
// read, and what it watches.
const VMIKinds = snapshot.KindVMIs | snapshot.KindVMs | snapshot.KindDataVolumes | snapshot.KindKubeVirt

// VMI gathers the subject of one VMI: the tenants' evidence, the KubeVirt
// feature gates, the VMI ns/name, its owning VM and the DataVolumes of that
// VM's dataVolumeTemplates (one not ready stops virt-controller's VM sync
// before its hot-plug step: the hot-plug checks read them). A VMI that is
// gone yields an empty snapshot; a DataVolume API that is not served means
// no DataVolumes.
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
	s.VMIs = []snapshot.VMI{snapshot.VMIOf(&vmi)}
	if owner := metav1.GetControllerOf(&vmi); owner != nil && owner.Kind == "VirtualMachine" {
		var vm kubevirtv1.VirtualMachine
		err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: owner.Name}, &vm)
		switch {
		case err == nil:
			s.VMs = []snapshot.VM{snapshot.VMOf(&vm)}
			if err := templateDataVolumes(ctx, r, &s, &vm); err != nil {
				return nil, err
			}
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
	s.VMs = snapshot.VMsOf(vms.Items...)
	var vmi kubevirtv1.VirtualMachineInstance
	if err := getOptional(ctx, r, client.ObjectKey{Namespace: ns, Name: name}, &vmi); err != nil {
		return nil, err
	}
	if vmi.Name != "" {
		s.VMIs = append(s.VMIs, snapshot.VMIOf(&vmi))
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
	// Kinds, when set, are the only kinds read (snapshot.KindVMs,
	// KindPods or else KindAttachmentPods, KindPVCs, KindDataVolumes,
	// KindStorage, KindCSIDrivers); zero reads every one.
	Kinds snapshot.Kinds
	// Lenient is for a caller that may lack the cluster-wide rights (the
	// CLI, run by a namespaced user): Nodes, VolumeAttachments and PVs it
	// may not list (forbidden), or that are not served, leave an empty
	// storage view (with a warning when forbidden); CSIDrivers it cannot
	// list are left out; a DataVolume API that is not served means none.
	// Otherwise every failure is an error.
	Lenient bool
	// Progress, when set, is told the kind and the count read so far after
	// each page.
	Progress func(kind string, n int)
	// Relisted, when set, is told that the read starts again from the
	// beginning, and why (see readAll).
	Relisted func(err error)
	// Pages, when set, reads the VMs (and, in Observe, the VMIs) as
	// decisions read them (see Pager).
	Pages Pager
	// Lean makes each object lean (snapshot.Lean) as its page arrives, so
	// that what no decision reads is garbage before the next page.
	Lean bool
}

// StorageKinds are the kinds Storage reads when StorageRead.Kinds is zero:
// what the controller's storage loop gathers.
const StorageKinds = snapshot.KindVMs | snapshot.KindPods | snapshot.KindPVCs | snapshot.KindDataVolumes | snapshot.KindStorage | snapshot.KindCSIDrivers

// Storage gathers the storage view into s: the namespace's VMs, pods, PVCs
// and DataVolumes, then Nodes, VolumeAttachments, PVs and CSIDrivers. The
// Nodes, VolumeAttachments and PVs are read together or not at all: a
// VolumeAttachment seen without its Node would look like one whose node is
// gone.
func Storage(ctx context.Context, r client.Reader, s *snapshot.Snapshot, o StorageRead) error {
	ch := newChain(ctx)
	done := o.addStorage(ch, r, s)
	if err := ch.wait(); err != nil {
		return err
	}
	done()
	return nil
}

// addStorage adds Storage's LISTs to ch, in Storage's order; the returned
// function, called once ch has ended without error, fills s.
func (o StorageRead) addStorage(ch *chain, r client.Reader, s *snapshot.Snapshot) func() {
	k := o.Kinds
	if k == 0 {
		k = snapshot.AllKinds
	}
	var (
		vms     kubevirtv1.VirtualMachineList
		pods    corev1.PodList
		pvcs    corev1.PersistentVolumeClaimList
		dvs     cdiv1.DataVolumeList
		nodes   corev1.NodeList
		vas     storagev1.VolumeAttachmentList
		pvs     corev1.PersistentVolumeList
		drivers storagev1.CSIDriverList
		// view is the error that left the storage view unread, if any.
		view = make([]error, 3)
	)
	lenient := func(ok func(error) bool) func(error) bool {
		return func(err error) bool { return o.Lenient && ok(err) }
	}
	podStep := storageStep{kind: "Pod", list: &pods, skip: !k.Has(snapshot.KindPods) && !k.Has(snapshot.KindAttachmentPods)}
	if !k.Has(snapshot.KindPods) {
		podStep.opts = []client.ListOption{client.MatchingLabels{snapshot.AttachmentPodLabel: snapshot.AttachmentPodLabelValue}}
	}
	vmStep := storageStep{kind: "VirtualMachine", list: &vms, skip: o.NoVMs || !k.Has(snapshot.KindVMs)}
	// paged: the VMs read by o.Pages, already as the checks read them.
	var paged []snapshot.VM
	if o.Pages != nil {
		vmStep.lean = func(ctx context.Context, ns string, answered func(), page func(int)) (err error) {
			paged, err = o.Pages.LeanVMs(ctx, ns, o.PageSize, answered, page)
			return err
		}
	}
	steps := []storageStep{
		vmStep,
		podStep,
		{kind: "PersistentVolumeClaim", list: &pvcs, skip: !k.Has(snapshot.KindPVCs)},
		{kind: "DataVolume", list: &dvs, skip: o.NoDataVolumes || !k.Has(snapshot.KindDataVolumes), tolerate: lenient(isNoKind)},
	}
	viewKinds := []string{"Node", "VolumeAttachment", "PersistentVolume"}
	for i, l := range []client.ObjectList{&nodes, &vas, &pvs} {
		steps = append(steps, storageStep{kind: viewKinds[i], list: l, cluster: true, skip: !k.Has(snapshot.KindStorage), failed: &view[i],
			tolerate: lenient(func(err error) bool { return apierrors.IsForbidden(err) || isNoKind(err) })})
	}
	steps = append(steps, storageStep{kind: "CSIDriver", list: &drivers, cluster: true, skip: !k.Has(snapshot.KindCSIDrivers),
		tolerate: lenient(func(error) bool { return true })})
	for _, st := range steps {
		o.add(ch, r, st)
	}
	return func() {
		s.VMs, s.PVCs, s.DataVolumes, s.CSIDrivers = paged, pvcs.Items, dvs.Items, drivers.Items
		if o.Pages == nil {
			s.VMs = snapshot.VMsOf(vms.Items...)
		}
		if k.Has(snapshot.KindPods) {
			s.Pods = pods.Items
		} else {
			s.AttachmentPods = pods.Items // listed by their label
		}
		for i, err := range view {
			if err == nil {
				continue
			}
			if apierrors.IsForbidden(err) {
				s.Warnings = append(s.Warnings, fmt.Sprintf("cannot list %ss (forbidden): StaleVolumeAttachment, MultiAttachConflict and BlockedDeletion of PVs checked nothing; grant list on nodes, volumeattachments and persistentvolumes", viewKinds[i]))
			}
			return
		}
		s.Nodes, s.VolumeAttachments, s.PVs = nodes.Items, vas.Items, pvs.Items
	}
}

// NamespaceKinds are the kinds Namespace reads: those of one namespace,
// and the KubeVirt CR.
const NamespaceKinds = snapshot.KindVMs | snapshot.KindVMIs | snapshot.KindAttachmentPods | snapshot.KindPods |
	snapshot.KindPVCs | snapshot.KindDataVolumes | snapshot.KindKubeVirt

// Namespace gathers the namespace o.Namespace as Observe would read it,
// for the controller's namespace loop, which reads its caches with it: of
// the kinds o.Kinds names (within NamespaceKinds), its VMIs, VMs,
// attachment pods (or every pod), PVCs and DataVolumes, and the KubeVirt
// CR's feature gates.
func Namespace(ctx context.Context, r client.Reader, o StorageRead) (*snapshot.Snapshot, error) {
	if k := o.Kinds; o.Namespace == "" || k == 0 || k&^NamespaceKinds != 0 {
		return nil, fmt.Errorf("observe.Namespace: reads the kinds of one namespace (%s), not %q in %q", NamespaceKinds, k, o.Namespace)
	}
	var s snapshot.Snapshot
	if err := o.readAll(ctx, r, &s); err != nil {
		return nil, err
	}
	return snapshot.New(s), nil
}

// storageStep is one kind Storage lists.
type storageStep struct {
	kind string
	list client.ObjectList
	skip bool
	// cluster: a cluster-scoped kind, never narrowed to the namespace.
	cluster bool
	opts    []client.ListOption
	// tolerate says which errors leave the kind unread rather than fail
	// the read; failed, when set, is told such an error.
	tolerate func(error) bool
	failed   *error
	// lean, when set, reads the kind in place of a LIST of list, telling
	// answered once the server has answered its first page.
	lean func(ctx context.Context, ns string, answered func(), page func(int)) error
}

// add adds the LIST of one kind to ch, as o says, telling Progress.
func (o StorageRead) add(ch *chain, r client.Reader, st storageStep) {
	if st.skip {
		return
	}
	ch.add(func(ctx context.Context, first func()) error {
		err := o.list(ctx, r, st, first)
		if err != nil && st.tolerate != nil && st.tolerate(err) {
			if st.failed != nil {
				*st.failed = err
			}
			return nil
		}
		return err
	})
}

// list reads one kind as o says, telling first after the first page and
// Progress after each.
func (o StorageRead) list(ctx context.Context, r client.Reader, st storageStep, first func()) error {
	opts := st.opts
	if o.Shared {
		opts = append(opts[:len(opts):len(opts)], client.UnsafeDisableDeepCopy)
	}
	ns := o.Namespace
	if st.cluster {
		ns = ""
	}
	page := func(n int) {
		first()
		if o.Progress != nil {
			o.Progress(st.kind, n)
		}
	}
	var err error
	if st.lean != nil {
		// The next kind may start once the server has answered this
		// kind's first page (it has taken its resourceVersion then), while
		// the page is still read and decoded.
		err = st.lean(ctx, ns, first, page)
	} else {
		_, err = listPages(ctx, r, st.list, ns, o.PageSize, o.Lean, page, opts...)
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", st.kind, err)
	}
	return nil
}

// templateDataVolumes reads the DataVolume of each of vm's
// dataVolumeTemplates into s, by name; a missing one, or a DataVolume API
// that is not served, adds none.
func templateDataVolumes(ctx context.Context, r client.Reader, s *snapshot.Snapshot, vm *kubevirtv1.VirtualMachine) error {
	for _, t := range vm.Spec.DataVolumeTemplates {
		var dv cdiv1.DataVolume
		if err := getOptional(ctx, r, client.ObjectKey{Namespace: vm.Namespace, Name: t.Name}, &dv); err != nil {
			if isNoKind(err) {
				return nil
			}
			return fmt.Errorf("reading DataVolume %s/%s of VM %s's dataVolumeTemplates: %w", vm.Namespace, t.Name, vm.Name, err)
		}
		if dv.Name != "" {
			s.DataVolumes = append(s.DataVolumes, dv)
		}
	}
	return nil
}
