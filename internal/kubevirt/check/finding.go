package check

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

// Severity says whether a finding is a proven problem or information.
type Severity string

// Rank orders severities: info 1, warning 2, critical 3 (0 for unknown).
func (s Severity) Rank() int {
	switch s {
	case SeverityInfo:
		return 1
	case SeverityWarning:
		return 2
	case SeverityCritical:
		return 3
	}
	return 0
}

// Severities, from the highest.
const (
	// SeverityCritical marks a problem that also stops KubeVirt's work on
	// other objects (a hot-plug volume whose PVC is missing freezes every
	// hot-plug attach and detach of its VMI).
	SeverityCritical Severity = "critical"
	// SeverityWarning marks an orphan: something nothing wants.
	SeverityWarning Severity = "warning"
	// SeverityInfo marks a divergence that is legitimate or not proven.
	SeverityInfo Severity = "info"
)

// ActionType is what would fix a finding.
type ActionType string

// Action types (contract: they appear in JSON output and plans).
const (
	// VMRemoveVolume is the VM-level removevolume subresource
	// (virtctl removevolume VM --persist): removes the volume from the VM
	// spec, and KubeVirt then detaches it from the VMI.
	VMRemoveVolume ActionType = "VMRemoveVolume"
	// VMIRemoveVolume is the VMI-level removevolume subresource
	// (virtctl removevolume VMI without --persist).
	VMIRemoveVolume ActionType = "VMIRemoveVolume"
	// DeleteAttachmentPod deletes a hot-plug attachment pod.
	DeleteAttachmentPod ActionType = "DeleteAttachmentPod"
	// DeletePodsOnFencedNode force-deletes the pods bound to a fenced node
	// that keep a stale VolumeAttachment desired, so that the attach/detach
	// controller detaches it on its normal path.
	DeletePodsOnFencedNode ActionType = "DeletePodsOnFencedNode"
	// DeleteVolumeAttachment deletes a stale VolumeAttachment (forced:
	// last resort, opt-in).
	DeleteVolumeAttachment ActionType = "DeleteVolumeAttachment"
	// RemoveAttacherFinalizer removes external-attacher's finalizer from a
	// VolumeAttachment whose deletion hangs (forced: last resort, opt-in).
	RemoveAttacherFinalizer ActionType = "RemoveAttacherFinalizer"
	// None means no action can fix the finding.
	None ActionType = "None"
)

// BlockReason says why a proposed action is not safe now.
type BlockReason string

