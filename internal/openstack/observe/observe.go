// Package observe reads what tether's OpenStack checks decide from: Nova's
// servers with the volumes they list, Cinder's volumes and Cinder's
// attachment records, all projects, paginated. The number of requests
// grows with pages, not with servers: per-server requests are made only
// for the few servers whose records disagree with Cinder's (for the
// attachment and BDM ids Nova's server list does not show), and reads by
// ID only for the objects records name that the lists did not show. Only
// such a read's 404 makes an object gone (snapshot.Direct); a list alone
// never does.
//
// It only reads. The live reads act makes before a write (Subject) go
// through the same code, so the check re-run there sees what an audit sees.
package observe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/attachments"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// Options narrow what is read.
type Options struct {
	// Project narrows the lists to one project; empty reads all projects
	// (admin: all_tenants).
	Project string
	// PageSize is the limit of each list request; 0 leaves it to the
	// servers (osapi_max_limit, 1000 by default).
	PageSize int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Observe reads a snapshot: servers (detail), volumes (detail) and Cinder
// attachments, each list paginated, then os-volume_attachments of the
// servers that list a volume Cinder holds for them not exactly once (none,
// or a second attachment beside the one Nova records), then by ID what the
// records name and the lists did not show (readDirect).
func Observe(ctx context.Context, c *Clients, o Options) (*snapshot.Snapshot, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	s := &snapshot.Snapshot{Taken: now()}
	var err error
	if s.Servers, err = listServers(ctx, c.Compute, o); err != nil {
		return nil, err
	}
	s.NovaMaxMicroversion = NovaMaxMicroversion(ctx, c.Compute)
	if s.Volumes, err = listVolumes(ctx, c.BlockStorage, o); err != nil {
		return nil, err
	}
	if s.Attachments, err = listAttachments(ctx, c.BlockStorage, attachments.ListOpts{AllTenants: true, ProjectID: o.Project}, o.PageSize); err != nil {
		return nil, err
	}
	held := map[[2]string]int{}
	for _, a := range s.Attachments {
		if live(a.Status) {
			held[[2]string{a.Instance, a.VolumeID}]++
		}
	}
	for i := range s.Servers {
		sv := &s.Servers[i]
		for _, m := range sv.Volumes {
			if held[[2]string{sv.ID, m.VolumeID}] != 1 {
				if err := readMappings(ctx, c.Compute, sv); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
					return nil, err
				}
				break
			}
		}
	}
	readDirect(ctx, c, s, "")
	return s, nil
}

// novaServer is the part of a server (GET /servers/detail) tether reads.
type novaServer struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	TenantID  string `json:"tenant_id"`
	Status    string `json:"status"`
	TaskState string `json:"OS-EXT-STS:task_state"`
	VMState   string `json:"OS-EXT-STS:vm_state"`
	Root      string `json:"OS-EXT-SRV-ATTR:root_device_name"`
	Volumes   []struct {
		ID string `json:"id"`
	} `json:"os-extended-volumes:volumes_attached"`
}

func (n novaServer) model() snapshot.Server {
	s := snapshot.Server{ID: n.ID, Name: n.Name, Project: n.TenantID, Status: n.Status, TaskState: n.TaskState, VMState: n.VMState, RootDevice: n.Root}
	for _, v := range n.Volumes {
		s.Volumes = append(s.Volumes, snapshot.ServerVolume{VolumeID: v.ID})
	}
	return s
}

func listServers(ctx context.Context, c *gophercloud.ServiceClient, o Options) ([]snapshot.Server, error) {
	out, err := collect(ctx, servers.List(c, servers.ListOpts{AllTenants: true, TenantID: o.Project, Limit: o.PageSize}), "servers", novaServer.model)
	if err != nil {
		return nil, apiError("Nova", "listing servers (GET /servers/detail?all_tenants=1)", c.Microversion, err)
	}
	return out, nil
}

// collect reads every page of a list into models, each page's items
// extracted from key into tether's own struct R.
func collect[R, M any](ctx context.Context, pager pagination.Pager, key string, model func(R) M) ([]M, error) {
	var out []M
	err := pager.EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		pr, ok := p.(interface{ ExtractIntoSlicePtr(any, string) error })
		if !ok {
			return false, fmt.Errorf("unexpected page type %T", p)
		}
		var page []R
		if err := pr.ExtractIntoSlicePtr(&page, key); err != nil {
			return false, err
		}
		for _, r := range page {
			out = append(out, model(r))
		}
		return true, nil
	})
	return out, err
}

// cinderVolume is the part of a volume (GET /volumes/detail) tether reads.
type cinderVolume struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Status      string `json:"status"`
	Multiattach bool   `json:"multiattach"`
	TenantID    string `json:"os-vol-tenant-attr:tenant_id"`
	Updated     string `json:"updated_at"`
	Created     string `json:"created_at"`
}

func (v cinderVolume) model() snapshot.Volume {
	updated := parseTime(v.Updated)
	if updated.IsZero() {
		updated = parseTime(v.Created)
	}
	return snapshot.Volume{ID: v.ID, Name: v.Name, Project: v.TenantID, Status: v.Status, Multiattach: v.Multiattach, Updated: updated}
}

