package observe

import (
	"context"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/attachments"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// Subject reads live, one object at a time, everything the checks decide
// from about one volume and one server: the server (absent when Nova
// answers 404) with its mappings at compute 2.89, the volume (absent on
// 404), every Cinder attachment of the volume, and each other server those
// attachments name with its mappings. Run on the result, a check decides
// about this server and volume exactly as on a full snapshot. Each 404 is
// recorded in Direct.Gone, and the attachment a mapping of the volume
// records is read by ID when the volume's list does not show it.
func Subject(ctx context.Context, c *Clients, serverID, volumeID string) (*snapshot.Snapshot, error) {
	s := &snapshot.Snapshot{}
	if err := addServer(ctx, c, s, serverID); err != nil {
		return nil, err
	}
	var v cinderVolume
	err := volumes.Get(ctx, c.BlockStorage, volumeID).ExtractInto(&v)
	switch {
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		s.Direct.MarkGone(volumeID)
	case err != nil:
		return nil, apiError("Cinder", "reading volume "+volumeID, c.BlockStorage.Microversion, err)
	default:
		s.Volumes = append(s.Volumes, v.model())
	}
	if s.Attachments, err = listAttachments(ctx, c.BlockStorage, attachments.ListOpts{AllTenants: true, VolumeID: volumeID}, 0); err != nil {
		return nil, err
	}
	for _, a := range s.Attachments {
		if err := addServer(ctx, c, s, a.Instance); err != nil {
			return nil, err
		}
	}
	readDirect(ctx, c, s, volumeID)
	return s, nil
}

// addServer reads the server live into s (once; into Direct.Gone when Nova
// answers 404) with its mappings.
func addServer(ctx context.Context, c *Clients, s *snapshot.Snapshot, id string) error {
	if id == "" || s.Direct.Gone[id] {
		return nil
	}
	for _, sv := range s.Servers {
		if sv.ID == id {
			return nil
		}
	}
	var got novaServer
	err := servers.Get(ctx, c.Compute, id).ExtractInto(&got)
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		s.Direct.MarkGone(id)
		return nil
	}
	if err != nil {
		return apiError("Nova", "reading server "+id, c.Compute.Microversion, err)
	}
	sv := got.model()
	if err := readMappings(ctx, c.Compute, &sv); err != nil {
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			s.Direct.MarkGone(id)
			return nil
		}
		return err
	}
	s.Servers = append(s.Servers, sv)
	return nil
}

// Attachment reads one Cinder attachment live; nil when Cinder answers 404.
func Attachment(ctx context.Context, c *Clients, id string) (*snapshot.Attachment, error) {
	a, err := attachments.Get(ctx, c.BlockStorage, id).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, apiError("Cinder", "reading attachment "+id, c.BlockStorage.Microversion, err)
	}
	at := attachmentModel(*a)
	return &at, nil
}

// readDirect reads by ID, once each, what the snapshot's records name and
// its lists did not show: the volume of each mapping of a server, the
// attachment a mapping records, and the volume and server of each live
// Cinder attachment. A list narrowed to a project (or to what the
// credentials may see) leaves out objects that exist, so only such a read
// can say that one is gone. The request count grows with these IDs, which
// are the candidates of findings, not with servers or volumes.
//
// A 404 marks the ID gone, any other failure (5xx, timeout, 403) marks it
// unread, and an answer adds the object to s.Direct; nothing here fails
// the observation. A non-empty volume narrows the reads to what concerns
// that volume (the live re-read of one subject).
func readDirect(ctx context.Context, c *Clients, s *snapshot.Snapshot, volume string) {
	ix := s.Index()
	asked := map[string]bool{}
	ask := func(id string, listed bool) bool {
		if id == "" || listed || asked[id] || s.Direct.Gone[id] {
			return false
		}
		if _, failed := s.Direct.Unread[id]; failed {
			return false
		}
		asked[id] = true
		return true
	}
	for _, sv := range s.Servers {
		if sv.VMState == "deleted" || sv.Status == "DELETED" {
			continue
		}
		for _, m := range sv.Volumes {
			if volume != "" && m.VolumeID != volume {
				continue
			}
			if _, ok := ix.Volumes[m.VolumeID]; ask(m.VolumeID, ok) {
				directVolume(ctx, c, s, m.VolumeID)
			}
			if _, ok := ix.Attachments[m.AttachmentID]; ask(m.AttachmentID, ok) {
				directAttachment(ctx, c, s, m.AttachmentID)
			}
		}
	}
	for _, a := range s.Attachments {
		if !live(a.Status) || volume != "" && a.VolumeID != volume {
			continue
		}
		if _, ok := ix.Volumes[a.VolumeID]; ask(a.VolumeID, ok) {
			directVolume(ctx, c, s, a.VolumeID)
		}
		if _, ok := ix.Servers[a.Instance]; ask(a.Instance, ok) {
			directServer(ctx, c, s, a.Instance)
		}
	}
}

// live are the attachment statuses that hold a volume (every one but
// detached and deleted).
func live(status string) bool { return status != "detached" && status != "deleted" }

// answered records the outcome of a read of id by ID in s.Direct and says
// whether the object was read.
func answered(s *snapshot.Snapshot, id string, err error) bool {
	switch {
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		s.Direct.MarkGone(id)
	case err != nil:
		s.Direct.MarkUnread(id, err)
	default:
		return true
	}
	return false
}

// directVolume is GET /volumes/{id}.
func directVolume(ctx context.Context, c *Clients, s *snapshot.Snapshot, id string) {
	var v cinderVolume
	if answered(s, id, volumes.Get(ctx, c.BlockStorage, id).ExtractInto(&v)) {
		s.Direct.Volumes = append(s.Direct.Volumes, v.model())
	}
}

// directServer is GET /servers/{id}, which lists the server's volumes as
// the server list does.
func directServer(ctx context.Context, c *Clients, s *snapshot.Snapshot, id string) {
	var n novaServer
	if answered(s, id, servers.Get(ctx, c.Compute, id).ExtractInto(&n)) {
		s.Direct.Servers = append(s.Direct.Servers, n.model())
	}
}

// directAttachment is GET /attachments/{id}.
func directAttachment(ctx context.Context, c *Clients, s *snapshot.Snapshot, id string) {
	a, err := attachments.Get(ctx, c.BlockStorage, id).Extract()
	if answered(s, id, err) {
		s.Direct.Attachments = append(s.Direct.Attachments, attachmentModel(*a))
	}
}

// attachmentModel is tether's record of a Cinder attachment.
func attachmentModel(a attachments.Attachment) snapshot.Attachment {
	return snapshot.Attachment{ID: a.ID, VolumeID: a.VolumeID, Instance: a.Instance, Status: a.Status, Connected: len(a.ConnectionInfo) > 0}
}
