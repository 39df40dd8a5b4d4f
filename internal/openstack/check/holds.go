package check

import (
	"fmt"
	"slices"
	"time"

	tcheck "github.com/tether-dev/tether/internal/check"
	"github.com/tether-dev/tether/internal/openstack"
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
func serverGone(s *openstack.Server) bool {
	return s == nil || s.VMState == "deleted" || s.Status == "DELETED"
}

// holdServer blocks a's action while Nova is working on the server.
func holdServer(a *tcheck.Action, s *openstack.Server) {
	switch {
	case s == nil || !a.Safe:
	case s.TaskState != "":
		a.Safe, a.BlockedBy = false, ServerTaskState
	case slices.Contains(transitionalServer, s.VMState):
		a.Safe, a.BlockedBy = false, ServerTransitional
	}
}

// holdVolume blocks a's action while the volume is in a transitional
// status younger than the grace period, or multiattach and used by a
// server other than subject.
func (in Input) holdVolume(a *tcheck.Action, v *openstack.Volume, subject string) {
	if v == nil || !a.Safe {
		return
	}
	if slices.Contains(transitionalVolume, v.Status) && in.Now.Sub(v.Updated) < in.Policy.grace() {
		a.Safe, a.BlockedBy = false, VolumeTransitional
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
func serverFacts(s *openstack.Server) string {
	return fmt.Sprintf("openstack server show %s: name %q, project %s, status %s, vm_state %s, task_state %s",
		s.ID, s.Name, s.Project, s.Status, orNone(s.VMState), orNone(s.TaskState))
}

// volumeFacts is the evidence line about a volume.
func (in Input) volumeFacts(v *openstack.Volume) string {
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