// parseTime reads Cinder's time stamps, which carry no zone and mean UTC
// ("2026-05-01T12:00:00.000000"); unreadable ones are zero.
func parseTime(s string) time.Time {
	for _, layout := range []string{"2006-01-02T15:04:05.999999", time.RFC3339Nano, "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

func listVolumes(ctx context.Context, c *gophercloud.ServiceClient, o Options) ([]snapshot.Volume, error) {
	out, err := collect(ctx, volumes.List(c, volumes.ListOpts{AllTenants: true, TenantID: o.Project, Limit: o.PageSize}), "volumes", cinderVolume.model)
	if err != nil {
		return nil, apiError("Cinder", "listing volumes (GET /volumes/detail?all_tenants=1)", c.Microversion, err)
	}
	return out, nil
}

// listAttachments pages through GET /attachments by marker. Cinder's
// attachment list returns at most osapi_max_limit records and no next
// link (cinder/api/v3/views/attachments.py builds only "attachments"), so
// a client that follows links stops after the first page; this one asks
// again after the last id until a page comes back empty or shorter than
// an earlier page. Cinder cuts every page at the same limit (the page
// size asked for or its own, whichever is smaller), so a page shorter
// than one before it is the last: at 2,003 attachments and Cinder's 1,000
// that is 3 requests, not 4. (A page size larger than Cinder's limit is
// not a bound a short page can be compared with; an earlier page is.)
func listAttachments(ctx context.Context, c *gophercloud.ServiceClient, opts attachments.ListOpts, pageSize int) ([]snapshot.Attachment, error) {
	var out []snapshot.Attachment
	seen := map[string]bool{}
	opts.Limit = pageSize
	longest := 0 // the longest page so far: Cinder's limit, or less
	for {
		p, err := attachments.List(c, opts).AllPages(ctx)
		if err != nil {
			return nil, apiError("Cinder", "listing attachments (GET /attachments?all_tenants=1)", c.Microversion, err)
		}
		page, err := attachments.ExtractAttachments(p)
		if err != nil {
			return nil, err
		}
		fresh := 0
		for _, a := range page {
			if seen[a.ID] {
				continue
			}
			seen[a.ID] = true
			fresh++
			out = append(out, attachmentModel(a))
		}
		if fresh == 0 || len(page) < longest {
			return out, nil
		}
		longest = len(page)
		opts.Marker = page[len(page)-1].ID
	}
}

// novaMapping is one entry of GET /servers/{id}/os-volume_attachments at
// compute 2.89 (gophercloud's VolumeAttachment lacks attachment_id and
// bdm_uuid).
type novaMapping struct {
	VolumeID     string `json:"volumeId"`
	Device       string `json:"device"`
	AttachmentID string `json:"attachment_id"`
	BDM          string `json:"bdm_uuid"`
}

// readMappings replaces the volumes of s with Nova's mappings, which carry
// the attachment id and BDM uuid.
func readMappings(ctx context.Context, c *gophercloud.ServiceClient, s *snapshot.Server) error {
	p, err := volumeattach.List(c, s.ID).AllPages(ctx)
	if err != nil {
		return apiError("Nova", "listing the volumes of server "+s.ID+" (GET /servers/"+s.ID+"/os-volume_attachments)", c.Microversion, err)
	}
	var ms []novaMapping
	if err := p.(volumeattach.VolumeAttachmentPage).ExtractIntoSlicePtr(&ms, "volumeAttachments"); err != nil {
		return err
	}
	s.Volumes = s.Volumes[:0]
	for _, m := range ms {
		s.Volumes = append(s.Volumes, snapshot.ServerVolume{VolumeID: m.VolumeID, AttachmentID: m.AttachmentID, BDM: m.BDM, Device: m.Device})
	}
	return nil
}

// apiError names the service, the request and what to do about the common
// answers.
func apiError(service, what, microversion string, err error) error {
	var code gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &code) {
		body := strings.TrimSpace(string(code.Body))
		if len(body) > 300 {
			body = body[:300] + "..."
		}
		switch code.Actual {
		case http.StatusNotAcceptable:
			return fmt.Errorf("%s: %s does not support microversion %s (tether needs compute %s, Nova Xena or later, and block-storage %s, Cinder Ocata or later): %s",
				what, service, microversion, ComputeMicroversion, BlockStorageMicroversion, body)
		case http.StatusUnauthorized:
			return fmt.Errorf("%s: %s answered 401 Unauthorized: check the credentials of the cloud in clouds.yaml: %s", what, service, body)
		case http.StatusForbidden:
			return fmt.Errorf("%s: %s answered 403 Forbidden: listing all projects needs the admin role (or pass --project with a project you may read): %s", what, service, body)
		}
		return fmt.Errorf("%s: %s answered %d: %s", what, service, code.Actual, body)
	}
	return fmt.Errorf("%s: %v", what, err)
}

// NovaMaxMicroversion reads the maximum microversion from Nova's version
// document (GET /v2.1/, "version": {"version": "2.100"}); empty when the
// read fails or names none. A remedy that depends on it falls back to the
// one that holds on every release, so a failed read costs no finding.
func NovaMaxMicroversion(ctx context.Context, c *gophercloud.ServiceClient) string {
	var doc struct {
		Version struct {
			Version string `json:"version"`
		} `json:"version"`
	}
	_, err := c.Get(ctx, c.Endpoint, &doc, &gophercloud.RequestOpts{
		OkCodes:     []int{http.StatusOK},
		OmitHeaders: []string{"OpenStack-API-Version", "X-OpenStack-Nova-API-Version"},
	})
	if err != nil {
		return ""
	}
	return doc.Version.Version
}
