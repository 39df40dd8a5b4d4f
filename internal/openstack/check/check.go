// Package check holds tether's OpenStack decisions: pure functions from a
// snapshot of Nova's and Cinder's records, a policy and the current time to
// findings in tether's Finding schema, each with its evidence (facts a
// human can verify with the openstack CLI) and either a safe action or the
// reason no action is safe.
//
// Nothing in this package may do I/O, read the clock or keep state between
// calls: act re-runs the same functions on freshly read objects before it
// changes anything.
package check

import (
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// Check names (contract: users pass them to --check and scripts read them).
const (
	// DanglingNovaAttachment: Nova lists a volume on a server (a block
	// device mapping) that Cinder does not hold attached to that server.
	DanglingNovaAttachment = "DanglingNovaAttachment"
	// StaleCinderAttachment: Cinder holds an attachment for a server that
	// does not exist, is deleted, or does not list the volume.
	StaleCinderAttachment = "StaleCinderAttachment"
	// LeftoverCinderAttachment: Cinder holds a second attachment (reserved
	// or attaching) of a volume for a server that has the volume through
	// the attachment Nova's mapping records.
	LeftoverCinderAttachment = "LeftoverCinderAttachment"
)

// Action types (contract: they appear in JSON output and plans).
const (
	// DeleteCinderAttachment deletes the Cinder attachment
	// (DELETE /v3/{project}/attachments/{id}, block-storage 3.27). Cinder
	// itself asks Nova first and answers 409 while Nova uses it.
	DeleteCinderAttachment drift.ActionType = "DeleteCinderAttachment"
	// ForceDetachVolume is the volume action os-force_detach with the
	// attachment id: Cinder terminates the connection and deletes that
	// one attachment.
	ForceDetachVolume drift.ActionType = "ForceDetachVolume"
	// RecreateAttachmentAndDetach gives Nova's dangling mapping a Cinder
	// attachment again (POST /attachments at 3.54, then os-complete), has
	// Nova detach the volume (DELETE os-volume_attachments), and deletes
	// the attachment Nova's detach leaves behind.
	RecreateAttachmentAndDetach drift.ActionType = "RecreateAttachmentAndDetach"
)

// Block reasons (contract: they appear in JSON output). Each names the fact
// that has to change; the remedy says how to change it by hand.
const (
	// ServerTaskState: the server has a task (migrating, resizing,
	// rebuilding, shelving, ...): Nova is changing its mappings.
	ServerTaskState drift.BlockReason = "ServerTaskState"
	// ServerRunning: the repair cuts the compute host's connection to the
	// volume, and the server is not stopped: its guest may still use the
	// disk whatever Nova's or Cinder's database says. Only a server that
	// is stopped (SHUTOFF) or shelved and offloaded (no host) is safe.
	ServerRunning drift.BlockReason = "ServerRunning"
	// ServerTransitional: the server's vm_state is one Nova is still
	// working through (building, resized awaiting confirmation, ...).
	ServerTransitional drift.BlockReason = "ServerTransitional"
	// VolumeTransitional: the volume is attaching, detaching, reserved (or
	// in another status Cinder passes through) and changed within the
	// grace period.
	VolumeTransitional drift.BlockReason = "VolumeTransitional"
	// VolumeBusy: the volume is in a status the repair cannot start from
	// (not available), whatever its age.
	VolumeBusy drift.BlockReason = "VolumeBusy"
	// MultiattachInUse: the volume is multiattach and another server
	// still uses it.
	MultiattachInUse drift.BlockReason = "MultiattachInUse"
	// VolumeGone: Cinder does not list the volume; Nova's API cannot detach
	// a volume Cinder does not know.
	VolumeGone drift.BlockReason = "VolumeGone"
	// AttachedElsewhere: Cinder holds the volume attached to another
	// server; detaching through Nova could detach it there.
	AttachedElsewhere drift.BlockReason = "AttachedElsewhere"
	// RootVolume: the mapping is the server's root disk, which Nova never
	// detaches.
	RootVolume drift.BlockReason = "RootVolume"
	// Unconfirmed: an object the finding rests on is missing from the
	// lists, and no read by ID answered 404 for it (the read failed, or was
	// not made): tether calls nothing gone on a list alone.
	Unconfirmed drift.BlockReason = "Unconfirmed"
	// OutsideScope: an object the repair rests on exists, but outside what
	// the lists showed (a volume or server of another project than
	// --project, or one the credentials do not list): tether does not act
	// on what its scope leaves out.
	OutsideScope drift.BlockReason = "OutsideScope"
	// AttachmentConnected: the attachment has had a connector (attaching,
	// or connection info): deleting it makes Cinder terminate that
	// connection on the backend, which the server may use.
	AttachmentConnected drift.BlockReason = "AttachmentConnected"
)

// blockClasses are the block reasons whose findings were not judged; every
// other reason leaves its finding judged (drift.Judged).
var blockClasses = map[drift.BlockReason]drift.BlockClass{
	// No read by ID confirmed what the lists miss.
	Unconfirmed: drift.Unreadable,
	// Nova or Cinder is changing the server or the volume right now.
	ServerTaskState:    drift.MidChange,
	ServerTransitional: drift.MidChange,
	VolumeTransitional: drift.MidChange,
}

// BlockClassOf classifies OpenStack's block reasons for the reports that
// grade findings (package policyreport).
func BlockClassOf(r drift.BlockReason) drift.BlockClass { return blockClasses[r] }

// DefaultGrace is the grace period unless the policy says otherwise.
const DefaultGrace = 2 * time.Minute

// Policy is what the checks are run with.
type Policy struct {
	// Checks selects checks by name; empty means all.
	Checks []string
	// Grace: a volume in a transitional status is held until it is Grace
	// old. Zero means DefaultGrace. (That a finding must also be seen
	// twice, Grace apart, is the driver's first-sighting stage:
	// internal/plan.)
	Grace time.Duration
}

func (p Policy) grace() time.Duration {
	if p.Grace <= 0 {
		return DefaultGrace
	}
	return p.Grace
}

// Check is one row of OpenStack's registry: what the check proves and
// where it is documented (drift.Row), and how it decides.
type Check struct {
	drift.Row
	Run func(Input) []drift.Finding
}

// Find runs the check (drift.Finder).
func (c Check) Find(in Input) []drift.Finding { return c.Run(in) }

// All returns the OpenStack checks.
func All() []Check {
	return []Check{
		{Row: drift.Row{Name: DanglingNovaAttachment, Doc: "Nova lists a volume on a server whose Cinder attachment or volume is gone or belongs to another server",
			Page: "docs/checks/" + DanglingNovaAttachment + ".md", Subjects: []string{"Server"}, Actions: []drift.ActionType{RecreateAttachmentAndDetach}},
			Run: FindDanglingNovaAttachments},
		{Row: drift.Row{Name: StaleCinderAttachment, Doc: "Cinder holds an attachment for a server that does not exist, is deleted, or does not list the volume",
			Page: "docs/checks/" + StaleCinderAttachment + ".md", Subjects: []string{"Attachment"}, Actions: []drift.ActionType{DeleteCinderAttachment, ForceDetachVolume}},
			Run: FindStaleCinderAttachments},
		{Row: drift.Row{Name: LeftoverCinderAttachment, Doc: "Cinder holds a second, reserved or attaching, attachment of a volume for a server that has it through the attachment Nova's mapping records",
			Page: "docs/checks/" + LeftoverCinderAttachment + ".md", Subjects: []string{"Attachment"}, Actions: []drift.ActionType{DeleteCinderAttachment}},
			Run: FindLeftoverCinderAttachments},
	}
}

// Names returns the names of the OpenStack checks.
func Names() []string { return drift.Names(All()) }

// Lookup returns the check of that name, or an error listing the names.
func Lookup(name string) (Check, error) { return drift.Lookup(All(), name, "OpenStack check") }

// Input is what every check decides from.
type Input struct {
	Snapshot *snapshot.Snapshot
	Index    *snapshot.Index
	Policy   Policy
	Now      time.Time
}

// NewInput indexes s.
func NewInput(s *snapshot.Snapshot, p Policy, now time.Time) Input {
	return Input{Snapshot: s, Index: s.Index(), Policy: p, Now: now}
}

// Run runs the checks the policy selects and returns their findings in the
// one order of drift.Sort.
func Run(s *snapshot.Snapshot, p Policy, now time.Time) []drift.Finding {
	return drift.Run(All(), NewInput(s, p, now), p.Checks)
}
