// Package eventreason is the one catalogue of the reasons of the Events
// tether records, and of the log lines `tether openstack` writes where
// OpenStack has no Events (contract: operators alert on them). The
// packages that record them name these constants; TestReasonsCatalogue
// holds every reason tether's code names to a row of Reasons, and every row
// to the docs. It imports nothing, so every layer may use it.
package eventreason

// The reasons.
const (
	// Findings and actions, every check.
	FindingObserved     = "TetherFindingObserved"
	ActionApplied       = "TetherActionApplied"
	ActionPending       = "TetherActionPending"
	ActionRefused       = "TetherActionRefused"
	ActionDeferred      = "TetherActionDeferred"
	ActionFailed        = "TetherActionFailed"
	BlastRadius         = "TetherBlastRadiusExceeded"
	AnomalyGuard        = "TetherAnomalyGuard"
	RecordDistrusted    = "TetherRecordDistrusted"
	MultiAttach         = "TetherMultiAttachConflict"
	DeletionPostponed   = "TetherDeletionPostponed"
	StrandedFinalizer   = "TetherStrandedFinalizer"
	DanglingOnStart     = "TetherDanglingRemovedOnStart"
	DanglingBlocksStart = "TetherDanglingBlocksStart"
	DanglingWouldRemove = "TetherDanglingWouldRemoveOnStart"

	// The outcomes of each check's action.
	OrphanDetached                 = "TetherOrphanDetached"
	OrphanDetachFailed             = "TetherOrphanDetachFailed"
	DanglingRemoved                = "TetherDanglingReferenceRemoved"
	StuckPublishRemoved            = "TetherStuckPublishRemoved"
	HotplugPersisted               = "TetherHotplugPersisted"
	HotplugPersistFailed           = "TetherHotplugPersistFailed"
	TenantNodeFence                = "TetherTenantNodeFence"
	TenantNodeFenceFailed          = "TetherTenantNodeFenceFailed"
	StaleAttachmentReleased        = "TetherStaleAttachmentReleased"
	StaleAttachmentReleaseFailed   = "TetherStaleAttachmentReleaseFailed"
	MigrationSourcePodDeleted      = "TetherMigrationSourcePodDeleted"
	MigrationSourcePodDeleteFailed = "TetherMigrationSourcePodDeleteFailed"
)

// Reason is one row of the catalogue.
type Reason struct {
	Name string
	// What says when it is recorded.
	What string
}

// Reasons is the catalogue.
func Reasons() []Reason {
	return []Reason{
		{FindingObserved, "a finding was first observed"},
		{ActionApplied, "a repair was applied"},
		{ActionPending, "an action was accepted and its effect is not seen yet"},
		{ActionRefused, "the live re-check before a write refused the action: nothing changed"},
		{ActionDeferred, "the action waits (a migration, a grace) and is tried again"},
		{ActionFailed, "a repair failed"},
		{BlastRadius, "the blast-radius limit stopped an action"},
		{AnomalyGuard, "the anomaly guard held the actions of a picture that looks wrong"},
		{RecordDistrusted, "a Finding record's stored times were not used; its clocks start again"},
		{MultiAttach, "a pod waits for a ReadWriteOnce volume attached to another node"},
		{DeletionPostponed, "the deletion of an object VMs use waits for them"},
		{StrandedFinalizer, "an object keeps tether's finalizer outside what protection covers"},
		{DanglingOnStart, "a dangling hot-plugged reference was removed from a VM about to start"},
		{DanglingBlocksStart, "a dangling reference tether does not remove blocks a VM's start"},
		{DanglingWouldRemove, "dry run: a dangling reference would be removed from a VM about to start"},
		{OrphanDetached, "an orphan hot-plug was removed"},
		{OrphanDetachFailed, "removing an orphan hot-plug failed"},
		{DanglingRemoved, "a dangling reference was removed"},
		{StuckPublishRemoved, "a hot-plug a CSI publish left behind was removed"},
		{HotplugPersisted, "a VMI-only hot-plug was written into its VM's spec"},
		{HotplugPersistFailed, "writing a hot-plug into its VM's spec failed"},
		{TenantNodeFence, "a tenant node whose VM is down was fenced (or un-fenced)"},
		{TenantNodeFenceFailed, "fencing a tenant node failed"},
		{StaleAttachmentReleased, "a stale VolumeAttachment was released"},
		{StaleAttachmentReleaseFailed, "releasing a stale VolumeAttachment failed"},
		{MigrationSourcePodDeleted, "a finished migration source pod was deleted"},
		{MigrationSourcePodDeleteFailed, "deleting a finished migration source pod failed"},
	}
}
