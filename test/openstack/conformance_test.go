// Package openstack_test checks, on real Nova and Cinder, every behaviour of
// theirs that tether's OpenStack checks and repairs rely on. Each test cites
// where Nova or Cinder documents or implements the behaviour (file:line in
// Nova 26 / Cinder 21 "Zed", Debian bookworm), so a failure here after an
// upgrade says which assumption broke. The tests run on both release lines
// of the test world (TETHER_OPENSTACK_RELEASE: Zed, and 2025.1 from Debian
// trixie); a behaviour that differs between them is asserted per line
// (w.Line).
package openstack_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/attachments"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"

	"github.com/tether-dev/tether/internal/openstack/check"
	"github.com/tether-dev/tether/internal/openstack/observe"
	"github.com/tether-dev/tether/internal/testing/openstack"
)

func TestMain(m *testing.M) { openstack.Main(m) }

var bg = context.Background()

// call makes one request and returns the HTTP status and, for an error
// status, the body.
func call(t *testing.T, c *gophercloud.ServiceClient, method, url string, body any, headers map[string]string) (int, string) {
	t.Helper()
	resp, err := c.Request(bg, method, url, &gophercloud.RequestOpts{
		JSONBody: body, MoreHeaders: headers, KeepResponseBody: false,
		OkCodes: []int{http.StatusOK, http.StatusAccepted, http.StatusNoContent},
	})
	if err == nil {
		return resp.StatusCode, ""
	}
	var unexpected gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &unexpected) {
		return unexpected.Actual, string(unexpected.Body)
	}
	t.Fatalf("%s %s: %v", method, url, err)
	return 0, ""
}

func novaHas(as []openstack.NovaAttachment, volume string) (openstack.NovaAttachment, bool) {
	for _, a := range as {
		if a.VolumeID == volume {
			return a, true
		}
	}
	return openstack.NovaAttachment{}, false
}

func TestRelease(t *testing.T) {
	w := openstack.Start(t)
	t.Logf("OpenStack release under test: %s (world started in %s)", w.Release, w.StartTime.Round(100*time.Millisecond))
}

// An attachment made through Nova shows on both sides with the same
// attachment ID.
func TestAttachShowsOnBothSides(t *testing.T) {
	w := openstack.Start(t)
	server, volume := w.Server(t, "both-sides"), w.Volume(t, "both-sides")
	w.Attach(t, server, volume)

	// Nova: from 2.89 a volume attachment carries attachment_id (the Cinder
	// attachment) and bdm_uuid (nova/api/openstack/compute/volumes.py:248-266,
	// :315; API reference "List volume attachments for an instance").
	na, ok := novaHas(w.NovaAttachments(t, server), volume)
	if !ok || na.AttachmentID == "" || na.BDMUUID == "" || na.ServerID != server {
		t.Fatalf("Nova at 2.89 lists %+v for volume %s, want it with server %s, attachment_id and bdm_uuid", na, volume, server)
	}
	// Below 2.89 Nova leaves both out (volumes.py:248), so tether must ask for 2.89.
	older := w.ComputeClient(t)
	older.Microversion = "2.88"
	var raw []map[string]any
	pages, err := volumeattach.List(older, server).AllPages(bg)
	if err != nil {
		t.Fatal(err)
	}
	if err := pages.(volumeattach.VolumeAttachmentPage).ExtractIntoSlicePtr(&raw, "volumeAttachments"); err != nil {
		t.Fatal(err)
	}
	for _, a := range raw {
		if _, has := a["attachment_id"]; has {
			t.Errorf("Nova at 2.88 shows attachment_id %v; the API reference says it starts at 2.89", a["attachment_id"])
		}
	}

	// Cinder's volume: in-use, its attachments name the server and the
	// attachment (cinder/api/v2/views/volumes.py:116-135: only attach_status
	// "attached" records are listed).
	v := w.GetVolume(t, volume)
	if v.Status != "in-use" || len(v.Attachments) != 1 || v.Attachments[0].ServerID != server || v.Attachments[0].AttachmentID != na.AttachmentID {
		t.Errorf("Cinder volume %s: status %s, attachments %+v; want in-use by %s through %s", volume, v.Status, v.Attachments, server, na.AttachmentID)
	}
	// Cinder's attachment records (GET /attachments, 3.27: cinder/api/microversions.py:94,
	// cinder/api/v3/attachments.py:82): status attached, instance = the server.
	as := w.CinderAttachments(t, volume)
	if len(as) != 1 || as[0].ID != na.AttachmentID || as[0].Instance != server || as[0].Status != "attached" {
		t.Errorf("Cinder /attachments for volume %s = %+v; want one, %s, attached to %s", volume, as, na.AttachmentID, server)
	}
}

