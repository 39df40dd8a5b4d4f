package check

import (
	"fmt"
	"slices"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// transitionalVolume are the volume statuses Cinder passes through on its
// way to a steady one (Cinder API reference, "Volume statuses",
// api-ref/source/v3/volumes-v3-volumes.inc): creating, reserved,
// attaching, detaching, maintenance, deleting, backing-up,
// restoring-backup, downloading, uploading, retyping, extending. The
// steady ones are available, in-use, awaiting-transfer and the error_*
// statuses.
var transitionalVolume = []string{"creating", "reserved", "attaching", "detaching", "maintenance", "deleting",
	"backing-up", "restoring-backup", "downloading", "uploading", "retyping", "extending"}

// transitionalServer are the vm_states Nova still works through
// (nova/compute/vm_states.py): building (block device mappings are being
// created) and resized (a resize or cold migration awaits confirmation;
// the source host still holds attachments).
var transitionalServer = []string{"building", "resized"}

// liveAttachment are the attachment statuses that hold a volume (Cinder API
// reference, "VolumeAttachment statuses", api-ref/source/v3/attachments.inc):
// every status but detached and deleted.
func liveAttachment(status string) bool { return status != "detached" && status != "deleted" }

// serverGone says whether Nova's record of the server says it is deleted
// (vm_state deleted or status DELETED); a soft-deleted server can still be
// restored and counts as present.
func serverGone(s *snapshot.Server) bool {
	return s == nil || s.VMState == "deleted" || s.Status == "DELETED"
}

// serverStopped says whether no guest of the server can run on a compute
// host: vm_state stopped ("VM is powered off", API status SHUTOFF) or
// shelved_offloaded ("VM and associated resources are not on hypervisor",
// SHELVED_OFFLOADED), nova/compute/vm_states.py. Every other state may
// have a guest using its disks (active, paused, suspended, rescued, and
// error, which Nova sets whatever the hypervisor does) or keeps them
// connected on the host (shelved).
func serverStopped(s *snapshot.Server) bool {
	switch s.VMState {
	case "stopped", "shelved_offloaded":
		return true
	case "":
		return s.Status == "SHUTOFF" || s.Status == "SHELVED_OFFLOADED"
	}
	return false
}

// holdServer blocks a's action while Nova is working on the server, and,
// as a's action cuts the compute host's connection to the volume, while
// the server is not stopped.
func holdServer(a *drift.Action, s *snapshot.Server, volumeID string) {
	holdServerBusy(a, s)
	if s != nil && a.Safe && !serverStopped(s) {
		a.Safe, a.BlockedBy = false, ServerRunning
		a.Remedy = runningRemedy(s, volumeID, a.Remedy)
	}
}

// holdServerBusy blocks a's action while Nova is working on the server: a
// task, or a vm_state Nova still works through.
func holdServerBusy(a *drift.Action, s *snapshot.Server) {
	switch {
	case s == nil || !a.Safe:
	case s.TaskState != "":
		a.Safe, a.BlockedBy = false, ServerTaskState
	case slices.Contains(transitionalServer, s.VMState):
		a.Safe, a.BlockedBy = false, ServerTransitional
	}
}

// holdOutside blocks a's action when one of ids exists only outside what
// the lists showed, and says so in the remedy.
func (in Input) holdOutside(a *drift.Action, what string, ids ...string) {
	for _, id := range ids {
		if a.Safe && in.Index.Outside[id] {
			a.Safe, a.BlockedBy = false, OutsideScope
			a.Remedy = fmt.Sprintf("%s %s exists but was not in this run's lists (another project than --project, or one these credentials do not list); tether acts only within its scope: run it again with --all-projects as admin, or with --project naming that project (repair by hand: %s)",
				what, id, a.Remedy)
		}
	}
}

// gone says whether a read by ID of id answered 404.
func (in Input) gone(id string) bool { return in.Snapshot.Direct.Gone[id] }

// unknown says why an object that the lists did not show is not known to
// be gone.
func (in Input) unknown(id string) string {
	if why, ok := in.Snapshot.Direct.Unread[id]; ok {
		return "reading it by ID failed: " + why
	}
	return "it was not read by ID"
}

// holdVolumeTransitional blocks a's action while the volume is in a
// transitional status younger than the grace period.
func (in Input) holdVolumeTransitional(a *drift.Action, v *snapshot.Volume) bool {
	if v == nil || !a.Safe {
		return false
	}
	if slices.Contains(transitionalVolume, v.Status) && in.Now.Sub(v.Updated) < in.Policy.grace() {
		a.Safe, a.BlockedBy = false, VolumeTransitional
		return true
	}
	return false
}

// runningRemedy says why a server that is not stopped holds the repair of
// volumeID and how to let it proceed; then is the repair by hand.
func runningRemedy(s *snapshot.Server, volumeID, then string) string {
	return fmt.Sprintf("server %s is %s (vm_state %s): its guest may still use volume %s through the compute host's connection, whatever Nova's and Cinder's records say, and the repair would cut that connection. "+
		"Make sure the guest no longer needs the volume, stop the server (`openstack server stop %s`), confirm `openstack server show %s -c status` says SHUTOFF, then run `tether openstack fix` again (or repair by hand: %s)",
		s.ID, s.Status, orNone(s.VMState), volumeID, s.ID, s.ID, then)
}

// holdVolume blocks a's action while the volume is in a transitional
// status younger than the grace period, or multiattach and used by a
// server other than subject.
func (in Input) holdVolume(a *drift.Action, v *snapshot.Volume, subject string) {
	if v == nil || !a.Safe || in.holdVolumeTransitional(a, v) {
		return
	}
	if v.Multiattach && len(in.usersOtherThan(v.ID, subject)) > 0 {
		a.Safe, a.BlockedBy = false, MultiattachInUse
	}
}

// usersOtherThan are the servers other than subject that hold a live
// Cinder attachment of the volume and list it.
func (in Input) usersOtherThan(volumeID, subject string) []string {
	var out []string
	for _, at := range in.Index.AttachmentsByVolume[volumeID] {
		if at.Instance == subject || !liveAttachment(at.Status) {
			continue
		}
		if s := in.Index.Servers[at.Instance]; !serverGone(s) {
			if _, ok := s.Lists(volumeID); ok {
				out = append(out, at.Instance)
			}
		}
	}
	return out
}

// serverFacts is the evidence line about a server.
func serverFacts(s *snapshot.Server) string {
	return fmt.Sprintf("openstack server show %s: name %q, project %s, status %s, vm_state %s, task_state %s",
		s.ID, s.Name, s.Project, s.Status, orNone(s.VMState), orNone(s.TaskState))
}

// volumeFacts is the evidence line about a volume.
func (in Input) volumeFacts(v *snapshot.Volume) string {
	age := "unknown"
	if !v.Updated.IsZero() {
		age = in.Now.Sub(v.Updated).Round(time.Second).String()
	}
	return fmt.Sprintf("openstack volume show %s: name %q, project %s, status %s (last changed %s ago), multiattach %t",
		v.ID, v.Name, v.Project, v.Status, age, v.Multiattach)
}

// attachmentFacts is the evidence line about the Cinder attachments of a
// volume.
func (in Input) attachmentFacts(volumeID string) string {
	ats := in.Index.AttachmentsByVolume[volumeID]
	s := fmt.Sprintf("openstack --os-volume-api-version 3.27 volume attachment list --all-projects --volume-id %s:", volumeID)
	if len(ats) == 0 {
		return s + " none"
	}
	for i, at := range ats {
		if i > 0 {
			s += ";"
		}
		s += fmt.Sprintf(" %s for server %s (%s)", at.ID, at.Instance, at.Status)
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
