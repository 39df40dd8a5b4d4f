// Package check holds tether's decisions: pure functions from a snapshot, a
// policy and the current time to findings, each with its evidence and either
// a safe action or the reason no action is safe.
//
// Nothing in this package may do I/O, read the clock or keep state between
// calls: the same input always gives the same findings, which is what lets
// act re-run a check on freshly read objects before it changes anything.
package check

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/eventreason"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// Check names (contract: users pass them to --checks and scripts read them).
const (
	OrphanHotplugVolume = "OrphanHotplugVolume"
	OrphanAttachmentPod = "OrphanAttachmentPod"
	// DanglingVolumeReference: a VM or VMI refers to storage that is gone.
	DanglingVolumeReference = "DanglingVolumeReference"
	// StaleVolumeAttachment: a CSI VolumeAttachment nothing needs any more.
	StaleVolumeAttachment = "StaleVolumeAttachment"
	// MultiAttachConflict: a pod waits for a ReadWriteOnce volume attached
	// to another node.
	MultiAttachConflict = "MultiAttachConflict"
	// BlockedDeletion: an object stuck terminating on a protection finalizer.
	BlockedDeletion = "BlockedDeletion"
	// PhantomAttach: a tenant VolumeAttachment says attached, the VMI has
	// no Ready hot-plug of its volume.
	PhantomAttach = "PhantomAttach"
	// StuckPublish: a hot-plug the CSI driver's publish left in the VM
	// spec, never Ready, that no tenant attachment wants.
	StuckPublish = "StuckPublish"
	// AttachAlreadyPresent: a tenant attach fails with "already exists"
	// while the VMI has the volume Ready.
	AttachAlreadyPresent = "AttachAlreadyPresent"
)

// Input is what every check decides from. Make it with NewInput; the checks
// prepare a hand-built Input the same way.
type Input struct {
	Snapshot *snapshot.Snapshot
	Index    *snapshot.Index
	Policy   Policy
	Now      time.Time

	scope inScope
	memo  *memo
	// deferText: the checks that can defer their findings' words do
	// (RunDeferred).
	deferText bool
	// quiet: decide without writing words. A check that defers its
	// findings' words decides quietly, and writes the words, when asked
	// for, by making the same decision again without it.
	quiet bool
}

// NewInput prepares an input: it indexes the snapshot, applies the policy
// defaults and compiles the scope. An Input serves one goroutine.
func NewInput(s *snapshot.Snapshot, p Policy, now time.Time) Input {
	p = p.withDefaults()
	return Input{Snapshot: s, Index: s.Index(), Policy: p, Now: now, scope: p.Scope.compile(), memo: &memo{}}
}

// ready returns in itself if NewInput made it, else an input NewInput makes
// from its snapshot, policy and time.
func (in Input) ready() Input {
	if in.memo != nil {
		return in
	}
	return NewInput(in.Snapshot, in.Policy, in.Now)
}

// deferring returns the input a check that defers its findings' words
// decides with (quiet when RunDeferred asked for that) and the one it
// writes those words with.
func (in Input) deferring() (decide, words Input) {
	words = in
	in.quiet = in.deferText
	return in, words
}

// memo keeps lookups that a pass needs rarely, built on first use and only
// for the namespaces that need them. It caches; it never decides.
type memo struct {
	claimUses map[string]map[string][]claimUse
	launchers map[string]map[types.UID]*snapshot.VMI
	gates     *snapshot.HotplugGates
	// gateFacts are the evidence texts that end in the gates' basis, by
	// their beginning (gateFact).
	gateFacts map[string]string
	before19  *bool
	owners    []knownOwner
	// dying are the attachment pods being deleted (StuckHotplugPhase).
	dying map[snapshot.Key]*corev1.Pod
	// tenantAttach is what the tenant attach checks read.
	tenantAttach *[keeps][]tenantHandles
	// nodes hold, from nodesAt[i]-1 for each VMI i asked about, the
	// tenant nodes that are its VM, one list per tenant of its namespace.
	nodes   [][]snapshot.TenantNodeRef
	nodesAt []int32
	// claims are the claims of VM and VMI spec volumes (volumeClaims).
	claims volumeClaims
	// hotplugOdd is, per VMI, 0 (unknown), 1 or 2: see Input.hotplugOdd.
	hotplugOdd []uint8
}