// Block reasons (contract: they appear in JSON output). Each names the fact
// that has to change, and the remedy says how to change it by hand.
const (
	// VMIMigrating: the VMI has a migration that has not completed or
	// failed; virt-api accepts volume calls (202), but the VM/VMI views
	// diverge for a while on their own, so tether waits.
	VMIMigrating BlockReason = "VMIMigrating"
	// VMITerminating: the VMI is being deleted.
	VMITerminating BlockReason = "VMITerminating"
	// VMINotRunning: the VMI's phase is not Running; removevolume needs it.
	VMINotRunning BlockReason = "VMINotRunning"
	// VMTerminating: the owning VM is being deleted.
	VMTerminating BlockReason = "VMTerminating"
	// VMIOnlyHotplug: the volume was hot-plugged to the VMI only, which is
	// legitimate with the HotplugVolumes gate on (the VMI route); detaching
	// it needs tenant evidence or an explicit opt-in.
	VMIOnlyHotplug BlockReason = "VMIOnlyHotplug"
	// DeclarativeSync: virt-controller syncs this VM-owned VMI's hot-plug
	// volumes from the VM spec (DeclarativeHotplugVolumes on,
	// HotplugVolumes off): it removes VMI-only hot-plugs itself, and the
	// API refuses to (VMI route 400, VM route 409). One that persists means
	// the VM sync or virt-handler is stuck; the evidence says what tether
	// can see of why. Never acted on.
	DeclarativeSync BlockReason = "DeclarativeSync"
	// OwnerGone: the VMI's controlling VirtualMachine is gone (deleted, or
	// re-created with another UID); the garbage collector deletes the VMI,
	// and its hot-plugs with it. Never acted on.
	OwnerGone BlockReason = "OwnerGone"
	// TenantUnreachable: a tenant whose evidence applies could not be read.
	TenantUnreachable BlockReason = "TenantUnreachable"
	// TenantIncomplete: a tenant VolumeAttachment on the VMI's node has a
	// volume handle that cannot be resolved, so it may want the volume.
	TenantIncomplete BlockReason = "TenantIncomplete"
	// TenantNodeUnmapped: a tenant node cannot be tied to one infra VM
	// (its providerID, annotations, CSINode node ID and VolumeAttachments
	// disagree or say nothing), so it may be this VMI's VM.
	TenantNodeUnmapped BlockReason = "TenantNodeUnmapped"
	// HotplugGateDisabled: the VMI-level API is refused for VM-owned VMIs
	// because the HotplugVolumes feature gate is off.
	HotplugGateDisabled BlockReason = "HotplugGateDisabled"
	// HotplugGateUnknown: the KubeVirt CR could not be read.
	HotplugGateUnknown BlockReason = "HotplugGateUnknown"
	// RemovalPending: the VM already has a removevolume request for it.
	RemovalPending BlockReason = "RemovalPending"
	// AdditionPending: the VM has an addvolume request for it that
	// virt-controller has not applied yet.
	AdditionPending BlockReason = "AdditionPending"
	// DetachInProgress: the volume is being detached (status phase
	// Detaching/UnMountedFromPod, gone from the VMI spec, or its tenant
	// VolumeAttachment is being deleted).
	DetachInProgress BlockReason = "DetachInProgress"
	// VolumeNotReady: the volume status phase is not Ready (still attaching).
	VolumeNotReady BlockReason = "VolumeNotReady"
	// VolumeNotHotpluggable: the spec volume lacks the hotpluggable flag;
	// removevolume refuses it.
	VolumeNotHotpluggable BlockReason = "VolumeNotHotpluggable"
	// AttachmentPodTooYoung: the pod is younger than the minimum age (or its
	// age is unknown); its VMI status may not name it yet.
	AttachmentPodTooYoung BlockReason = "AttachmentPodTooYoung"
	// VolumeStillListed: a VMI in the namespace still lists a volume that
	// uses one of the pod's claims.
	VolumeStillListed BlockReason = "VolumeStillListed"
	// NotRequested: the action is destructive and was not asked for.
	NotRequested BlockReason = "NotRequested"
	// NodeNotFenced: nothing proves the VolumeAttachment's node is down: it
	// lacks the out-of-service taint, and it is not gone for longer than
	// the configured period (or that rule is off).
	NodeNotFenced BlockReason = "NodeNotFenced"
	// VolumeHeldElsewhere: a ReadWriteOnce volume a pod waits for is
	// attached to another node; see the evidence for who holds it.
	VolumeHeldElsewhere BlockReason = "VolumeHeldElsewhere"
	// HeldByUsers: an object being deleted is still used; its protection
	// finalizer stays until the users named in the evidence are gone.
	HeldByUsers BlockReason = "HeldByUsers"
	// FinalizerNotReleased: no user is left, yet the protection finalizer
	// stays: the controller that owns it is not releasing it.
	FinalizerNotReleased BlockReason = "FinalizerNotReleased"
	// VMRunning: the VM has a VMI and the dangling reference is not provably
	// unused by it; stop the VM first.
	VMRunning BlockReason = "VMRunning"
	// VolumeInUse: the VMI status shows the volume attached (an attachment
	// pod or an attached phase), or an attachment pod still mounts its claim.
	VolumeInUse BlockReason = "VolumeInUse"
	// ClaimExists: the claim is there; only the attachment pod the VMI status
	// names is gone, which virt-controller normally repairs on its own.
	ClaimExists BlockReason = "ClaimExists"
	// DeletionPostponed: the PVC or DataVolume a reference names has a
	// deletionTimestamp but finalizers keep it: it still exists, so the
	// reference is not dangling, and tether never removes it (its own
	// protection may be what keeps the object).
	DeletionPostponed BlockReason = "DeletionPostponed"
	// StorageExists: an object of the referenced name still exists (a
	// DataVolume that failed, or that succeeded and lost its PVC, which CDI
	// may retry or re-create): a reference is removed only when no PVC and
	// no DataVolume of that name exists at all.
	StorageExists BlockReason = "StorageExists"
)

// ObjectRef names the subject of a finding.
type ObjectRef struct {
	Kind string    `json:"kind"`
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

// Action is the proposed fix: safe, or blocked with the reason, and always
// the manual procedure.
type Action struct {
	Type      ActionType  `json:"type"`
	Safe      bool        `json:"safe"`
	BlockedBy BlockReason `json:"blockedBy,omitempty"`
	Remedy    string      `json:"remedy"`
}

// Finding is one thing a check found (contract: its JSON form is part of
// `tether audit -o json`).
type Finding struct {
	ID        string    `json:"id"`
	Check     string    `json:"check"`
	Namespace string    `json:"namespace"`
	Object    ObjectRef `json:"object"`
	Volume    string    `json:"volume"`
	Severity  Severity  `json:"severity"`
	Message   string    `json:"message"`
	// Evidence are short facts a human can verify with kubectl.
	Evidence []string `json:"evidence"`
	Action   Action   `json:"action"`
}

// FindingID is the stable id of a finding: the first 12 hex digits of the
// SHA-256 of check/namespace/kind/name/uid/volume.
func FindingID(check, ns string, obj ObjectRef, volume string) string {
	h := sha256.New()
	for i, part := range []string{check, ns, obj.Kind, obj.Name, string(obj.UID), volume} {
		if i > 0 {
			h.Write([]byte{'/'})
		}
		h.Write([]byte(part))
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:6])
}

// Qualified names an object as "namespace/name", or "name" when it is
// cluster-scoped (ns is empty).
func Qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
