// Package observe reads everything a decision needs into one snapshot: one
// paginated LIST per kind, never a GET per object. It never writes.
//
// Label selectors are NOT sent to the server: a VM whose labels differ from
// its VMI's, or an attachment pod whose VMI is outside the selector, would
// then look missing and turn into a false "orphan". Scope is applied by the
// checks instead; only the namespace narrows the LISTs.
package observe

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// DefaultPageSize is the LIST page size (the "limit" parameter), kubectl's
// chunk size.
const DefaultPageSize = 500

// Unpaged as Options.PageSize reads each kind in one LIST.
const Unpaged = -1

// TenantSource is a tenant cluster to read VolumeAttachments and PVs from.
type TenantSource struct {
	Name string
	// Namespace is the infra namespace whose VMs are this tenant's nodes;
	// empty means the namespace each node names.
	Namespace string
	// Driver is the tenant's CSI driver name; "" is csi.kubevirt.io.
	Driver string
	// MatchNodesByName: see snapshot.Tenant.
	MatchNodesByName bool
	Config           *rest.Config
	// Reader, when set, is read in place of a client of Config: a
	// tenant's support bundle (see internal/bundle).
	Reader client.Reader
}

// Options scope a read.
type Options struct {
	// Namespace limits the namespaced LISTs; empty means all namespaces.
	Namespace string
	// PageSize is the LIST page size: 0 means DefaultPageSize, Unpaged
	// one LIST per kind.
	PageSize int64
	Tenants  []TenantSource
	// TenantTimeout bounds each tenant's reads; an unreachable tenant becomes
	// "unknown" evidence, never "not wanted". Default 10s.
	TenantTimeout time.Duration
	// Progress, when set, is told the kind and the count read so far after
	// each page. Kinds are read concurrently: calls may come from several
	// goroutines at once.
	Progress func(kind string, n int)
	// Relisted, when set, is told that the read is started again from the
	// beginning, and why (a continue token expired; see readAll).
	Relisted func(err error)
	// Kinds, when set, are the only kinds read (check.Reads of the checks
	// to run); zero reads every kind.
	Kinds snapshot.Kinds
	// Pages, when set, reads the VMIs and VMs as decisions read them: as
	// bytes of which only that is decoded (PageReader), or from a source
	// that holds them so (a support bundle); the objects it reads are lean
	// (snapshot.Lean).
	Pages Pager
	// Lean makes every other object lean as its page arrives: a one-shot
	// read then holds only what decisions read.
	Lean bool
	// CBOR makes Pages ask for its pages in CBOR (PageReader.CBOR): the
	// caller's opt-in, passed on by whoever makes the page reader.
	CBOR bool
	// GoneNodeRecordsIn, when set, is the controller's namespace: its
	// durable records there of since when Nodes have been missing
	// (Snapshot.NodesGoneSince) are read, for the opt-in rule that fences
	// nodes gone for long. Records in other namespaces are no evidence.
	GoneNodeRecordsIn string
}

// Observe reads the infra cluster (and the tenants) into a snapshot: from
// the API server through c, or from anything else that reads as it does
// (a support bundle).
func Observe(ctx context.Context, c client.Reader, o Options) (*snapshot.Snapshot, error) {
	if o.PageSize == 0 {
		o.PageSize = DefaultPageSize
	}
	k := o.Kinds
	if k == 0 {
		k = snapshot.AllKinds
	}
	s := &snapshot.Snapshot{}
	read := StorageRead{Namespace: o.Namespace, PageSize: o.PageSize, Lenient: true, Progress: o.Progress, Relisted: o.Relisted, Kinds: k, Pages: o.Pages, Lean: o.Lean}
	if err := read.readAll(ctx, c, s); err != nil {
		return nil, err
	}
	if o.GoneNodeRecordsIn != "" && k.Has(snapshot.KindStorage) {
		s.NodesGoneSince = findingrecord.ReadNodesGone(ctx, c, o.GoneNodeRecordsIn, s.VolumeAttachments, func(w string) { s.Warnings = append(s.Warnings, w) })
	}
	for _, t := range o.Tenants {
		s.Tenants = append(s.Tenants, readTenant(ctx, t, o))
	}
	return snapshot.New(*s), nil
}

// readAll reads into s, in one chain, the VMIs, the kinds Storage reads
// and the KubeVirt CR's gates, as far as o.Kinds (every kind when zero)
// names them.
//
// VMIs before VMs: a VM created between the two LISTs then has no VMI in
// the snapshot, rather than a VMI whose VM looks gone. The chain keeps
// that order of resourceVersions while the LISTs overlap.
//
// A paged LIST's continue token lasts only as long as the server keeps the
// revision of its first page (etcd compacts older ones, every five minutes
// by default): a read slower than that is answered 410 Expired. The whole
// chain is then read again from the start, once, telling o.Relisted. Not
// the one kind alone: read again, it would be read at a revision newer
// than the kinds after it, and a VMI created meanwhile would be read
// without its VM. Nor with the token the server offers for the rest of the
// list: the pages after it would be of a newer revision than those before
// it, so two objects that never existed at once could both be read.
func (o StorageRead) readAll(ctx context.Context, r client.Reader, s *snapshot.Snapshot) error {
	err := o.readOnce(ctx, r, s)
	if !apierrors.IsResourceExpired(err) {
		return err
	}
	if o.Relisted != nil {
		o.Relisted(err)
	}
	*s = snapshot.Snapshot{}
	err = o.readOnce(ctx, r, s)
	if apierrors.IsResourceExpired(err) {
		return fmt.Errorf("%w (read twice from the start, and each time a list outlived its continue token: "+
			"the API server keeps a list's revision for about five minutes; read one namespace at a time (--namespace), "+
			"closer to the API server, or each kind in one LIST (--chunk-size 0))", err)
	}
	return err
}