type knownOwner struct {
	own   Ownership
	known bool
}

// owner returns ResolveOwner of the snapshot's VMI i, resolved once: the
// hot-plug and the dangling check both ask about every VMI.
func (in Input) owner(i int) Ownership {
	if in.memo.owners == nil {
		in.memo.owners = make([]knownOwner, len(in.Snapshot.VMIs))
	}
	o := &in.memo.owners[i]
	if !o.known {
		o.own, o.known = ResolveOwner(in.Index, &in.Snapshot.VMIs[i]), true
	}
	return o.own
}

// vmiTenantNodes returns, for the snapshot's VMI i and each tenant of its
// namespace (Index.TenantsFor), the tenant nodes that are its VM, looked up
// once: the hot-plug, StuckPublish and tenant attach checks all ask.
func (in Input) vmiTenantNodes(i int) [][]snapshot.TenantNodeRef {
	m := in.memo
	if m.nodesAt == nil {
		m.nodesAt = make([]int32, len(in.Snapshot.VMIs))
		m.nodes = make([][]snapshot.TenantNodeRef, 0, len(in.Snapshot.VMIs))
	}
	vmi := &in.Snapshot.VMIs[i]
	tenants := in.Index.TenantsFor(vmi.Namespace)
	if at := int(m.nodesAt[i]); at > 0 {
		return m.nodes[at-1 : at-1+len(tenants)]
	}
	start, vm := len(m.nodes), snapshot.InfraVM{Namespace: vmi.Namespace, Name: vmi.Name}
	for _, t := range tenants {
		m.nodes = append(m.nodes, t.NodesFor(vm))
	}
	m.nodesAt[i] = int32(start + 1)
	return m.nodes[start:len(m.nodes):len(m.nodes)]
}

// hotplugGates returns the snapshot's FeatureGates.Hotplug, evaluated once.
func (in Input) hotplugGates() snapshot.HotplugGates {
	if in.memo.gates == nil {
		g := in.Snapshot.FeatureGates.Hotplug()
		in.memo.gates = &g
	}
	return *in.memo.gates
}

// gateFact returns the evidence text prefix+gates.Basis: for the pass's
// own gates one string for every finding that states it (at 100,000 VMIs,
// 200,000 copies of the same 180 bytes otherwise).
func (in Input) gateFact(prefix string, gates snapshot.HotplugGates) string {
	if in.memo == nil || in.memo.gates == nil || in.memo.gates.Basis != gates.Basis {
		return prefix + gates.Basis
	}
	s, ok := in.memo.gateFacts[prefix]
	if !ok {
		if in.memo.gateFacts == nil {
			in.memo.gateFacts = map[string]string{}
		}
		s = prefix + gates.Basis
		in.memo.gateFacts[prefix] = s
	}
	return s
}

// before19 returns kubeVirtBefore19 of the snapshot's gates, decided once.
func (in Input) before19() bool {
	if in.memo.before19 == nil {
		b := kubeVirtBefore19(in.Snapshot.FeatureGates)
		in.memo.before19 = &b
	}
	return *in.memo.before19
}

// vmiByLauncher returns the VMI in ns whose status.activePods lists pod uid
// (one of its virt-launcher pods), or nil.
func (in Input) vmiByLauncher(ns string, uid types.UID) *snapshot.VMI {
	if in.memo.launchers == nil {
		in.memo.launchers = map[string]map[types.UID]*snapshot.VMI{}
	}
	byUID, ok := in.memo.launchers[ns]
	if !ok {
		byUID = map[types.UID]*snapshot.VMI{}
		for _, vmi := range in.Index.VMIsIn(ns) {
			for pod := range vmi.Status.ActivePods {
				byUID[pod] = vmi
			}
		}
		in.memo.launchers[ns] = byUID
	}
	return byUID[uid]
}

// claimUse is a VMI volume status entry whose volume uses a claim.
type claimUse struct {
	vmi    *snapshot.VMI
	volume string
}

