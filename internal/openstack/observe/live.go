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
// about this server and volume exactly as on a full snapshot.
func Subject(ctx context.Context, c *Clients, serverID, volumeID string) (*snapshot.Snapshot, error) {
	s := &snapshot.Snapshot{}
	if err := addServer(ctx, c, s, serverID); err != nil {
		return nil, err
	}
	var v cinderVolume
	err := volumes.Get(ctx, c.BlockStorage, volumeID).ExtractInto(&v)
	switch {
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
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
	return s, nil
}

// addServer reads the server live into s (once; nothing when Nova answers
// 404) with its mappings.
func addServer(ctx context.Context, c *Clients, s *snapshot.Snapshot, id string) error {
	if id == "" {
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
		return nil
	}
	if err != nil {
		return apiError("Nova", "reading server "+id, c.Compute.Microversion, err)
	}
	sv := got.model()
	if err := readMappings(ctx, c.Compute, &sv); err != nil {
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
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
	return &snapshot.Attachment{ID: a.ID, VolumeID: a.VolumeID, Instance: a.Instance, Status: a.Status}, nil
}