// In a volume's own attachments list, "id" is the volume's ID and
// "attachment_id" the attachment's (cinder/api/v2/views/volumes.py
// _get_attachments, the same on both lines): a client that took "id" for
// the attachment would act on the wrong object. tether reads attachments
// from GET /attachments, whose "id" is the attachment, and only counts a
// volume's list (doctor).
func TestVolumeAttachmentsNameTheAttachmentInAttachmentID(t *testing.T) {
	w := openstack.Start(t)
	server, volume := w.Server(t, "attachment-id"), w.Volume(t, "attachment-id")
	attachment := w.Attach(t, server, volume)
	bs := w.BlockStorageClient(t)
	var raw struct {
		Volume struct {
			Attachments []map[string]any `json:"attachments"`
		} `json:"volume"`
	}
	resp, err := bs.Get(bg, bs.ServiceURL("volumes", volume), &raw, nil)
	if err != nil {
		t.Fatalf("GET /volumes/%s: %v", volume, err)
	}
	resp.Body.Close()
	as := raw.Volume.Attachments
	if len(as) != 1 || as[0]["attachment_id"] != attachment || as[0]["id"] != volume || as[0]["server_id"] != server {
		t.Errorf("volume %s's attachments on the %s line: %v; want one with attachment_id %s, id %s (the volume) and server_id %s",
			volume, w.Line, as, attachment, volume, server)
	}
}

// Cinder refuses to let anyone but Nova delete an attachment that Nova still
// records (CVE-2023-2088, bug 2004555; Debian backported the fix to 21.3.1):
// cinder/volume/api.py:2543-2616 attachment_deletion_allowed asks Nova for the
// server's volume attachment and raises ConflictNovaUsingAttachment, HTTP 409
// (cinder/exception.py:1097-1100), unless the request is a service's
// (api.py:901-911: a service token with the service role).
func TestCinderGuardsAttachmentsNovaUses(t *testing.T) {
	w := openstack.Start(t)
	server, volume := w.Server(t, "guarded"), w.Volume(t, "guarded")
	attachment := w.Attach(t, server, volume)
	c := w.BlockStorageClient(t)

	code, body := call(t, c, http.MethodDelete, c.ServiceURL("attachments", attachment), nil, nil)
	if code != http.StatusConflict || !strings.Contains(body, "using the Compute API") {
		t.Fatalf("a plain DELETE of attachment %s that Nova uses answered %d %s; want 409 ConflictNovaUsingAttachment", attachment, code, body)
	}
	if v := w.GetVolume(t, volume); v.Status != "in-use" || len(v.Attachments) != 1 {
		t.Fatalf("after the refused delete volume %s is %s with %d attachments; want it untouched (in-use, 1)", volume, v.Status, len(v.Attachments))
	}

	// os-force_detach goes through the same guard (admin_actions.py:214-231
	// calls terminate_connection, api.py:920, and detach, api.py:866).
	code, body = call(t, c, http.MethodPost, c.ServiceURL("volumes", volume, "action"),
		map[string]any{"os-force_detach": map[string]any{"attachment_id": attachment}}, nil)
	if code != http.StatusConflict {
		t.Fatalf("os-force_detach of attachment %s that Nova uses answered %d %s; want 409", attachment, code, body)
	}

	// With Nova's service token the same DELETE succeeds (api.py:2561), and
	// leaves what a half-failed detach leaves: Nova keeps its BDM, Cinder has
	// no attachment and the volume is available.
	code, body = call(t, c, http.MethodDelete, c.ServiceURL("attachments", attachment), nil,
		map[string]string{openstack.ServiceTokenHeader: "nova:service"})
	if code != http.StatusOK {
		t.Fatalf("DELETE of attachment %s with a service token answered %d %s; want 200", attachment, code, body)
	}
	w.WaitVolume(t, volume, "available")
	if _, ok := novaHas(w.NovaAttachments(t, server), volume); !ok {
		t.Errorf("Nova dropped its BDM of volume %s when Cinder's attachment was deleted; it should keep it", volume)
	}
}