// claimUses returns the VMI volumes in ns — listed in the status or in the
// spec — that may use claim (see snapshot.VolumeStatusClaims).
func (in Input) claimUses(ns, claim string) []claimUse {
	if in.memo.claimUses == nil {
		in.memo.claimUses = map[string]map[string][]claimUse{}
	}
	uses, ok := in.memo.claimUses[ns]
	if !ok {
		uses = map[string][]claimUse{}
		for _, vmi := range in.Index.VMIsIn(ns) {
			seen := map[[2]string]bool{} // claim, volume
			add := func(c string, u claimUse) {
				if k := [2]string{c, u.volume}; c != "" && !seen[k] {
					seen[k] = true
					uses[c] = append(uses[c], u)
				}
			}
			for i := range vmi.Status.VolumeStatus {
				vs := &vmi.Status.VolumeStatus[i]
				snapshot.EachVolumeStatusClaim(vmi, vs, func(c string) { add(c, claimUse{vmi: vmi, volume: vs.Name}) })
			}
			// The spec counts too: virt-controller may have created the
			// pod for a spec volume before it recorded it in the status.
			for i := range vmi.Spec.Volumes {
				v := &vmi.Spec.Volumes[i]
				add(snapshot.ClaimName(v), claimUse{vmi: vmi, volume: v.Name})
			}
		}
		in.memo.claimUses[ns] = uses
	}
	return uses[claim]
}

// Loop names the controller loop that runs a check ("" for a check that
// only tether audit and tether fix run).
type Loop string

// The controller's loops.
const (
	// LoopHotplug decides per VMI (the VMI, its VM, the DataVolumes of the
	// VM's dataVolumeTemplates, the KubeVirt feature gates and the
	// tenants' attachments).
	LoopHotplug Loop = "hotplug"
	// LoopStorage decides from cluster-wide caches of Nodes,
	// VolumeAttachments, PVs, claims and pods.
	LoopStorage Loop = "storage"
	// LoopNamespace decides one namespace at a time from the caches of the
	// kinds its checks read there (VMs, VMIs, claims, attachment pods) and
	// the KubeVirt CR. Its checks only report.
	LoopNamespace Loop = "namespace"
	// LoopFence decides per tenant node (the node from its tenant's
	// watch, the infra VM and VMI it resolves to); its records belong to
	// no infra object, since the VM may be gone.
	LoopFence Loop = "fence"
)

// Events are the Event reasons a check's actions are recorded with, by
// how they ended (the other outcomes have reasons common to every check).
type Events struct {
	Applied, Failed string
}

// Check is one row of the registry: what the check proves and where it is
// documented (drift.Row), how it decides (Run), what it reads, which
// controller loop runs it and the Event reasons of its actions. Every
// other place (config validation, the controller's wiring, act's Event
// reasons, `tether checks`, the README table) follows from the rows.
type Check struct {
	drift.Row
	Run func(Input) []drift.Finding
	// Reads are the kinds it decides from. A check must find the same with
	// only these as with a whole snapshot
	// (TestChecksReadOnlyWhatTheyDeclare).
	Reads snapshot.Kinds
	// Loop is the controller loop that runs it ("" for none).
	Loop Loop
	// Events are its actions' Event reasons (empty when it has no action).
	Events Events
	// SeenTwice, when set, is how far apart a one-shot fix must see a
	// finding of the check twice before acting: for drift the objects give
	// no time to date (the controller dates it from its durable first
	// sighting, and acts after the check's gracePeriod).
	SeenTwice func(Policy) time.Duration
}

// Find runs the check (drift.Finder).
func (c Check) Find(in Input) []drift.Finding { return c.Run(in) }

// Event reasons of the checks' actions (contract: operators alert on them).
const (
	ReasonOrphanDetached               = eventreason.OrphanDetached
	ReasonOrphanDetachFailed           = eventreason.OrphanDetachFailed
	ReasonDanglingRemoved              = eventreason.DanglingRemoved
	ReasonStuckPublishRemoved          = eventreason.StuckPublishRemoved
	ReasonHotplugPersisted             = eventreason.HotplugPersisted
	ReasonHotplugPersistFailed         = eventreason.HotplugPersistFailed
	ReasonTenantNodeFence              = eventreason.TenantNodeFence
	ReasonTenantNodeFenceFailed        = eventreason.TenantNodeFenceFailed
	ReasonStaleAttachmentReleased      = eventreason.StaleAttachmentReleased
	ReasonStaleAttachmentReleaseFailed = eventreason.StaleAttachmentReleaseFailed
	ReasonMigrationSourcePodDeleted    = eventreason.MigrationSourcePodDeleted
	ReasonMigrationSourcePodFailed     = eventreason.MigrationSourcePodDeleteFailed
)

