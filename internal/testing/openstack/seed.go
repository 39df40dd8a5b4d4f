package openstack

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/attachments"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"
)

// ImageID is the one image the Glance stub serves; FlavorID the flavor the
// world creates.
const (
	ImageID  = "155d900f-4e14-4e4c-a73d-069cbf4541e6"
	FlavorID = "1"
)

// WaitTimeout bounds each wait for a server or volume to reach a state.
const WaitTimeout = 2 * time.Minute

// ServiceTokenHeader is the header with which Nova (its [service_user]
// token) calls Cinder; the world's Cinder gives such requests the service
// role, as keystonemiddleware does in a cloud with Keystone.
const ServiceTokenHeader = "X-Service-Token"

// NovaAttachment is one entry of GET /servers/{id}/os-volume_attachments at
// compute microversion 2.89, with the fields gophercloud's VolumeAttachment
// lacks.
type NovaAttachment struct {
	VolumeID     string `json:"volumeId"`
	ServerID     string `json:"serverId"`
	Device       string `json:"device"`
	AttachmentID string `json:"attachment_id"` // the Cinder attachment (2.89)
	BDMUUID      string `json:"bdm_uuid"`      // Nova's block device mapping (2.89)
}

func ctx() context.Context { return context.Background() }

// Server boots a server from the stub image with no network and waits until
// it is ACTIVE. It returns the server's ID.
func (w *World) Server(t testing.TB, name string) string {
	t.Helper()
	c := w.ComputeClient(t)
	s, err := servers.Create(ctx(), c, servers.CreateOpts{
		Name: name, ImageRef: ImageID, FlavorRef: FlavorID,
		Networks: "none", // compute 2.37 and later
	}, nil).Extract()
	if err != nil {
		t.Fatalf("booting server %s: %v", name, err)
	}
	w.WaitServer(t, s.ID, "ACTIVE")
	return s.ID
}

// WaitServer waits until the server has the status and no task_state.
func (w *World) WaitServer(t testing.TB, id, status string) {
	t.Helper()
	c := w.ComputeClient(t)
	var last string
	w.wait(t, fmt.Sprintf("server %s to be %s", id, status), func() (bool, error) {
		var s struct {
			Status    string         `json:"status"`
			TaskState *string        `json:"OS-EXT-STS:task_state"`
			Fault     map[string]any `json:"fault"`
		}
		if err := servers.Get(ctx(), c, id).ExtractIntoStructPtr(&s, "server"); err != nil {
			return false, err
		}
		last = s.Status
		if s.Status == "ERROR" && status != "ERROR" {
			return false, fmt.Errorf("server %s is in ERROR: %v; nova log:\n%s", id, s.Fault, w.LogTail("nova", 20))
		}
		return s.Status == status && s.TaskState == nil, nil
	}, func() string { return "status " + last })
}

// Volume creates a 1 GiB volume and waits until it is available. It returns
// the volume's ID.
func (w *World) Volume(t testing.TB, name string) string {
	t.Helper()
	return w.createVolume(t, w.BlockStorageClient(t), name)
}

// VolumeIn creates a 1 GiB volume in another project (Cinder records the
// token's project as its owner) and waits until it is available. The
// world's admin may attach it to a server of its own project, as an admin
// can in a real cloud.
func (w *World) VolumeIn(t testing.TB, project, name string) string {
	t.Helper()
	return w.createVolume(t, w.BlockStorageClientIn(t, project), name)
}

func (w *World) createVolume(t testing.TB, c *gophercloud.ServiceClient, name string) string {
	t.Helper()
	v, err := volumes.Create(ctx(), c, volumes.CreateOpts{Name: name, Size: 1}, nil).Extract()
	if err != nil {
		t.Fatalf("creating volume %s: %v", name, err)
	}
	w.WaitVolume(t, v.ID, "available")
	return v.ID
}

// GetVolume reads a volume from Cinder.
func (w *World) GetVolume(t testing.TB, id string) *volumes.Volume {
	t.Helper()
	v, err := volumes.Get(ctx(), w.BlockStorageClient(t), id).Extract()
	if err != nil {
		t.Fatalf("reading volume %s: %v", id, err)
	}
	return v
}