// A dangling BDM cannot be detached through Nova in this release: Nova's
// detach first asks Cinder to begin detaching, which needs the volume
// in-use (cinder/volume/api.py:793-811), and Nova turns the InvalidVolume into
// 400 (nova/api/openstack/compute/volumes.py:564-567, compute/api.py:5202-5205).
// Deleting the server does clear it (manager.py:3057 deletes each BDM's
// attachment; a missing one is ignored), leaving the volume available.
func TestDanglingBDMNovaDetachRefusedServerDeleteClears(t *testing.T) {
	w := openstack.Start(t)
	server, volume := w.Server(t, "dangling"), w.Volume(t, "dangling")
	w.DanglingBDM(t, server, volume)
	c := w.ComputeClient(t)

	code, body := call(t, c, http.MethodDelete, c.ServiceURL("servers", server, "os-volume_attachments", volume), nil, nil)
	if code != http.StatusBadRequest || !strings.Contains(body, "in-use") {
		t.Fatalf("Nova detach of dangling volume %s answered %d %s; want 400 (volume status must be in-use)", volume, code, body)
	}
	if _, ok := novaHas(w.NovaAttachments(t, server), volume); !ok {
		t.Fatalf("after the refused detach Nova no longer lists volume %s", volume)
	}
	s, err := servers.Get(bg, c, server).Extract()
	if err != nil || s.Status != "ACTIVE" {
		t.Fatalf("server %s after the refused detach: %v %v; want ACTIVE", server, s, err)
	}

	w.DeleteServer(t, server)
	if v := w.GetVolume(t, volume); v.Status != "available" || len(v.Attachments) != 0 {
		t.Errorf("volume %s after deleting server %s: %s with %d attachments; want available with none", volume, server, v.Status, len(v.Attachments))
	}
}

// A hard reboot deletes a mapping whose Cinder attachment is gone from Nova
// 28.0.0 (2023.2) on: nova/compute/manager.py _reboot_instance calls
// _delete_dangling_bdms, which reads each mapping's recorded attachment and
// destroys the mapping on a 404. Zed has no such step and keeps it. The
// maximum microversion in Nova's version document, as tether reads it, tells
// the two apart (check.NovaRebootCleansDangling), and tether's remedy for a
// running server relies on both.
func TestHardRebootDeletesDanglingMapping(t *testing.T) {
	w := openstack.Start(t)
	server, volume := w.Server(t, "reboot"), w.Volume(t, "reboot")
	w.DanglingBDM(t, server, volume)

	max := observe.NovaMaxMicroversion(bg, w.ComputeClient(t))
	cleans := check.NovaRebootCleansDangling(max)
	if want := map[string]string{openstack.LineZed: "2.93", openstack.Line2025_1: "2.100"}[w.Line]; max != want {
		t.Errorf("Nova's maximum microversion on the %s line: %q, want %q", w.Line, max, want)
	}
	if want := w.Line != openstack.LineZed; cleans != want {
		t.Errorf("NovaRebootCleansDangling(%q) = %v on the %s line, want %v", max, cleans, w.Line, want)
	}

	w.HardReboot(t, server)
	_, lists := novaHas(w.NovaAttachments(t, server), volume)
	switch {
	case cleans && lists:
		t.Errorf("after a hard reboot Nova %s (%s) still lists dangling volume %s on server %s; nova log:\n%s", max, w.Release, volume, server, w.LogTail("nova", 20))
	case !cleans && !lists:
		t.Errorf("after a hard reboot Nova %s (%s) no longer lists dangling volume %s on server %s; this release was not known to clean up", max, w.Release, volume, server)
	}
	if v := w.GetVolume(t, volume); v.Status != "available" || len(v.Attachments) != 0 {
		t.Errorf("volume %s after the reboot: %s with %d attachments; want it untouched (available, none)", volume, v.Status, len(v.Attachments))
	}
}