// All returns every check, in a fixed order.
func All() []Check {
	page := func(name string) string { return "docs/checks/" + name + ".md" }
	orphan := Events{Applied: ReasonOrphanDetached, Failed: ReasonOrphanDetachFailed}
	return []Check{
		{Row: drift.Row{Name: OrphanHotplugVolume, Doc: "a hot-plugged VMI volume that nothing wants any more", Page: page(OrphanHotplugVolume),
			Subjects: []string{"VirtualMachineInstance"}, Actions: []drift.ActionType{VMRemoveVolume, VMIRemoveVolume}},
			Run: FindOrphanHotplugVolumes, Loop: LoopHotplug, Events: orphan,
			Reads: snapshot.KindVMs | snapshot.KindVMIs | snapshot.KindDataVolumes | snapshot.KindKubeVirt},
		{Row: drift.Row{Name: OrphanAttachmentPod, Doc: "a hot-plug attachment pod that no VMI references", Page: page(OrphanAttachmentPod),
			Subjects: []string{"Pod"}, Actions: []drift.ActionType{DeleteAttachmentPod}},
			Run: FindOrphanAttachmentPods, Events: orphan,
			Reads: snapshot.KindVMIs | snapshot.KindAttachmentPods},
		{Row: drift.Row{Name: DanglingVolumeReference, Doc: "a VM or VMI volume whose PVC or DataVolume is missing, being deleted or failed, or whose attachment pod is gone", Page: page(DanglingVolumeReference),
			Subjects: []string{"VirtualMachine", "VirtualMachineInstance"}, Actions: []drift.ActionType{VMRemoveVolume, VMIRemoveVolume}},
			Run: FindDanglingVolumeReferences, Events: Events{Applied: ReasonDanglingRemoved, Failed: ReasonOrphanDetachFailed},
			Reads: snapshot.KindVMs | snapshot.KindVMIs | snapshot.KindAttachmentPods | snapshot.KindPVCs | snapshot.KindDataVolumes | snapshot.KindKubeVirt},
		{Row: drift.Row{Name: StaleVolumeAttachment, Doc: "a CSI VolumeAttachment whose node or PV is gone, or that no running pod on its node needs", Page: page(StaleVolumeAttachment),
			Subjects: []string{"VolumeAttachment"}, Actions: []drift.ActionType{DeletePodsOnFencedNode, DeleteVolumeAttachment, RemoveAttacherFinalizer}},
			Run: FindStaleVolumeAttachments, Loop: LoopStorage, Events: Events{Applied: ReasonStaleAttachmentReleased, Failed: ReasonStaleAttachmentReleaseFailed},
			Reads: snapshot.KindStorage | snapshot.KindPods | snapshot.KindPVCs},
		{Row: drift.Row{Name: MultiAttachConflict, Doc: "a pod waiting for a ReadWriteOnce volume that is attached to another node", Page: page(MultiAttachConflict),
			Subjects: []string{"Pod"}},
			Run: FindMultiAttachConflicts, Loop: LoopStorage,
			Reads: snapshot.KindStorage | snapshot.KindPods | snapshot.KindPVCs | snapshot.KindCSIDrivers},
		{Row: drift.Row{Name: BlockedDeletion, Doc: "a PVC, PV or DataVolume stuck terminating on a protection finalizer, and who holds it", Page: page(BlockedDeletion),
			Subjects: []string{"PersistentVolumeClaim", "PersistentVolume", "DataVolume"}},
			Run: FindBlockedDeletions, Loop: LoopStorage,
			Reads: snapshot.KindStorage | snapshot.KindPods | snapshot.KindPVCs | snapshot.KindDataVolumes | snapshot.KindVMs},
		// The tenant attach checks decide per VMI from the VMI, its VM and
		// the tenants' evidence, which is what the hot-plug loop's
		// snapshot holds (the tenant watch's VolumeAttachments keep their
		// status, and their changes wake the VMI of their node).
		{Row: drift.Row{Name: PhantomAttach, Doc: "a tenant VolumeAttachment that says attached while its VMI has no Ready hot-plug of the volume", Page: page(PhantomAttach),
			Subjects: []string{"VirtualMachineInstance"}},
			Run: FindPhantomAttachments, Loop: LoopHotplug,
			Reads: snapshot.KindVMs | snapshot.KindVMIs},
		// Acts (VM-level removevolume) only on a finding seen twice: a
		// hot-plug that never became Ready has no time in the status.
		{Row: drift.Row{Name: StuckPublish, Doc: "a hot-plug a CSI publish left in the VM spec, never Ready, that no tenant attachment wants", Page: page(StuckPublish),
			Subjects: []string{"VirtualMachineInstance"}, Actions: []drift.ActionType{VMRemoveVolume}},
			Run: FindStuckPublishes, Loop: LoopHotplug, Events: Events{Applied: ReasonStuckPublishRemoved, Failed: ReasonOrphanDetachFailed},
			Reads:     snapshot.KindVMs | snapshot.KindVMIs | snapshot.KindKubeVirt,
			SeenTwice: func(p Policy) time.Duration { return p.withDefaults().StuckPublishGrace }},
		{Row: drift.Row{Name: AttachAlreadyPresent, Doc: "a tenant attach that fails with \"already exists\" while its VMI has the volume Ready", Page: page(AttachAlreadyPresent),
			Subjects: []string{"VirtualMachineInstance"}},
			Run: FindAttachAlreadyPresent, Loop: LoopHotplug,
			Reads: snapshot.KindVMs | snapshot.KindVMIs},
		// Report only, per VMI: what a gate change (or a KubeVirt/HCO
		// upgrade) takes from running guests.
		{Row: drift.Row{Name: UnpersistedHotplug, Doc: "a hot-plug of a running VM-owned VMI that its VM spec lacks, which KubeVirt's declarative hot-plug sync unplugs", Page: page(UnpersistedHotplug),
			Subjects: []string{"VirtualMachineInstance"}, Actions: []drift.ActionType{PersistHotplug}},
			Run: FindUnpersistedHotplugs, Loop: LoopHotplug, Events: Events{Applied: ReasonHotplugPersisted, Failed: ReasonHotplugPersistFailed},
			Reads: snapshot.KindVMs | snapshot.KindVMIs | snapshot.KindKubeVirt},
		// Report only, per VMI: a hot-plug its guest cannot find by serial.
		{Row: drift.Row{Name: TruncatedDiskSerial, Doc: "a hot-plug on the virtio bus whose serial is longer than the 20 bytes its guest sees, so a lookup by serial fails", Page: page(TruncatedDiskSerial),
			Subjects: []string{"VirtualMachineInstance"}},
			Run: FindTruncatedDiskSerials, Loop: LoopHotplug,
			Reads: snapshot.KindVMIs},
		// Report only, per VMI: what a drain of its node takes from the
		// guest. Not in the controller: it reads virt-api's webhook
		// registration, which the controller does not watch.
		{Row: drift.Row{Name: DrainEvictsHotplug, Doc: "a running VMI whose hot-plug attachment pods a drain of its node may evict before it has left, with no guard refusing it", Page: page(DrainEvictsHotplug),
			Subjects: []string{"VirtualMachineInstance"}},
			Run:   FindDrainEvictsHotplug,
			Reads: snapshot.KindVMIs | snapshot.KindAttachmentPods | snapshot.KindKubeVirt | snapshot.KindEvictionGuard},
		// Acts in a tenant: the out-of-service taint on a Node whose infra
		// VM is down, and its removal once the VM runs and the Node is
		// Ready again (only a taint tether put there).
		{Row: drift.Row{Name: TenantNodeDown, Doc: "a tenant Node whose infra VM is down for certain, fenced with the out-of-service taint", Page: page(TenantNodeDown),
			Subjects: []string{"Node"}, Actions: []drift.ActionType{TaintOutOfService, RemoveOutOfServiceTaint, UncordonTenantNode}},
			Run: FindTenantNodesDown, Loop: LoopFence, Events: Events{Applied: ReasonTenantNodeFence, Failed: ReasonTenantNodeFenceFailed},
			Reads: snapshot.KindVMs | snapshot.KindVMIs},
		// The namespace loop runs the report-only checks that need a
		// whole namespace at once: the attachment pods that date a stuck
		// hot-plug phase (the hot-plug loop's per-VMI snapshot has none),
		// every VM and VMI that may share a claim, and VMs without a
		// running VMI (which the per-VMI hot-plug loop never visits).
		{Row: drift.Row{Name: StuckHotplugPhase, Doc: "a hot-plug volume stuck in a phase KubeVirt should have left, who must act, and the KubeVirt release that fixes it", Page: page(StuckHotplugPhase),
			Subjects: []string{"VirtualMachineInstance"}},
			Run: FindStuckHotplugPhases, Loop: LoopNamespace,
			Reads: snapshot.KindVMIs | snapshot.KindAttachmentPods | snapshot.KindKubeVirt},
		{Row: drift.Row{Name: SharedClaimConflict, Doc: "a claim only one node may use, referenced by two or more VMs, and who holds it", Page: page(SharedClaimConflict),
			Subjects: []string{"PersistentVolumeClaim"}},
			Run: FindSharedClaimConflicts, Loop: LoopNamespace,
			Reads: snapshot.KindVMs | snapshot.KindVMIs | snapshot.KindPVCs},
		{Row: drift.Row{Name: InterruptedVolumeMigration, Doc: "a VM left needing manual recovery by an interrupted volume migration, and which claim holds its data", Page: page(InterruptedVolumeMigration),
			Subjects: []string{"VirtualMachine"}},
			Run: FindInterruptedVolumeMigrations, Loop: LoopNamespace,
			Reads: snapshot.KindVMs | snapshot.KindVMIs | snapshot.KindPVCs},
		// Per VMI: the finished source launcher pod of its completed
		// migration that pins claims it no longer uses; deleted only on
		// request (fix --delete-migration-source-pods). Not in the
		// controller: no loop holds both a VMI and every pod.
		{Row: drift.Row{Name: MigrationSourcePodLeftover, Doc: "a finished source launcher pod of a completed migration that still holds claims its VMI no longer uses", Page: page(MigrationSourcePodLeftover),
			Subjects: []string{"Pod"}, Actions: []drift.ActionType{DeleteMigrationSourcePod}},
			Run: FindMigrationSourcePodLeftovers, Events: Events{Applied: ReasonMigrationSourcePodDeleted, Failed: ReasonMigrationSourcePodFailed},
			Reads: snapshot.KindVMIs | snapshot.KindPods | snapshot.KindPVCs},
	}
}

