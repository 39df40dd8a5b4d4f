package openstack

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
)

func TestMain(m *testing.M) { Main(m) }

// The clouds.yaml leads a client through the Keystone stub's catalog to the
// world's own Nova and Cinder, the way tether's users reach their cloud.
func TestCloudsYAMLFindsTheWorldsEndpoints(t *testing.T) {
	w := Start(t)
	t.Logf("%s, started in %s", w.Release, w.StartTime)
	if got, want := w.ComputeClient(t).Endpoint, w.Compute+"/"; got != want {
		t.Errorf("compute endpoint from the catalog = %s, want %s", got, want)
	}
	if got, want := w.BlockStorageClient(t).Endpoint, w.BlockStorage+"/"; got != want {
		t.Errorf("block-storage endpoint from the catalog = %s, want %s", got, want)
	}
	for _, pkg := range []string{"python3-nova=", "python3-cinder=", "python3-placement="} {
		if !strings.Contains(w.Release, pkg) {
			t.Errorf("release %q does not name %s", w.Release, pkg)
		}
	}
}

// Each seeder leaves the state it promises, seen from both Nova and Cinder.
func TestSeedersLeaveTheirDrift(t *testing.T) {
	w := Start(t)
	server := w.Server(t, "seed-vm")
	dangling, stale, forgotten := w.Volume(t, "seed-dangling"), w.Volume(t, "seed-stale"), w.Volume(t, "seed-forgotten")

	t.Run("DanglingBDM: Nova keeps the mapping, Cinder has no attachment", func(t *testing.T) {
		w.DanglingBDM(t, server, dangling)
		if !w.NovaLists(t, server, dangling) {
			t.Errorf("Nova no longer lists volume %s on server %s", dangling, server)
		}
		if v := w.GetVolume(t, dangling); v.Status != "available" || len(v.Attachments) != 0 {
			t.Errorf("volume %s: status %s with %d attachments, want available with none", dangling, v.Status, len(v.Attachments))
		}
		if n := len(w.CinderAttachments(t, dangling)); n != 0 {
			t.Errorf("Cinder still has %d attachment records of volume %s", n, dangling)
		}
	})

	t.Run("StaleAttachment: Cinder in-use for a server Nova never had", func(t *testing.T) {
		id, ghost := w.StaleAttachment(t, stale)
		v := w.GetVolume(t, stale)
		if v.Status != "in-use" || len(v.Attachments) != 1 || v.Attachments[0].ServerID != ghost || v.Attachments[0].AttachmentID != id {
			t.Errorf("volume %s: status %s, attachments %+v; want in-use by %s through %s", stale, v.Status, v.Attachments, ghost, id)
		}
		err := servers.Get(ctx(), w.ComputeClient(t), ghost).Err
		if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Errorf("Nova GET server %s: %v, want 404", ghost, err)
		}
	})

	t.Run("ForgetBDM: Cinder in-use, Nova lists nothing", func(t *testing.T) {
		attachment := w.Attach(t, server, forgotten)
		w.ForgetBDM(t, server, forgotten)
		if w.NovaLists(t, server, forgotten) {
			t.Errorf("Nova still lists volume %s on server %s", forgotten, server)
		}
		v := w.GetVolume(t, forgotten)
		if v.Status != "in-use" || len(v.Attachments) != 1 || v.Attachments[0].ServerID != server || v.Attachments[0].AttachmentID != attachment {
			t.Errorf("volume %s: status %s, attachments %+v; want in-use by %s through %s", forgotten, v.Status, v.Attachments, server, attachment)
		}
	})
}

// On the 2025.1 line the services run in the Debian 13 root: Nova's root
// directory is the release root, its mount namespace has the world's
// directory mounted, and the host's has nothing mounted in the root (the
// mounts go with the services, also when one is killed).
func TestSecondLineMountsStayInItsNamespace(t *testing.T) {
	w := Start(t)
	if w.Line == LineZed {
		t.Skip("the zed line runs on the host, with no root and no mounts")
	}
	pid, err := os.ReadFile(filepath.Join(w.Dir, "nova.pid"))
	if err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join("/proc", strings.TrimSpace(string(pid)))
	root, err := os.Readlink(filepath.Join(proc, "root"))
	if err != nil || !strings.HasSuffix(root, "/rootfs") {
		t.Fatalf("Nova's root directory: %q (%v), want the release root .../rootfs", root, err)
	}
	// mountinfo's fifth field is the mount point, relative to the reading
	// process's root (proc(5)).
	mountPoints := func(file string) []string {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 4 {
				out = append(out, f[4])
			}
		}
		return out
	}
	if mps := mountPoints(filepath.Join(proc, "mountinfo")); !slices.Contains(mps, w.Dir) {
		t.Errorf("Nova's mount namespace does not mount the world's directory %s: %v", w.Dir, mps)
	}
	for _, mp := range mountPoints("/proc/self/mountinfo") {
		if strings.HasPrefix(mp, root+"/") || mp == root {
			t.Errorf("the host has %s mounted, in the release root", mp)
		}
	}
}