// A dangling BDM can be detached through Nova once Cinder holds an attachment
// for the pair again: POST /attachments (3.54, mode) and os-complete (3.44)
// make the volume in-use for the server, and Nova's detach then removes its
// BDM (compute/api.py:5202-5213 finds the attachment by server in the volume's
// attachments; Nova deletes its own BDM's attachment, missing or not).
func TestDanglingBDMRecreateThenNovaDetach(t *testing.T) {
	w := openstack.Start(t)
	server, volume := w.Server(t, "recreate"), w.Volume(t, "recreate")
	w.DanglingBDM(t, server, volume)
	bs := w.BlockStorageClient(t)

	a, err := attachments.Create(bg, bs, attachments.CreateOpts{
		VolumeUUID: volume, InstanceUUID: server, Mode: "rw",
		Connector: map[string]any{"host": "tether-repair", "initiator": "iqn.2026-01.dev.tether:repair", "ip": "127.0.0.1"},
	}).Extract()
	if err != nil {
		t.Fatalf("POST /attachments for server %s, volume %s: %v", server, volume, err)
	}
	if err := attachments.Complete(bg, bs, a.ID).ExtractErr(); err != nil {
		t.Fatalf("os-complete of attachment %s: %v", a.ID, err)
	}
	w.WaitVolume(t, volume, "in-use")

	c := w.ComputeClient(t)
	code, body := call(t, c, http.MethodDelete, c.ServiceURL("servers", server, "os-volume_attachments", volume), nil, nil)
	if code != http.StatusAccepted {
		t.Fatalf("Nova detach after re-creating the attachment answered %d %s; want 202", code, body)
	}
	waitNovaDrops(t, w, server, volume)
	// Whatever Cinder still holds for the pair is no longer Nova's: a plain
	// delete is allowed (api.py:2597-2600, Nova answers 404).
	for _, left := range w.CinderAttachments(t, volume) {
		if code, body := call(t, bs, http.MethodDelete, bs.ServiceURL("attachments", left.ID), nil, nil); code != http.StatusOK {
			t.Errorf("plain DELETE of attachment %s left after Nova's detach answered %d %s; want 200", left.ID, code, body)
		}
	}
	w.WaitVolume(t, volume, "available")
	if s, err := servers.Get(bg, c, server).Extract(); err != nil || s.Status != "ACTIVE" {
		t.Errorf("server %s after the repair: %v %v; want ACTIVE", server, s, err)
	}
}

func waitNovaDrops(t *testing.T, w *openstack.World, server, volume string) {
	t.Helper()
	for i := 0; i < 240; i++ {
		if _, ok := novaHas(w.NovaAttachments(t, server), volume); !ok {
			return
		}
		sleep()
	}
	t.Fatalf("Nova still lists volume %s on server %s after its detach; nova log:\n%s", volume, server, w.LogTail("nova", 20))
}

// An attachment for a server Nova does not know may be deleted by anyone:
// Nova answers 404 and Cinder deletes it "locally" (api.py:2597-2602).
func TestAttachmentForUnknownServerPlainDelete(t *testing.T) {
	w := openstack.Start(t)
	volume := w.Volume(t, "unknown-server")
	attachment, ghost := w.StaleAttachment(t, volume)
	bs := w.BlockStorageClient(t)

	if err := servers.Get(bg, w.ComputeClient(t), ghost).Err; !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Fatalf("Nova GET server %s: %v; want 404", ghost, err)
	}
	code, body := call(t, bs, http.MethodDelete, bs.ServiceURL("attachments", attachment), nil, nil)
	if code != http.StatusOK {
		t.Fatalf("plain DELETE of attachment %s of unknown server %s answered %d %s; want 200", attachment, ghost, code, body)
	}
	w.WaitVolume(t, volume, "available")
	if n := len(w.CinderAttachments(t, volume)); n != 0 {
		t.Errorf("Cinder still has %d attachments of volume %s", n, volume)
	}
}

// Where Nova forgot its BDM, os-force_detach with the attachment ID passes
// Cinder's guard (Nova's get_server_volume answers 404, api.py:2597) and
// detaches: 202 (admin_actions.py:214-231) and the volume is available.
func TestForgottenBDMForceDetach(t *testing.T) {
	w := openstack.Start(t)
	server, volume := w.Server(t, "forgotten"), w.Volume(t, "forgotten")
	attachment := w.Attach(t, server, volume)
	w.ForgetBDM(t, server, volume)
	bs := w.BlockStorageClient(t)

	code, body := call(t, bs, http.MethodPost, bs.ServiceURL("volumes", volume, "action"),
		map[string]any{"os-force_detach": map[string]any{"attachment_id": attachment}}, nil)
	if code != http.StatusAccepted {
		t.Fatalf("os-force_detach of attachment %s Nova forgot answered %d %s; want 202", attachment, code, body)
	}
	w.WaitVolume(t, volume, "available")
	if v := w.GetVolume(t, volume); len(v.Attachments) != 0 {
		t.Errorf("volume %s still lists attachments %+v", volume, v.Attachments)
	}
	if s, err := servers.Get(bg, w.ComputeClient(t), server).Extract(); err != nil || s.Status != "ACTIVE" {
		t.Errorf("server %s after the force-detach: %v %v; want ACTIVE", server, s, err)
	}
}