// SeenTwice is how far apart a one-shot fix must see a finding of the
// check called name twice (Check.SeenTwice); zero when once is enough.
func SeenTwice(p Policy, name string) time.Duration {
	for i := range rows() {
		if c := &rows()[i]; c.Name == name {
			if c.SeenTwice != nil {
				return c.SeenTwice(p)
			}
			return 0
		}
	}
	return 0
}

// rows are All's rows, built once for the questions asked once per finding
// (SeenTwice): All builds every row anew. Nothing may change them.
var rows = sync.OnceValue(All)

// Names returns the names of all checks.
func Names() []string { return drift.Names(All()) }

// Lookup returns the check called name, or an error naming the valid checks.
func Lookup(name string) (Check, error) { return drift.Lookup(All(), name, "check") }

// InLoop returns the names of the checks the controller loop runs; with no
// loop named, of every check the controller runs.
func InLoop(loops ...Loop) []string {
	var out []string
	for _, c := range All() {
		if c.Loop != "" && (len(loops) == 0 || slices.Contains(loops, c.Loop)) {
			out = append(out, c.Name)
		}
	}
	return out
}

// Run runs the checks the policy selects (all when none are named, but
// those it excepts; unknown names are skipped, Validate reports them) and returns their findings in
// the one order of drift.Sort.
func Run(s *snapshot.Snapshot, p Policy, now time.Time) []drift.Finding {
	names, ok := p.selected()
	if !ok {
		return nil
	}
	return drift.Run(All(), NewInput(s, p, now), names)
}

// RunDeferred is Run whose findings hold their facts and not their words
// where a check can write them again later (drift.Finding.Defer): those
// of OrphanHotplugVolume and DanglingVolumeReference, the ones a large
// cluster has by the hundred thousand. The snapshot must stay unchanged
// until every finding's words are written (drift.Finding.Write). The
// decisions are Run's.
func RunDeferred(s *snapshot.Snapshot, p Policy, now time.Time) []drift.Finding {
	names, ok := p.selected()
	if !ok {
		return nil
	}
	in := NewInput(s, p, now)
	in.deferText = true
	return drift.Run(All(), in, names)
}