// WaitVolume waits until the volume has the status.
func (w *World) WaitVolume(t testing.TB, id, status string) {
	t.Helper()
	c := w.BlockStorageClient(t)
	var last string
	w.wait(t, fmt.Sprintf("volume %s to be %s", id, status), func() (bool, error) {
		v, err := volumes.Get(ctx(), c, id).Extract()
		if err != nil {
			return false, err
		}
		last = v.Status
		if strings.HasPrefix(v.Status, "error") && !strings.HasPrefix(status, "error") {
			return false, fmt.Errorf("volume %s is in %s; cinder log:\n%s", id, v.Status, w.LogTail("cinder", 20))
		}
		return v.Status == status, nil
	}, func() string { return "status " + last })
}

// Attach attaches the volume to the server through Nova, waits until the
// volume is in-use and Nova lists the attachment, and returns the Cinder
// attachment's ID as Nova records it.
func (w *World) Attach(t testing.TB, server, volume string) string {
	t.Helper()
	c := w.ComputeClient(t)
	if _, err := volumeattach.Create(ctx(), c, server, volumeattach.CreateOpts{VolumeID: volume}).Extract(); err != nil {
		t.Fatalf("attaching volume %s to server %s through Nova: %v", volume, server, err)
	}
	w.WaitVolume(t, volume, "in-use")
	var id string
	w.wait(t, fmt.Sprintf("Nova to record the attachment of volume %s to server %s", volume, server), func() (bool, error) {
		for _, a := range w.NovaAttachments(t, server) {
			if a.VolumeID == volume && a.AttachmentID != "" {
				id = a.AttachmentID
				return true, nil
			}
		}
		return false, nil
	}, func() string { return "" })
	return id
}

// NovaLists says whether Nova lists the volume among the server's attachments.
func (w *World) NovaLists(t testing.TB, server, volume string) bool {
	t.Helper()
	for _, a := range w.NovaAttachments(t, server) {
		if a.VolumeID == volume {
			return true
		}
	}
	return false
}

// NovaAttachments lists the server's volume attachments as Nova sees them.
func (w *World) NovaAttachments(t testing.TB, server string) []NovaAttachment {
	t.Helper()
	pages, err := volumeattach.List(w.ComputeClient(t), server).AllPages(ctx())
	if err != nil {
		t.Fatalf("listing the volume attachments of server %s: %v", server, err)
	}
	var out []NovaAttachment
	if err := pages.(volumeattach.VolumeAttachmentPage).ExtractIntoSlicePtr(&out, "volumeAttachments"); err != nil {
		t.Fatalf("reading the volume attachments of server %s: %v", server, err)
	}
	return out
}

// CinderAttachments lists Cinder's attachment records of a volume, in
// whichever project the volume is (all_tenants: the world's user is admin).
func (w *World) CinderAttachments(t testing.TB, volume string) []attachments.Attachment {
	t.Helper()
	pages, err := attachments.List(w.BlockStorageClient(t), attachments.ListOpts{VolumeID: volume, AllTenants: true}).AllPages(ctx())
	if err != nil {
		t.Fatalf("listing the Cinder attachments of volume %s: %v", volume, err)
	}
	out, err := attachments.ExtractAttachments(pages)
	if err != nil {
		t.Fatalf("reading the Cinder attachments of volume %s: %v", volume, err)
	}
	return out
}

// DeleteAttachmentAsNova deletes a Cinder attachment the way Nova does:
// with its service token, which Cinder's CVE-2023-2088 check trusts.
func (w *World) DeleteAttachmentAsNova(t testing.TB, attachment string) {
	t.Helper()
	if err := deleteAttachmentAsNova(w.BlockStorageClient(t), attachment); err != nil {
		t.Fatal(err)
	}
}

func deleteAttachmentAsNova(c *gophercloud.ServiceClient, attachment string) error {
	_, err := c.Delete(ctx(), c.ServiceURL("attachments", attachment), &gophercloud.RequestOpts{
		MoreHeaders: map[string]string{ServiceTokenHeader: "nova:service"},
		OkCodes:     []int{http.StatusOK},
	})
	if err != nil {
		return fmt.Errorf("deleting Cinder attachment %s with Nova's service token: %v", attachment, err)
	}
	return nil
}