// Deleting a server with volumes attached detaches them: Nova deletes each
// BDM's Cinder attachment (nova/compute/manager.py:3053-3058) and the volumes
// become available.
func TestServerDeleteReleasesVolumes(t *testing.T) {
	w := openstack.Start(t)
	server := w.Server(t, "deleted")
	v1, v2 := w.Volume(t, "deleted-1"), w.Volume(t, "deleted-2")
	w.Attach(t, server, v1)
	w.Attach(t, server, v2)
	w.DeleteServer(t, server)
	for _, v := range []string{v1, v2} {
		w.WaitVolume(t, v, "available")
		if n := len(w.CinderAttachments(t, v)); n != 0 {
			t.Errorf("Cinder keeps %d attachments of volume %s after its server was deleted", n, v)
		}
	}
}

// A second, reserved attachment of a volume for the server that holds it
// (LeftoverCinderAttachment relies on each step):
//   - Cinder reserves a non-multiattach volume that is in-use again for the
//     same server (cinder/volume/api.py:2398-2414, the same-instance
//     override for migrations): a new attachment, reserved, with no
//     connection info, and the volume stays in-use;
//   - its attachment records carry no creation time (cinder/api/v3/views/
//     attachments.py:27-50), so the age of a reservation is what tether's
//     seen-twice stage measures;
//   - the operator's DELETE of the attachment Nova uses answers 409 (the
//     guard asks Nova, api.py:2590-2616), and changes nothing;
//   - the operator's DELETE of the reservation answers 200: an attachment
//     without connection info passes the guard without asking Nova
//     (api.py:2587-2588) and a reserved one is deleted in the API alone
//     (api.py:2629-2631); the volume's status is set from the attachment
//     left (api.py:2642), in-use, and Nova keeps its mapping.
func TestReservationBesideNovasAttachment(t *testing.T) {
	w := openstack.Start(t)
	server, volume := w.Server(t, "reserved-twice"), w.Volume(t, "reserved-twice")
	used := w.Attach(t, server, volume)
	left := w.Reserve(t, server, volume)
	bs := w.BlockStorageClient(t)

	var raw struct {
		Attachment map[string]any `json:"attachment"`
	}
	resp, err := bs.Get(bg, bs.ServiceURL("attachments", left), &raw, nil)
	if err != nil {
		t.Fatalf("GET /attachments/%s: %v", left, err)
	}
	resp.Body.Close()
	a := raw.Attachment
	if a["status"] != "reserved" || a["instance"] != server || a["volume_id"] != volume {
		t.Fatalf("the second reservation: %v; want reserved for server %s and volume %s", a, server, volume)
	}
	if ci, _ := a["connection_info"].(map[string]any); len(ci) != 0 {
		t.Errorf("the reservation has connection info %v; want none (no connector was given)", ci)
	}
	if _, has := a["created_at"]; has {
		t.Errorf("Cinder's attachment shows created_at %v; tether measures a reservation's age by seeing it twice, and could use it", a["created_at"])
	}
	if v := w.GetVolume(t, volume); v.Status != "in-use" {
		t.Errorf("volume %s after the second reservation: %s; want in-use", volume, v.Status)
	}

	code, body := call(t, bs, http.MethodDelete, bs.ServiceURL("attachments", used), nil, nil)
	if code != http.StatusConflict || !strings.Contains(body, "using the Compute API") {
		t.Fatalf("a plain DELETE of attachment %s that Nova uses answered %d %s; want 409 ConflictNovaUsingAttachment", used, code, body)
	}
	code, body = call(t, bs, http.MethodDelete, bs.ServiceURL("attachments", left), nil, nil)
	if code != http.StatusOK {
		t.Fatalf("a plain DELETE of the reservation %s answered %d %s; want 200", left, code, body)
	}
	as := w.CinderAttachments(t, volume)
	if len(as) != 1 || as[0].ID != used || as[0].Status != "attached" {
		t.Fatalf("Cinder lists %+v after deleting the reservation; want only %s, attached", as, used)
	}
	w.WaitVolume(t, volume, "in-use")
	if na, ok := novaHas(w.NovaAttachments(t, server), volume); !ok || na.AttachmentID != used {
		t.Errorf("Nova lists %+v for volume %s; want its mapping with attachment %s", na, volume, used)
	}
}

