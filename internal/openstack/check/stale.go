package check

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// FindStaleCinderAttachments finds Cinder attachments that hold a volume
// for a server Nova does not have (a read by ID answered 404), lists as
// deleted, or lists without the volume; a server only the lists leave out
// is no more than unconfirmed (Unconfirmed), and one that exists outside
// them is evidence, never acted on (OutsideScope). Nova creates its block device mapping before it asks Cinder for
// an attachment (reserve_block_device_name, then attachment_create) and
// deletes the Cinder attachment before the mapping on detach, so in steady
// state every live Cinder attachment has a mapping on its server; a
// transitional volume status or a server task marks the moments when it
// does not yet.
func FindStaleCinderAttachments(in Input) []drift.Finding {
	var out []drift.Finding
	for i := range in.Snapshot.Attachments {
		at := &in.Snapshot.Attachments[i]
		if !liveAttachment(at.Status) {
			continue
		}
		s := in.Index.Servers[at.Instance]
		if !serverGone(s) {
			if _, ok := s.Lists(at.VolumeID); ok {
				continue
			}
		}
		out = append(out, in.stale(at, s))
	}
	return out
}

// stale is the finding for a live attachment whose server s (nil when Nova
// does not list it) does not list its volume.
func (in Input) stale(at *snapshot.Attachment, s *snapshot.Server) drift.Finding {
	v := in.Index.Volumes[at.VolumeID]
	project := ""
	if v != nil {
		project = v.Project
	}
	f := drift.Finding{
		Check:     StaleCinderAttachment,
		Namespace: project,
		Object:    drift.ObjectRef{Kind: "Attachment", Name: at.ID, UID: types.UID(at.ID)},
		Volume:    at.VolumeID,
		Severity:  drift.SeverityWarning,
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	f.Evidence = append(f.Evidence, in.attachmentFacts(at.VolumeID))
	if v != nil {
		f.Evidence = append(f.Evidence, in.volumeFacts(v))
	} else {
		f.Evidence = append(f.Evidence, fmt.Sprintf("openstack volume show %s: not listed by Cinder", at.VolumeID))
	}
	switch {
	case s == nil && in.gone(at.Instance):
		f.Message = fmt.Sprintf("Cinder attachment %s holds volume %s for server %s, which Nova does not have", at.ID, at.VolumeID, at.Instance)
		f.Evidence = append(f.Evidence, fmt.Sprintf("openstack server show %s: No server found (GET /servers/%s answered 404)", at.Instance, at.Instance))
		f.Action = drift.Action{Type: DeleteCinderAttachment, Safe: true, Remedy: deleteRemedy(at)}
	case s == nil:
		f.Message = fmt.Sprintf("Cinder attachment %s holds volume %s for server %s, which Nova's server list did not show; whether it exists is unknown", at.ID, at.VolumeID, at.Instance)
		f.Evidence = append(f.Evidence, fmt.Sprintf("openstack server show %s: not in Nova's server list, and %s", at.Instance, in.unknown(at.Instance)))
		f.Action = drift.Action{Type: DeleteCinderAttachment, BlockedBy: Unconfirmed,
			Remedy: fmt.Sprintf("confirm with `openstack server show %s` and run tether again; it calls a server gone only when a read by ID answers 404", at.Instance)}
	case serverGone(s):
		f.Message = fmt.Sprintf("Cinder attachment %s holds volume %s for server %s, which Nova lists as deleted", at.ID, at.VolumeID, at.Instance)
		f.Evidence = append(f.Evidence, serverFacts(s))
		f.Action = drift.Action{Type: DeleteCinderAttachment, Safe: true, Remedy: deleteRemedy(at)}
	default:
		f.Message = fmt.Sprintf("Cinder attachment %s holds volume %s for server %s (%s), which does not list the volume", at.ID, at.VolumeID, s.ID, s.Name)
		f.Evidence = append(f.Evidence, serverFacts(s), serverVolumesFacts(s))
		f.Action = drift.Action{Type: ForceDetachVolume, Safe: true, Remedy: forceDetachRemedy(at)}
		in.holdOutside(&f.Action, "server", s.ID)
		holdServer(&f.Action, s, at.VolumeID)
	}
	in.holdVolume(&f.Action, v, at.Instance)
	return f
}

// serverVolumesFacts is the evidence line of the volumes Nova lists for s.
func serverVolumesFacts(s *snapshot.Server) string {
	line := fmt.Sprintf("openstack --os-compute-api-version 2.89 server volume list %s:", s.ID)
	if len(s.Volumes) == 0 {
		return line + " none"
	}
	for i, sv := range s.Volumes {
		if i > 0 {
			line += ","
		}
		line += " " + sv.VolumeID
		if sv.AttachmentID != "" {
			line += fmt.Sprintf(" (attachment %s, BDM %s)", sv.AttachmentID, sv.BDM)
		}
	}
	return line
}

func deleteRemedy(at *snapshot.Attachment) string {
	return fmt.Sprintf("confirm `openstack server show %s` fails with No server found, then `openstack --os-volume-api-version 3.27 volume attachment delete %s` (Cinder asks Nova first and refuses with 409 while Nova uses it)",
		at.Instance, at.ID)
}

func forceDetachRemedy(at *snapshot.Attachment) string {
	return fmt.Sprintf("confirm `openstack server volume list %s` does not list %s and the server has no task, then as admin: POST /v3/{project}/volumes/%s/action {\"os-force_detach\": {\"attachment_id\": %q}}; Cinder asks Nova first and refuses while Nova uses the attachment",
		at.Instance, at.VolumeID, at.VolumeID, at.ID)
}
