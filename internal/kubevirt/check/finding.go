package check

import "github.com/tether-dev/tether/internal/drift"

// KubeVirt's action types and block reasons; the vocabulary they belong
// to (Finding, Action, Severity) is internal/drift's.

// Action types (contract: they appear in JSON output and plans).
const (
	// VMRemoveVolume is the VM-level removevolume subresource
	// (virtctl removevolume VM --persist): removes the volume from the VM
	// spec, and KubeVirt then detaches it from the VMI.
	VMRemoveVolume drift.ActionType = "VMRemoveVolume"
	// VMIRemoveVolume is the VMI-level removevolume subresource
	// (virtctl removevolume VMI without --persist).
	VMIRemoveVolume drift.ActionType = "VMIRemoveVolume"
	// DeleteAttachmentPod deletes a hot-plug attachment pod.
	DeleteAttachmentPod drift.ActionType = "DeleteAttachmentPod"
	// DeleteMigrationSourcePod deletes the finished source launcher pod of
	// a completed migration.
	DeleteMigrationSourcePod drift.ActionType = "DeleteMigrationSourcePod"
	// DeletePodsOnFencedNode force-deletes the pods bound to a fenced node
	// that keep a stale VolumeAttachment desired, so that the attach/detach
	// controller detaches it on its normal path.
	DeletePodsOnFencedNode drift.ActionType = "DeletePodsOnFencedNode"
	// DeleteVolumeAttachment deletes a stale VolumeAttachment (forced:
	// last resort, opt-in).
	DeleteVolumeAttachment drift.ActionType = "DeleteVolumeAttachment"
	// RemoveAttacherFinalizer removes external-attacher's finalizer from a
	// VolumeAttachment whose deletion hangs (forced: last resort, opt-in).
	RemoveAttacherFinalizer drift.ActionType = "RemoveAttacherFinalizer"
)