// readOnce is readAll's one read.
func (o StorageRead) readOnce(ctx context.Context, r client.Reader, s *snapshot.Snapshot) error {
	k := o.Kinds
	if k == 0 {
		k = snapshot.AllKinds
	}
	ch := newChain(ctx)
	var vmis kubevirtv1.VirtualMachineInstanceList
	var paged []snapshot.VMI // read by o.Pages, as the checks read them
	vmiStep := storageStep{kind: "VirtualMachineInstance", list: &vmis, skip: !k.Has(snapshot.KindVMIs)}
	if o.Pages != nil {
		vmiStep.lean = func(ctx context.Context, ns string, answered func(), page func(int)) (err error) {
			paged, err = o.Pages.LeanVMIs(ctx, ns, o.PageSize, answered, page)
			return err
		}
	}
	o.add(ch, r, vmiStep)
	// Every pod when a storage check needs their users; the attachment
	// pods are then picked out of them, without a second LIST.
	fill := o.addStorage(ch, r, s)
	if k.Has(snapshot.KindKubeVirt) {
		ch.add(func(ctx context.Context, first func()) error {
			s.FeatureGates = Gates(ctx, r)
			return nil
		})
	}
	if k.Has(snapshot.KindEvictionGuard) {
		ch.add(func(ctx context.Context, first func()) error {
			s.EvictionGuard = EvictionGuard(ctx, r)
			return nil
		})
	}
	if err := ch.wait(); err != nil {
		return err
	}
	s.VMIs = paged
	if o.Pages == nil {
		s.VMIs = snapshot.VMIsOf(vmis.Items...)
	}
	fill()
	if s.Pods != nil {
		s.AttachmentPods = attachmentPods(s.Pods)
	}
	return nil
}

// ReadTenant reads one tenant cluster as an audit does (its Nodes,
// CSINodes, VolumeAttachments, PVs and CSIDriver, bounded by
// o.TenantTimeout); a tenant that cannot be read comes back unreachable
// with the error.
func ReadTenant(ctx context.Context, t TenantSource, o Options) snapshot.Tenant {
	if o.PageSize == 0 {
		o.PageSize = DefaultPageSize
	}
	return readTenant(ctx, t, o)
}

func readTenant(ctx context.Context, t TenantSource, o Options) snapshot.Tenant {
	out := snapshot.Tenant{Name: t.Name, Namespace: t.Namespace, Driver: t.Driver, MatchNodesByName: t.MatchNodesByName}
	timeout := o.TenantTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := tenantReader(t, timeout)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	var vas storagev1.VolumeAttachmentList
	var pvs corev1.PersistentVolumeList
	var nodes corev1.NodeList
	var csiNodes storagev1.CSINodeList
	for _, l := range []client.ObjectList{&vas, &pvs, &nodes, &csiNodes} {
		if _, err := listAll(ctx, c, l, "", o.PageSize); err != nil {
			out.Error = err.Error()
			return out
		}
	}
	var drv storagev1.CSIDriver
	switch err := c.Get(ctx, client.ObjectKey{Name: out.CSIDriver()}, &drv); {
	case apierrors.IsNotFound(err):
		out.DriverMissing = true
	case err != nil:
		out.Error = err.Error()
		return out
	}
	out.Reachable = true
	out.VolumeAttachments, out.PVs = vas.Items, pvs.Items
	byNode := make(map[string]*storagev1.CSINode, len(csiNodes.Items))
	for i := range csiNodes.Items {
		byNode[csiNodes.Items[i].Name] = &csiNodes.Items[i]
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		tn := snapshot.NewTenantNode(n, byNode[n.Name], out.CSIDriver())
		if tn.Unfencing() {
			tn.Release, tn.ReleaseError = NodeRelease(ctx, c, tn.Name, vas.Items, o.PageSize)
		}
		out.Nodes = append(out.Nodes, tn)
	}
	return out
}

// tenantReader is what a tenant is read through: its Reader, or a client
// of its Config whose requests end after timeout.
func tenantReader(t TenantSource, timeout time.Duration) (client.Reader, error) {
	if t.Reader != nil {
		return t.Reader, nil
	}
	cfg := rest.CopyConfig(t.Config)
	cfg.Timeout = timeout
	return clients.New(cfg)
}

// NodeRelease reads what of tenant node node is still being released: of
// vas (the tenant's VolumeAttachments, as read) those of the node being
// deleted, and the pods bound to the node that are terminating, listed from
// c by field selector (one list, for a node in tether's un-fence only). A
// failed list gives no release and says why: unknown is never "nothing".
func NodeRelease(ctx context.Context, c client.Reader, node string, vas []storagev1.VolumeAttachment, pageSize int64) (*snapshot.NodeRelease, string) {
	var pods corev1.PodList
	if _, err := listAll(ctx, c, &pods, "", pageSize, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return nil, fmt.Sprintf("listing the pods bound to tenant node %s: %v", node, err)
	}
	return snapshot.NewNodeRelease(node, vas, pods.Items), ""
}