// DanglingBDM leaves Nova with a block device mapping whose Cinder
// attachment is gone: the volume is attached through Nova, then its Cinder
// attachment is deleted with Nova's service token (as Nova itself deletes it
// when a detach half-fails). Nova keeps the BDM; the volume is available.
func (w *World) DanglingBDM(t testing.TB, server, volume string) {
	t.Helper()
	attachment := w.Attach(t, server, volume)
	w.DeleteAttachmentAsNova(t, attachment)
	w.WaitVolume(t, volume, "available")
}

// StaleAttachment leaves Cinder with a completed attachment (volume in-use)
// for a server that never existed, as a lost Nova request or a server
// deleted behind Cinder's back does. It returns the attachment's ID and the
// made-up server ID.
func (w *World) StaleAttachment(t testing.TB, volume string) (attachmentID, serverID string) {
	t.Helper()
	serverID = newUUID(t)
	c := w.BlockStorageClient(t)
	a, err := attachments.Create(ctx(), c, attachments.CreateOpts{
		VolumeUUID:   volume,
		InstanceUUID: serverID,
		Connector:    map[string]any{"host": "gone-host", "initiator": "iqn.2026-01.dev.tether:gone", "ip": "127.0.0.1", "platform": "x86_64", "os_type": "linux"},
		Mode:         "rw", // block storage 3.54
	}).Extract()
	if err != nil {
		t.Fatalf("creating a Cinder attachment of volume %s for server %s: %v", volume, serverID, err)
	}
	if err := attachments.Complete(ctx(), c, a.ID).ExtractErr(); err != nil { // 3.44
		t.Fatalf("completing Cinder attachment %s: %v", a.ID, err)
	}
	w.WaitVolume(t, volume, "in-use")
	return a.ID, serverID
}

// Reserve creates a Cinder attachment of the volume for the server
// without a connector (POST /attachments, block storage 3.54), as Nova's
// first attach step does: Cinder records it reserved, with no connection
// on the backend. On a volume the server already holds, Cinder allows it
// for the same server only (a migration's second attachment), and it is
// what a retried attach leaves behind. It returns the attachment's ID.
func (w *World) Reserve(t testing.TB, server, volume string) string {
	t.Helper()
	id, err := reserve(w.BlockStorageClient(t), server, volume)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func reserve(c *gophercloud.ServiceClient, server, volume string) (string, error) {
	a, err := attachments.Create(ctx(), c, attachments.CreateOpts{VolumeUUID: volume, InstanceUUID: server, Mode: "rw"}).Extract()
	if err != nil {
		return "", fmt.Errorf("reserving volume %s for server %s (POST /attachments without a connector): %v", volume, server, err)
	}
	return a.ID, nil
}

// ForgetBDM makes Nova forget the server's block device mapping of the
// volume, as a lost database write or a hand edit does: the row is
// soft-deleted in the cell database (Nova's own soft-delete: deleted = id).
// Cinder still shows the volume in-use by the server.
func (w *World) ForgetBDM(t testing.TB, server, volume string) {
	t.Helper()
	if err := w.forgetBDM(server, volume); err != nil {
		t.Fatal(err)
	}
}

func (w *World) forgetBDM(server, volume string) error {
	const script = `import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute("update block_device_mapping set deleted = id, deleted_at = datetime('now') "
               "where instance_uuid = ? and volume_id = ? and deleted = 0", (sys.argv[2], sys.argv[3])).rowcount
db.commit()
print(n)`
	out, err := exec.Command("/usr/bin/python3", "-c", script, w.novaDB, server, volume).CombinedOutput()
	if err != nil {
		return fmt.Errorf("soft-deleting the BDM of volume %s on server %s in %s: %v: %s", volume, server, w.novaDB, err, out)
	}
	if n := strings.TrimSpace(string(out)); n != "1" {
		return fmt.Errorf("soft-deleting the BDM of volume %s on server %s changed %s rows, want 1", volume, server, n)
	}
	return nil
}

// StopServer stops the server (os-stop, `openstack server stop`) and waits
// until Nova shows it SHUTOFF with no task.
func (w *World) StopServer(t testing.TB, id string) {
	t.Helper()
	if err := servers.Stop(ctx(), w.ComputeClient(t), id).ExtractErr(); err != nil {
		t.Fatalf("stopping server %s: %v", id, err)
	}
	w.WaitServer(t, id, "SHUTOFF")
}

// StartServer starts the server (os-start, `openstack server start`) and
// waits until Nova shows it ACTIVE with no task.
func (w *World) StartServer(t testing.TB, id string) {
	t.Helper()
	if err := servers.Start(ctx(), w.ComputeClient(t), id).ExtractErr(); err != nil {
		t.Fatalf("starting server %s: %v", id, err)
	}
	w.WaitServer(t, id, "ACTIVE")
}

// HardReboot reboots the server the hard way (`openstack server reboot
// --hard`) and waits until Nova shows it ACTIVE with no task: the compute
// service has finished the reboot (Nova clears the task at its end).
func (w *World) HardReboot(t testing.TB, id string) {
	t.Helper()
	if err := servers.Reboot(ctx(), w.ComputeClient(t), id, servers.RebootOpts{Type: servers.HardReboot}).ExtractErr(); err != nil {
		t.Fatalf("rebooting server %s (hard): %v", id, err)
	}
	w.WaitServer(t, id, "ACTIVE")
}

// DeleteServer deletes the server and waits until Nova no longer has it.
func (w *World) DeleteServer(t testing.TB, id string) {
	t.Helper()
	c := w.ComputeClient(t)
	if err := servers.Delete(ctx(), c, id).ExtractErr(); err != nil {
		t.Fatalf("deleting server %s: %v", id, err)
	}
	w.wait(t, fmt.Sprintf("server %s to be deleted", id), func() (bool, error) {
		err := servers.Get(ctx(), c, id).Err
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return true, nil
		}
		return false, err
	}, func() string { return "" })
}