// Block reasons (contract: they appear in JSON output). Each names the fact
// that has to change, and the remedy says how to change it by hand.
const (
	// VMIMigrating: the VMI has a migration that has not completed or
	// failed; virt-api accepts volume calls (202), but the VM/VMI views
	// diverge for a while on their own, so tether waits.
	VMIMigrating drift.BlockReason = "VMIMigrating"
	// VMITerminating: the VMI is being deleted.
	VMITerminating drift.BlockReason = "VMITerminating"
	// VMINotRunning: the VMI's phase is not Running; removevolume needs it.
	VMINotRunning drift.BlockReason = "VMINotRunning"
	// VMTerminating: the owning VM is being deleted.
	VMTerminating drift.BlockReason = "VMTerminating"
	// VMIOnlyHotplug: the volume was hot-plugged to the VMI only, which is
	// legitimate with the HotplugVolumes gate on (the VMI route); detaching
	// it needs tenant evidence or an explicit opt-in.
	VMIOnlyHotplug drift.BlockReason = "VMIOnlyHotplug"
	// DeclarativeSync: virt-controller syncs this VM-owned VMI's hot-plug
	// volumes from the VM spec (DeclarativeHotplugVolumes on,
	// HotplugVolumes off): it removes VMI-only hot-plugs itself, and the
	// API refuses to (VMI route 400, VM route 409). One that persists means
	// the VM sync or virt-handler is stuck; the evidence says what tether
	// can see of why. Never acted on.
	DeclarativeSync drift.BlockReason = "DeclarativeSync"
	// OwnerGone: the VMI's controlling VirtualMachine is gone (deleted, or
	// re-created with another UID); the garbage collector deletes the VMI,
	// and its hot-plugs with it. Never acted on.
	OwnerGone drift.BlockReason = "OwnerGone"
	// TenantUnreachable: a tenant whose evidence applies could not be read.
	TenantUnreachable drift.BlockReason = "TenantUnreachable"
	// TenantIncomplete: a tenant VolumeAttachment on the VMI's node has a
	// volume handle that cannot be resolved, so it may want the volume.
	TenantIncomplete drift.BlockReason = "TenantIncomplete"
	// TenantNodeUnmapped: a tenant node cannot be tied to one infra VM
	// (its providerID, annotations, CSINode node ID and VolumeAttachments
	// disagree or say nothing), so it may be this VMI's VM.
	TenantNodeUnmapped drift.BlockReason = "TenantNodeUnmapped"
	// HotplugGateDisabled: the VMI-level API is refused for VM-owned VMIs
	// because the HotplugVolumes feature gate is off.
	HotplugGateDisabled drift.BlockReason = "HotplugGateDisabled"
	// HotplugGateUnknown: the KubeVirt CR could not be read.
	HotplugGateUnknown drift.BlockReason = "HotplugGateUnknown"
	// RemovalPending: the VM already has a removevolume request for it.
	RemovalPending drift.BlockReason = "RemovalPending"
	// AdditionPending: the VM has an addvolume request for it that
	// virt-controller has not applied yet.
	AdditionPending drift.BlockReason = "AdditionPending"
	// DetachInProgress: the volume is being detached (status phase
	// Detaching/UnMountedFromPod, gone from the VMI spec, or its tenant
	// VolumeAttachment is being deleted).
	DetachInProgress drift.BlockReason = "DetachInProgress"
	// VolumeNotReady: the volume status phase is not Ready (still attaching).
	VolumeNotReady drift.BlockReason = "VolumeNotReady"
	// VolumeNotHotpluggable: the spec volume lacks the hotpluggable flag;
	// removevolume refuses it.
	VolumeNotHotpluggable drift.BlockReason = "VolumeNotHotpluggable"
	// AttachmentPodTooYoung: the pod is younger than the minimum age (or its
	// age is unknown); its VMI status may not name it yet.
	AttachmentPodTooYoung drift.BlockReason = "AttachmentPodTooYoung"
	// VolumeStillListed: a VMI in the namespace still lists a volume that
	// uses one of the pod's claims.
	VolumeStillListed drift.BlockReason = "VolumeStillListed"
	// NodeNotFenced: nothing proves the VolumeAttachment's node is down: it
	// lacks the out-of-service taint, and it is not gone for longer than
	// the configured period (or that rule is off).
	NodeNotFenced drift.BlockReason = "NodeNotFenced"
	// VolumeHeldElsewhere: a ReadWriteOnce volume a pod waits for is
	// attached to another node; see the evidence for who holds it.
	VolumeHeldElsewhere drift.BlockReason = "VolumeHeldElsewhere"
	// HeldByUsers: an object being deleted is still used; its protection
	// finalizer stays until the users named in the evidence are gone.
	HeldByUsers drift.BlockReason = "HeldByUsers"
	// FinalizerNotReleased: no user is left, yet the protection finalizer
	// stays: the controller that owns it is not releasing it.
	FinalizerNotReleased drift.BlockReason = "FinalizerNotReleased"
	// VMRunning: the VM has a VMI and the dangling reference is not provably
	// unused by it; stop the VM first.
	VMRunning drift.BlockReason = "VMRunning"
	// VolumeInUse: the VMI status shows the volume attached (an attachment
	// pod or an attached phase), or an attachment pod still mounts its claim.
	VolumeInUse drift.BlockReason = "VolumeInUse"
	// ClaimExists: the claim is there; only the attachment pod the VMI status
	// names is gone, which virt-controller normally repairs on its own.
	ClaimExists drift.BlockReason = "ClaimExists"
	// DeletionPostponed: the PVC or DataVolume a reference names has a
	// deletionTimestamp but finalizers keep it: it still exists, so the
	// reference is not dangling, and tether never removes it (its own
	// protection may be what keeps the object).
	DeletionPostponed drift.BlockReason = "DeletionPostponed"
	// StorageExists: an object of the referenced name still exists (a
	// DataVolume that failed, or that succeeded and lost its PVC, which CDI
	// may retry or re-create): a reference is removed only when no PVC and
	// no DataVolume of that name exists at all.
	StorageExists drift.BlockReason = "StorageExists"
	// HotplugMissing: a tenant VolumeAttachment says attached while the
	// VMI of its node has no Ready hot-plug of that volume handle. Only the
	// CSI driver can make the two agree (by publishing again); tether never
	// writes a VolumeAttachment's status.
	HotplugMissing drift.BlockReason = "HotplugMissing"
	// DriverNotIdempotent: a tenant attach fails because the volume
	// "already exists" while the VMI has it Ready: the infra side is right
	// and the CSI driver should have answered success.
	DriverNotIdempotent drift.BlockReason = "DriverNotIdempotent"
	// TenantAttachTooRecent: the tenant VolumeAttachment, or the VMI, is
	// younger than Policy.TenantAttachGrace (a publish or a VMI start may
	// still be under way), or its hot-plug is mid-lifecycle for less than
	// that.
	TenantAttachTooRecent drift.BlockReason = "TenantAttachTooRecent"
	// WaitsForKubeVirt: the state is KubeVirt's to end (the component named
	// in the evidence is expected to act; the fixes table says which
	// release fixes it). tether never acts on it.
	WaitsForKubeVirt drift.BlockReason = "WaitsForKubeVirt"
	// ClaimReferencedTwice: a claim only one node may use is referenced by
	// two or more VMs; which one keeps it is its owners' decision.
	ClaimReferencedTwice drift.BlockReason = "ClaimReferencedTwice"
	// ManualRecoveryRequired: KubeVirt refuses to start the VM after an
	// interrupted volume migration until its volumes name their source
	// claims again; which copy to keep is the owner's decision.
	ManualRecoveryRequired drift.BlockReason = "ManualRecoveryRequired"
)

// blockClasses are the block reasons whose findings were not judged; every
// other reason leaves its finding judged (drift.Judged).
var blockClasses = map[drift.BlockReason]drift.BlockClass{
	// tether could not read evidence it needs: a tenant cluster, the
	// KubeVirt CR.
	TenantUnreachable:  drift.Unreadable,
	HotplugGateUnknown: drift.Unreadable,
	// The subject is being deleted, migrated, detached or attached, a
	// removal or addition is queued, or its attachment pod is too young
	// to judge.
	VMIMigrating:          drift.MidChange,
	VMITerminating:        drift.MidChange,
	VMTerminating:         drift.MidChange,
	OwnerGone:             drift.MidChange,
	DetachInProgress:      drift.MidChange,
	RemovalPending:        drift.MidChange,
	AdditionPending:       drift.MidChange,
	VolumeNotReady:        drift.MidChange,
	AttachmentPodTooYoung: drift.MidChange,
}

// BlockClassOf classifies KubeVirt's block reasons for the reports that
// grade findings (package policyreport).
func BlockClassOf(r drift.BlockReason) drift.BlockClass { return blockClasses[r] }
