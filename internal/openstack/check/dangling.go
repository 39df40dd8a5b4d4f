package check

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// FindDanglingNovaAttachments finds block device mappings that Nova lists
// on a server (os-extended-volumes:volumes_attached, and with compute 2.89
// the attachment id it records) while Cinder holds no live attachment of
// that volume for that server: the volume is gone, the attachment is gone,
// or the attachment the mapping records belongs to another server. Gone is
// a 404 to a read by ID (snapshot.Direct): a volume or recorded attachment
// the lists only leave out holds the finding (Unconfirmed), and one that
// exists outside them is evidence, never repaired (OutsideScope).
func FindDanglingNovaAttachments(in Input) []drift.Finding {
	var out []drift.Finding
	for i := range in.Snapshot.Servers {
		s := &in.Snapshot.Servers[i]
		if serverGone(s) {
			continue
		}
		for _, sv := range s.Volumes {
			if f, ok := in.dangling(s, sv); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

// dangling is the finding for the mapping sv of server s, if it has no
// Cinder counterpart.
func (in Input) dangling(s *snapshot.Server, sv snapshot.ServerVolume) (drift.Finding, bool) {
	var recorded *snapshot.Attachment
	if sv.AttachmentID != "" {
		recorded = in.Index.Attachments[sv.AttachmentID]
	}
	elsewhere := recorded != nil && liveAttachment(recorded.Status) && recorded.Instance != s.ID
	if !elsewhere {
		for _, at := range in.Index.AttachmentsByVolume[sv.VolumeID] {
			if at.Instance == s.ID && liveAttachment(at.Status) {
				return drift.Finding{}, false
			}
		}
	}
	f := drift.Finding{
		Check:     DanglingNovaAttachment,
		Namespace: s.Project,
		Object:    drift.ObjectRef{Kind: "Server", Name: s.Name, UID: types.UID(s.ID)},
		Volume:    sv.VolumeID,
		Severity:  drift.SeverityWarning,
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	f.Evidence = append(f.Evidence, serverFacts(s), mappingFacts(s, sv))
	v := in.Index.Volumes[sv.VolumeID]
	others := in.liveOthers(sv.VolumeID, s.ID)
	switch {
	case v == nil && in.gone(sv.VolumeID):
		f.Message = fmt.Sprintf("server %s (%s) lists volume %s, which Cinder does not have", s.ID, s.Name, sv.VolumeID)
		f.Evidence = append(f.Evidence, fmt.Sprintf("openstack volume show %s: No volume found (GET /volumes/%s answered 404)", sv.VolumeID, sv.VolumeID))
		f.Action = drift.Action{Type: drift.None, BlockedBy: VolumeGone, Remedy: goneRemedy(s, sv)}
	case v == nil:
		f.Message = fmt.Sprintf("server %s (%s) lists volume %s, which Cinder's volume list did not show; whether it exists is unknown", s.ID, s.Name, sv.VolumeID)
		f.Evidence = append(f.Evidence, fmt.Sprintf("openstack volume show %s: not in Cinder's volume list, and %s", sv.VolumeID, in.unknown(sv.VolumeID)))
		f.Action = drift.Action{Type: drift.None, BlockedBy: Unconfirmed,
			Remedy: fmt.Sprintf("confirm with `openstack volume show %s` and run tether again; it calls a volume gone only when a read by ID answers 404", sv.VolumeID)}
	case elsewhere:
		f.Message = fmt.Sprintf("server %s (%s) records Cinder attachment %s for volume %s, which Cinder holds for server %s", s.ID, s.Name, recorded.ID, sv.VolumeID, recorded.Instance)
		f.Evidence = append(f.Evidence, in.volumeFacts(v), in.attachmentFacts(sv.VolumeID))
		f.Action = drift.Action{Type: drift.None, BlockedBy: AttachedElsewhere, Remedy: elsewhereRemedy(s, sv)}
	case len(others) > 0 && !v.Multiattach:
		f.Message = fmt.Sprintf("server %s (%s) lists volume %s, which Cinder holds attached to another server", s.ID, s.Name, sv.VolumeID)
		f.Evidence = append(f.Evidence, in.volumeFacts(v), in.attachmentFacts(sv.VolumeID))
		f.Action = drift.Action{Type: drift.None, BlockedBy: AttachedElsewhere, Remedy: elsewhereRemedy(s, sv)}
	default:
		f.Message = fmt.Sprintf("server %s (%s) lists volume %s, for which Cinder holds no attachment to it", s.ID, s.Name, sv.VolumeID)
		f.Evidence = append(f.Evidence, in.volumeFacts(v), in.attachmentFacts(sv.VolumeID))
		f.Action = drift.Action{Type: RecreateAttachmentAndDetach, Safe: true, Remedy: recreateRemedy(s, sv)}
		if sv.Device != "" && sv.Device == s.RootDevice {
			f.Action.Safe, f.Action.BlockedBy = false, RootVolume
			f.Action.Type = drift.None
			f.Action.Remedy = fmt.Sprintf("the mapping is the root disk (%s) of server %s, which Nova never detaches; rebuild or delete the server", sv.Device, s.ID)
		}
		in.holdUnconfirmedAttachment(&f, sv.AttachmentID, recorded)
		in.holdOutside(&f.Action, "volume", v.ID)
		holdServer(&f.Action, s, sv.VolumeID)
		in.holdVolume(&f.Action, v, s.ID)
		if f.Action.Safe && v.Status != "available" {
			f.Action.Safe, f.Action.BlockedBy = false, VolumeBusy
		}
	}
	if (f.Action.BlockedBy == ServerRunning || f.Action.BlockedBy == VolumeGone) && in.rebootRepairs(s, sv) {
		f.Action.Remedy = rebootRemedy(s, sv, in.Snapshot.NovaMaxMicroversion)
	}
	return f, true
}

// holdUnconfirmedAttachment holds f's repair while the attachment the
// mapping records (id) is missing and no read by ID answered 404 for it.
func (in Input) holdUnconfirmedAttachment(f *drift.Finding, id string, recorded *snapshot.Attachment) {
	if id == "" || recorded != nil {
		return
	}
	if in.gone(id) {
		f.Evidence = append(f.Evidence, fmt.Sprintf("openstack --os-volume-api-version 3.27 volume attachment show %s: not found (GET /attachments/%s answered 404)", id, id))
		return
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("Cinder attachment %s that the mapping records: not in Cinder's attachment list, and %s", id, in.unknown(id)))
	if f.Action.Safe {
		f.Action.Safe, f.Action.BlockedBy = false, Unconfirmed
	}
}

// liveOthers are the live Cinder attachments of the volume for servers
// other than subject.
func (in Input) liveOthers(volumeID, subject string) []*snapshot.Attachment {
	var out []*snapshot.Attachment
	for _, at := range in.Index.AttachmentsByVolume[volumeID] {
		if at.Instance != subject && liveAttachment(at.Status) {
			out = append(out, at)
		}
	}
	return out
}

// mappingFacts is the evidence line of Nova's mapping.
func mappingFacts(s *snapshot.Server, sv snapshot.ServerVolume) string {
	line := fmt.Sprintf("openstack --os-compute-api-version 2.89 server volume list %s: lists volume %s", s.ID, sv.VolumeID)
	if sv.AttachmentID != "" || sv.BDM != "" {
		line += fmt.Sprintf(" (attachment %s, BDM %s, device %s)", orNone(sv.AttachmentID), orNone(sv.BDM), orNone(sv.Device))
	}
	return line
}

func goneRemedy(s *snapshot.Server, sv snapshot.ServerVolume) string {
	return fmt.Sprintf("Nova's API cannot detach a volume Cinder does not know (DELETE os-volume_attachments answers 404). On Nova 2023.2 or later, rebooting the server (`openstack server reboot %s`) makes Nova delete mappings whose Cinder attachment is gone; on older releases, delete the server (`openstack server delete %s`) or remove the mapping in Nova's database. Confirm first with `openstack volume show %s`",
		s.ID, s.ID, sv.VolumeID)
}

func elsewhereRemedy(s *snapshot.Server, sv snapshot.ServerVolume) string {
	return fmt.Sprintf("do not detach through Nova: its detach deletes the Cinder attachment it records, which another server uses. Confirm with `openstack --os-volume-api-version 3.27 volume attachment list --volume-id %s`, stop server %s, and decide which server should hold the volume",
		sv.VolumeID, s.ID)
}

func recreateRemedy(s *snapshot.Server, sv snapshot.ServerVolume) string {
	return fmt.Sprintf("on Nova 2023.2 or later, rebooting the server (`openstack server reboot %s`) deletes the mapping; on any release, give the mapping a Cinder attachment again, then let Nova detach: `openstack --os-volume-api-version 3.54 volume attachment create --mode rw %s %s`, `openstack --os-volume-api-version 3.44 volume attachment complete ATTACHMENT`, `openstack server remove volume %s %s`, then delete the attachment Nova's detach leaves (`openstack --os-volume-api-version 3.27 volume attachment delete ATTACHMENT`)",
		s.ID, sv.VolumeID, s.ID, s.ID, sv.VolumeID)
}