func (w *World) wait(t testing.TB, what string, done func() (bool, error), state func() string) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for {
		ok, err := done()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s (last: %s); logs in %s", WaitTimeout, what, state(), w.Dir+"/logs")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func newUUID(t testing.TB) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// RefuseServiceToken makes the world's Cinder give Nova's service token no
// service role (refuse) or the service role again: Nova then calls Cinder
// as an ordinary user, as a Nova that sends no service token (or one of a
// user without the service role) does, and Cinder's CVE-2023-2088 check
// refuses its detaches of attached volumes. The state lasts until the
// next call; a test that refuses restores it with t.Cleanup.
func (w *World) RefuseServiceToken(t testing.TB, refuse bool) {
	t.Helper()
	path := filepath.Join(w.Dir, "cinder", "state", "service-token-refused")
	var err error
	if refuse {
		err = os.WriteFile(path, nil, 0o644)
	} else if err = os.Remove(path); os.IsNotExist(err) {
		err = nil
	}
	if err != nil {
		t.Fatalf("service token refused=%v: %v", refuse, err)
	}
}

// NovaDetach asks Nova to detach the volume from the server (DELETE
// os-volume_attachments, 202) and waits until the compute service has
// finished the detach_volume action, whether it succeeded or failed; it
// returns the action's request ID.
func (w *World) NovaDetach(t testing.TB, server, volume string) string {
	t.Helper()
	c := w.ComputeClient(t)
	if err := volumeattach.Delete(ctx(), c, server, volume).ExtractErr(); err != nil {
		t.Fatalf("detaching volume %s from server %s through Nova: %v", volume, server, err)
	}
	var request, result string
	w.wait(t, fmt.Sprintf("Nova's detach of volume %s from server %s to finish", volume, server), func() (bool, error) {
		var actions struct {
			Actions []struct {
				Action    string `json:"action"`
				RequestID string `json:"request_id"`
			} `json:"instanceActions"`
		}
		if _, err := c.Get(ctx(), c.ServiceURL("servers", server, "os-instance-actions"), &actions, nil); err != nil {
			return false, err
		}
		for _, a := range actions.Actions { // newest first
			if a.Action != "detach_volume" {
				continue
			}
			var detail struct {
				Action struct {
					Events []struct {
						Event  string `json:"event"`
						Result string `json:"result"`
					} `json:"events"`
				} `json:"instanceAction"`
			}
			if _, err := c.Get(ctx(), c.ServiceURL("servers", server, "os-instance-actions", a.RequestID), &detail, nil); err != nil {
				return false, err
			}
			for _, e := range detail.Action.Events {
				if e.Event == "compute_detach_volume" && e.Result != "" {
					request, result = a.RequestID, e.Result
					return true, nil
				}
			}
			return false, nil
		}
		return false, nil
	}, func() string { return "result " + result })
	return request
}