// Nova shows a server's vm_state and task_state to admins
// (nova/api/openstack/compute/views/servers.py:348-357); tether holds servers
// with a task. An idle server has vm_state active and task_state null.
func TestServerStateFields(t *testing.T) {
	w := openstack.Start(t)
	server := w.Server(t, "states")
	var s struct {
		TaskState json.RawMessage `json:"OS-EXT-STS:task_state"`
		VMState   string          `json:"OS-EXT-STS:vm_state"`
	}
	if err := servers.Get(bg, w.ComputeClient(t), server).ExtractInto(&s); err != nil {
		t.Fatal(err)
	}
	if string(s.TaskState) != "null" || s.VMState != "active" {
		t.Errorf("server %s: task_state %q, vm_state %q; want null (present) and active", server, s.TaskState, s.VMState)
	}
}

// Listing across projects and pages: Nova's servers and Cinder's volumes
// follow their next links (servers_links, volumes_links), so a client sees
// every object a page at a time. Cinder's GET /attachments has no next link
// (cinder/api/v3/views/attachments.py:53-57): a limit returns one page only,
// so a reader pages by marker itself.
func TestListsAcrossProjectsAndPages(t *testing.T) {
	w := openstack.Start(t)
	s1, s2 := w.Server(t, "page-1"), w.Server(t, "page-2")
	v1, v2 := w.Volume(t, "page-1"), w.Volume(t, "page-2")
	w.Attach(t, s1, v1)
	w.Attach(t, s2, v2)

	pages, err := servers.List(w.ComputeClient(t), servers.ListOpts{AllTenants: true, Limit: 1}).AllPages(bg)
	if err != nil {
		t.Fatal(err)
	}
	all, err := servers.ExtractServers(pages)
	if err != nil {
		t.Fatal(err)
	}
	if !containsAll(ids(all, func(s servers.Server) string { return s.ID }), s1, s2) {
		t.Errorf("servers listed a page of 1 at a time: %d, missing %s or %s", len(all), s1, s2)
	}

	vpages, err := volumes.List(w.BlockStorageClient(t), volumes.ListOpts{AllTenants: true, Limit: 1}).AllPages(bg)
	if err != nil {
		t.Fatal(err)
	}
	vols, err := volumes.ExtractVolumes(vpages)
	if err != nil {
		t.Fatal(err)
	}
	if !containsAll(ids(vols, func(v volumes.Volume) string { return v.ID }), v1, v2) {
		t.Errorf("volumes listed a page of 1 at a time: %d, missing %s or %s", len(vols), v1, v2)
	}

	bs := w.BlockStorageClient(t)
	apages, err := attachments.List(bs, attachments.ListOpts{AllTenants: true}).AllPages(bg)
	if err != nil {
		t.Fatal(err)
	}
	atts, err := attachments.ExtractAttachments(apages)
	if err != nil {
		t.Fatal(err)
	}
	if !containsAll(ids(atts, func(a attachments.Attachment) string { return a.VolumeID }), v1, v2) {
		t.Errorf("attachments listed without a limit: %+v, missing volume %s or %s", atts, v1, v2)
	}
	limited, err := attachments.List(bs, attachments.ListOpts{AllTenants: true, Limit: 1}).AllPages(bg)
	if err != nil {
		t.Fatal(err)
	}
	one, err := attachments.ExtractAttachments(limited)
	if err != nil {
		t.Fatal(err)
	}
	if len(one) != 1 {
		t.Fatalf("attachments listed with limit 1 gave %d; Cinder's list has no next link, so a limit should give exactly one page of 1", len(one))
	}
	// Paging by marker works (attachments.py:90 reads marker and limit).
	next, err := attachments.List(bs, attachments.ListOpts{AllTenants: true, Limit: 1, Marker: one[0].ID}).AllPages(bg)
	if err != nil {
		t.Fatal(err)
	}
	two, err := attachments.ExtractAttachments(next)
	if err != nil {
		t.Fatal(err)
	}
	if len(two) != 1 || two[0].ID == one[0].ID {
		t.Errorf("attachments after marker %s with limit 1 = %+v; want one other attachment", one[0].ID, two)
	}
}

func ids[T any](xs []T, id func(T) string) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, id(x))
	}
	return out
}

func containsAll(have []string, want ...string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

func sleep() { time.Sleep(250 * time.Millisecond) }
