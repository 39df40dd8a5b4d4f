package check

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// FindLeftoverCinderAttachments finds a second Cinder attachment of a
// volume for a server that already has the volume through another one: the
// attachment is reserved or attaching, for the same server (instance_uuid)
// and volume as the attached attachment that Nova's mapping records
// (compute 2.89 attachment_id), and is not that one. It is what a retried
// attach leaves: Cinder lets a server reserve a volume again while it holds
// it (the same-instance override of a reserve, for migrations:
// cinder/volume/api.py:2398-2414), and nothing deletes the reservation
// later. Cinder counts it among the volume's attachments from then on (a
// re-image, for one, refuses a volume with more than one: api.py:2658-2661).
//
// Decision table (Cinder 21.3.1, Zed, the tested release):
//
//	attachment  connector  Nova's mapping records       server           -> action
//	reserved    none       another, attached, same pair idle             -> DeleteCinderAttachment, safe
//	reserved    none       another, attached, same pair task / resized   -> held ServerTaskState / ServerTransitional
//	attaching   given      another, attached, same pair any              -> held AttachmentConnected
//	reserved    none       this one                     any              -> no finding (it is Nova's)
//	reserved    none       another, not attached        any              -> no finding (Nova is still attaching)
//	any         any        none (no mapping)            any              -> no finding here (StaleCinderAttachment)
//
// Why the delete is safe: cinder/api/v3/attachments.py:271-283 (DELETE
// /attachments/{id}) calls cinder/volume/api.py:2618 attachment_delete;
// its guard, attachment_deletion_allowed, lets the operator delete an
// attachment without connection info (api.py:2587-2588) and asks Nova only for
// a connected one (api.py:2590-2616, 409 ConflictNovaUsingAttachment when
// Nova records it). A reserved attachment is deleted in the API alone
// (api.py:2629-2631: no call to the volume service, so no
// terminate_connection and no remove_export), then finish_detach
// (api.py:2642) sets the volume's status from the attachments left: the
// attached one keeps it in-use. An attaching one has had a connector
// (cinder/volume/manager.py:4921, attach status attaching) and its delete
// goes to the volume service, which terminates that connector's connection
// and may remove the export (manager.py:4994-5002): it is never safe here.
//
// Age: Cinder's attachment API has no created_at
// (cinder/api/v3/views/attachments.py:27-50), so the grace is the driver's
// seen-twice stage: a reservation is deleted only when it was seen twice,
// --grace apart. Nova's own second attachments (a live migration's, a
// resize's, a shelve offload's) come with a task_state, which holds.
func FindLeftoverCinderAttachments(in Input) []drift.Finding {
	var out []drift.Finding
	for i := range in.Snapshot.Attachments {
		at := &in.Snapshot.Attachments[i]
		if at.Status != "reserved" && at.Status != "attaching" {
			continue
		}
		s := in.Index.Servers[at.Instance]
		if serverGone(s) {
			continue
		}
		sv, ok := s.Lists(at.VolumeID)
		if !ok || sv.AttachmentID == "" || sv.AttachmentID == at.ID {
			continue
		}
		used := in.Index.Attachments[sv.AttachmentID]
		if used == nil || used.Status != "attached" || used.Instance != s.ID || used.VolumeID != at.VolumeID {
			continue
		}
		out = append(out, in.leftover(at, s, sv))
	}
	return out
}

// leftover is the finding for the reservation at beside the attachment
// that server s's mapping sv records.
func (in Input) leftover(at *snapshot.Attachment, s *snapshot.Server, sv snapshot.ServerVolume) drift.Finding {
	v := in.Index.Volumes[at.VolumeID]
	f := drift.Finding{
		Check:    LeftoverCinderAttachment,
		Object:   drift.ObjectRef{Kind: "Attachment", Name: at.ID, UID: types.UID(at.ID)},
		Volume:   at.VolumeID,
		Severity: drift.SeverityWarning,
	}
	if v != nil {
		f.Namespace = v.Project
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	f.Message = fmt.Sprintf("Cinder attachment %s (%s) holds volume %s for server %s (%s) beside attachment %s, which Nova's mapping records",
		at.ID, at.Status, at.VolumeID, s.ID, s.Name, sv.AttachmentID)
	f.Evidence = append(f.Evidence, in.attachmentFacts(at.VolumeID), mappingFacts(s, sv), serverFacts(s))
	if v != nil {
		f.Evidence = append(f.Evidence, in.volumeFacts(v))
	}
	f.Action = drift.Action{Type: DeleteCinderAttachment, Safe: true, Remedy: leftoverRemedy(at, s, sv)}
	if at.Status != "reserved" || at.Connected {
		f.Evidence = append(f.Evidence, fmt.Sprintf("Cinder attachment %s has a connector (status %s): deleting it terminates that connection on the backend", at.ID, at.Status))
		f.Action.Safe, f.Action.BlockedBy = false, AttachmentConnected
		f.Action.Remedy = connectedRemedy(at, s, sv)
	}
	in.holdOutside(&f.Action, "server", s.ID)
	holdServerBusy(&f.Action, s)
	in.holdVolumeTransitional(&f.Action, v)
	return f
}

func leftoverRemedy(at *snapshot.Attachment, s *snapshot.Server, sv snapshot.ServerVolume) string {
	return fmt.Sprintf("confirm `openstack --os-compute-api-version 2.89 server volume list %s` records attachment %s (not %s) and `openstack --os-volume-api-version 3.27 volume attachment show %s` is still reserved, then `openstack --os-volume-api-version 3.27 volume attachment delete %s`: a reserved attachment has no connection, so Cinder deletes it without touching the backend",
		s.ID, sv.AttachmentID, at.ID, at.ID, at.ID)
}

func connectedRemedy(at *snapshot.Attachment, s *snapshot.Server, sv snapshot.ServerVolume) string {
	return fmt.Sprintf("attachment %s has a connector: deleting it makes Cinder terminate that connection on the backend, which may be the one server %s uses through attachment %s. Find the connector's host (`openstack --os-volume-api-version 3.27 volume attachment show %s`); if it is not the server's host and nothing on that host uses the volume, delete it by hand (`openstack --os-volume-api-version 3.27 volume attachment delete %s`)",
		at.ID, s.ID, sv.AttachmentID, at.ID, at.ID)
}
