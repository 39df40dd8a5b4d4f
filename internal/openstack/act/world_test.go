package act

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/check"
	"github.com/tether-dev/tether/internal/openstack/observe"
	ostest "github.com/tether-dev/tether/internal/testing/openstack"
)

// These tests run on real Nova, Placement and Cinder (Zed, Debian bookworm;
// hack/openstack.sh). Their oracles are what Nova's and Cinder's APIs then
// list, never tether's own reading of it.

func TestMain(m *testing.M) { ostest.Main(m) }

// executor connects to the world with the cloud of its clouds.yaml.
func executor(t *testing.T, w *ostest.World) *Executor {
	t.Helper()
	c, err := observe.Connect(context.Background(), observe.ConnectOptions{Cloud: w.Cloud, CloudsYAML: w.CloudsYAML})
	if err != nil {
		t.Fatal(err)
	}
	return &Executor{Clients: c, WaitTimeout: 60 * time.Second, PollInterval: 200 * time.Millisecond}
}

// planned observes the world and returns the finding of the check about
// the volume (the driver's first-sighting stage is not this package's:
// the finding is taken as the second sighting finds it).
func planned(t *testing.T, e *Executor, checkName, volume string) drift.Finding {
	t.Helper()
	s, err := observe.Observe(context.Background(), e.Clients, observe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.Policy = check.Policy{Grace: time.Minute}
	var found []drift.Finding
	for _, f := range check.Run(s, e.Policy, s.Taken) {
		if f.Check == checkName && f.Volume == volume {
			found = append(found, f)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s finding about volume %s, got %+v", checkName, volume, found)
	}
	return found[0]
}

// plannedDelete plans the check's finding about the volume, which must be
// a safe delete of the attachment, and applies it; applied again, the same
// plan finds the attachment gone.
func plannedDelete(t *testing.T, e *Executor, checkName, volume, attachment string) {
	t.Helper()
	f := planned(t, e, checkName, volume)
	if f.Object.Name != attachment || f.Action.Type != check.DeleteCinderAttachment || !f.Action.Safe {
		t.Fatalf("plan: %+v, want a safe delete of attachment %s", f, attachment)
	}
	wantOutcome(t, e.Apply(context.Background(), f), drift.Applied, "deleted Cinder attachment "+attachment)
	wantOutcome(t, e.Apply(context.Background(), f), drift.Applied, "AlreadyGone")
}

// novaDB is the world's Nova cell database (world.env TETHER_OS_NOVA_DB).
func novaDB(t *testing.T, w *ostest.World) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(w.Dir, "world.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "TETHER_OS_NOVA_DB="); ok {
			return v
		}
	}
	t.Fatalf("no TETHER_OS_NOVA_DB in %s/world.env", w.Dir)
	return ""
}

// sql runs one statement with args on Nova's cell database, as an operator
// or a stuck Nova task would leave it.
func sql(t *testing.T, w *ostest.World, stmt string, args ...string) {
	t.Helper()
	sqlOn(t, novaDB(t, w), stmt, args...)
}

// cinderSQL runs one statement with args on Cinder's database, as an
// interrupted Cinder request would leave it.
func cinderSQL(t *testing.T, w *ostest.World, stmt string, args ...string) {
	t.Helper()
	sqlOn(t, filepath.Join(w.Dir, "cinder", "cinder.sqlite"), stmt, args...)
}

func sqlOn(t *testing.T, db, stmt string, args ...string) {
	t.Helper()
	const script = `import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute(sys.argv[2], sys.argv[3:]).rowcount
db.commit()
print(n)`
	out, err := exec.Command("/usr/bin/python3", append([]string{"-c", script, db, stmt}, args...)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("%s %v: %v: %s (want 1 row changed)", stmt, args, err, out)
	}
}

func liveAttachments(t *testing.T, w *ostest.World, volume string) []string {
	t.Helper()
	var ids []string
	for _, a := range w.CinderAttachments(t, volume) {
		ids = append(ids, a.ID+"/"+a.Instance+"/"+a.Status)
	}
	return ids
}

func wantOutcome(t *testing.T, r drift.Result, o drift.Outcome, contains string) {
	t.Helper()
	if r.Outcome != o || !strings.Contains(r.Message+" "+string(r.Cause), contains) {
		t.Fatalf("outcome %s (%s): %s; want %s with %q", r.Outcome, r.Cause, r.Message, o, contains)
	}
}

func TestDeleteAttachmentOfServerNovaDoesNotKnow(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	v := w.Volume(t, "stale-ghost")
	a, _ := w.StaleAttachment(t, v)
	plannedDelete(t, e, check.StaleCinderAttachment, v, a)
	// Cinder: no attachment left, the volume is available again.
	if got := liveAttachments(t, w, v); len(got) != 0 {
		t.Fatalf("Cinder still lists %v", got)
	}
	w.WaitVolume(t, v, "available")
}

func TestForceDetachWhereNovaForgotTheMapping(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	s, v := w.Server(t, "forgot"), w.Volume(t, "forgot")
	w.Attach(t, s, v)
	w.ForgetBDM(t, s, v)
	w.StopServer(t, s)
	f := planned(t, e, check.StaleCinderAttachment, v)
	if f.Action.Type != check.ForceDetachVolume || !f.Action.Safe {
		t.Fatalf("plan: %+v", f)
	}
	wantOutcome(t, e.Apply(context.Background(), f), drift.Applied, "force-detached")
	if got := liveAttachments(t, w, v); len(got) != 0 {
		t.Fatalf("Cinder still lists %v", got)
	}
	w.WaitVolume(t, v, "available")
	if w.NovaLists(t, s, v) {
		t.Fatal("Nova lists the volume again")
	}
	w.WaitServer(t, s, "SHUTOFF")
}

func TestRecreateAndDetachDanglingMapping(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	s, v, keep := w.Server(t, "dangling"), w.Volume(t, "dangling"), w.Volume(t, "kept")
	w.Attach(t, s, keep)
	w.DanglingBDM(t, s, v)
	w.StopServer(t, s)
	f := planned(t, e, check.DanglingNovaAttachment, v)
	if f.Action.Type != check.RecreateAttachmentAndDetach || !f.Action.Safe || string(f.Object.UID) != s {
		t.Fatalf("plan: %+v", f)
	}
	wantOutcome(t, e.Apply(context.Background(), f), drift.Applied, "Nova detached volume")
	// Nova: the mapping is gone, the other volume stays attached.
	if w.NovaLists(t, s, v) {
		t.Fatal("Nova still lists the volume")
	}
	if !w.NovaLists(t, s, keep) {
		t.Fatal("Nova lost the other volume's mapping")
	}
	// Cinder: nothing of tether's attachment is left; the other volume is
	// still in-use by the server.
	if got := liveAttachments(t, w, v); len(got) != 0 {
		t.Fatalf("Cinder still lists %v", got)
	}
	w.WaitVolume(t, v, "available")
	w.WaitVolume(t, keep, "in-use")
	w.WaitServer(t, s, "SHUTOFF")
}

func TestRefusedWhenTheServerListsTheVolumeAgain(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	s, v := w.Server(t, "remembers"), w.Volume(t, "remembers")
	w.Attach(t, s, v)
	w.ForgetBDM(t, s, v)
	w.StopServer(t, s)
	f := planned(t, e, check.StaleCinderAttachment, v)
	// Nova's mapping comes back (the soft-delete undone) after the plan.
	sql(t, w, "update block_device_mapping set deleted = 0, deleted_at = NULL where instance_uuid = ? and volume_id = ? and deleted != 0", s, v)
	wantOutcome(t, e.Apply(context.Background(), f), drift.Refused, "no longer holds")
	if got := liveAttachments(t, w, v); len(got) != 1 {
		t.Fatalf("Cinder lists %v, want the one attachment untouched", got)
	}
	w.WaitVolume(t, v, "in-use")
}

func TestRefusedWhenTheServerGotATask(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	s, v := w.Server(t, "migrating"), w.Volume(t, "migrating")
	w.DanglingBDM(t, s, v)
	w.StopServer(t, s)
	f := planned(t, e, check.DanglingNovaAttachment, v)
	sql(t, w, "update instances set task_state = 'migrating' where uuid = ?", s)
	t.Cleanup(func() { sql(t, w, "update instances set task_state = NULL where uuid = ?", s) })
	wantOutcome(t, e.Apply(context.Background(), f), drift.Refused, string(check.ServerTaskState))
	// Nothing was written: no attachment was created, Nova keeps its mapping.
	if got := liveAttachments(t, w, v); len(got) != 0 {
		t.Fatalf("Cinder lists %v, want none", got)
	}
	if !w.NovaLists(t, s, v) {
		t.Fatal("Nova lost its mapping")
	}
}

// TestRunningServerHoldsTheRepairs: a dangling mapping (its Cinder
// attachment gone, as `cinder reset-state` or a hand delete leaves it) and
// a mapping Nova forgot, each on an ACTIVE server, are planned blocked by
// ServerRunning, and applying the plan changes neither Nova nor Cinder.
func TestRunningServerHoldsTheRepairs(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	s, dangling, forgot := w.Server(t, "running"), w.Volume(t, "running-dangling"), w.Volume(t, "running-forgot")
	w.DanglingBDM(t, s, dangling)
	a := w.Attach(t, s, forgot)
	w.ForgetBDM(t, s, forgot)
	for _, tc := range []struct {
		check, volume string
		action        drift.ActionType
	}{
		{check.DanglingNovaAttachment, dangling, check.RecreateAttachmentAndDetach},
		{check.StaleCinderAttachment, forgot, check.ForceDetachVolume},
	} {
		f := planned(t, e, tc.check, tc.volume)
		// Where Nova deletes dangling mappings on reboot (2025.1), the
		// dangling mapping's remedy is the reboot instead.
		remedy := "openstack server stop " + s
		if tc.check == check.DanglingNovaAttachment && w.Line != ostest.LineZed {
			remedy = "openstack server reboot --hard " + s
		}
		if f.Action.Type != tc.action || f.Action.Safe || f.Action.BlockedBy != check.ServerRunning ||
			!strings.Contains(f.Action.Remedy, remedy) {
			t.Fatalf("plan of %s: %+v, want %s blocked by ServerRunning, naming `%s`", tc.check, f, tc.action, remedy)
		}
		wantOutcome(t, e.Apply(context.Background(), f), drift.Refused, "ServerRunning")
	}
	// Nova keeps the dangling mapping, Cinder holds nothing for it; Cinder
	// keeps the forgotten mapping's attachment attached.
	if !w.NovaLists(t, s, dangling) || w.NovaLists(t, s, forgot) {
		t.Fatal("Nova's mappings changed")
	}
	if got := liveAttachments(t, w, dangling); len(got) != 0 {
		t.Fatalf("Cinder lists %v for the dangling mapping's volume, want none", got)
	}
	if got := liveAttachments(t, w, forgot); len(got) != 1 || got[0] != a+"/"+s+"/attached" {
		t.Fatalf("Cinder lists %v, want %s attached to %s", got, a, s)
	}
	w.WaitVolume(t, dangling, "available")
	w.WaitVolume(t, forgot, "in-use")
	w.WaitServer(t, s, "ACTIVE")
}

// TestRebootRemedyOnEachLine: the remedy of a dangling mapping on a running
// server says "hard reboot: Nova repairs it itself" on the line whose Nova
// does (2025.1), and following it leaves no finding; on Zed it says to stop
// the server, and a hard reboot would leave the finding as it was.
func TestRebootRemedyOnEachLine(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	s, v := w.Server(t, "reboot-remedy"), w.Volume(t, "reboot-remedy")
	w.DanglingBDM(t, s, v)
	f := planned(t, e, check.DanglingNovaAttachment, v)
	rebootSaid := strings.HasPrefix(f.Action.Remedy, "hard reboot: Nova repairs it itself")
	if want := w.Line != ostest.LineZed; rebootSaid != want {
		t.Fatalf("on the %s line the remedy says the reboot: %v, want %v; remedy: %s", w.Line, rebootSaid, want, f.Action.Remedy)
	}
	w.HardReboot(t, s)
	snap, err := observe.Observe(context.Background(), e.Clients, observe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var left bool
	for _, f := range check.Run(snap, e.Policy, snap.Taken) {
		left = left || f.Check == check.DanglingNovaAttachment && f.Volume == v
	}
	if left == rebootSaid {
		t.Errorf("after the hard reboot the finding is still there: %v; the remedy said the reboot: %v", left, rebootSaid)
	}
}

// TestRefusedWhenTheServerWasStartedAgain: the plan was made on a stopped
// server; started again before --apply, its guest may use the volume, and
// the live re-check refuses with ServerRunning before writing anything.
func TestRefusedWhenTheServerWasStartedAgain(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	s, v := w.Server(t, "restarted"), w.Volume(t, "restarted")
	w.DanglingBDM(t, s, v)
	w.StopServer(t, s)
	f := planned(t, e, check.DanglingNovaAttachment, v)
	if !f.Action.Safe {
		t.Fatalf("plan on the stopped server: %+v, want safe", f)
	}
	w.StartServer(t, s)
	wantOutcome(t, e.Apply(context.Background(), f), drift.Refused, string(check.ServerRunning))
	if got := liveAttachments(t, w, v); len(got) != 0 {
		t.Fatalf("Cinder lists %v, want none", got)
	}
	if !w.NovaLists(t, s, v) {
		t.Fatal("Nova lost its mapping")
	}
	w.WaitVolume(t, v, "available")
}

func TestRefusedWhenTheVolumeStartedMoving(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	v := w.Volume(t, "moving")
	a, _ := w.StaleAttachment(t, v)
	f := planned(t, e, check.StaleCinderAttachment, v)
	// An admin puts the volume in detaching now (os-reset_status): younger
	// than the grace period, it is held.
	err := volumes.ResetStatus(context.Background(), e.Clients.BlockStorage, v, volumes.ResetStatusOpts{Status: "detaching"}).ExtractErr()
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, e.Apply(context.Background(), f), drift.Refused, string(check.VolumeTransitional))
	if got := liveAttachments(t, w, v); len(got) != 1 || !strings.HasPrefix(got[0], a) {
		t.Fatalf("Cinder lists %v, want attachment %s untouched", got, a)
	}
}

// TestCinderRefusesWritesOnAttachmentsNovaUses holds the writes to Cinder's
// guard (cinder/volume/api.py attachment_deletion_allowed, CVE-2023-2088):
// called as the operator on an attachment Nova records, delete and
// force-detach answer 409, which is Refused (not Failed), and nothing
// changes.
func TestCinderRefusesWritesOnAttachmentsNovaUses(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	s, v := w.Server(t, "in-use"), w.Volume(t, "in-use")
	a := w.Attach(t, s, v)
	r := e.deleteAttachment(context.Background(), a)
	if r == nil || r.Outcome != drift.Refused || r.Cause != NovaUsesAttachment {
		t.Fatalf("delete: %+v, want Refused NovaUsesAttachment", r)
	}
	r = e.forceDetach(context.Background(), v, a)
	if r == nil || r.Outcome != drift.Refused || r.Cause != NovaUsesAttachment {
		t.Fatalf("force-detach: %+v, want Refused NovaUsesAttachment", r)
	}
	if got := liveAttachments(t, w, v); len(got) != 1 || !strings.HasPrefix(got[0], a+"/"+s+"/attached") {
		t.Fatalf("Cinder lists %v, want %s attached to %s", got, a, s)
	}
	if !w.NovaLists(t, s, v) {
		t.Fatal("Nova lost its mapping")
	}
	w.WaitVolume(t, v, "in-use")
}

func TestNotSafeIsNeverApplied(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	v := w.Volume(t, "seen-once")
	w.StaleAttachment(t, v)
	f := planned(t, e, check.StaleCinderAttachment, v)
	f.Action.Safe, f.Action.BlockedBy = false, drift.NotSeenTwice
	wantOutcome(t, e.Apply(context.Background(), f), drift.Refused, "not safe")
	if got := liveAttachments(t, w, v); len(got) != 1 {
		t.Fatalf("Cinder lists %v, want the attachment untouched", got)
	}
}

// bootFromVolume boots a server from a new bootable volume (its root disk)
// and returns both ids and Nova's attachment of the volume.
func bootFromVolume(t *testing.T, w *ostest.World, name string) (server, volume, attachment string) {
	t.Helper()
	volume = w.Volume(t, name)
	bs := w.BlockStorageClient(t)
	if err := volumes.SetBootable(context.Background(), bs, volume, volumes.BootableOpts{Bootable: true}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	s, err := servers.Create(context.Background(), w.ComputeClient(t), servers.CreateOpts{
		Name: name, FlavorRef: "1", Networks: "none",
		BlockDevice: []servers.BlockDevice{{UUID: volume, SourceType: servers.SourceVolume, DestinationType: servers.DestinationVolume, BootIndex: 0}},
	}, nil).Extract()
	if err != nil {
		t.Fatalf("booting server %s from volume %s: %v", name, volume, err)
	}
	w.WaitServer(t, s.ID, "ACTIVE")
	for _, a := range w.NovaAttachments(t, s.ID) {
		if a.VolumeID == volume {
			return s.ID, volume, a.AttachmentID
		}
	}
	t.Fatalf("server %s does not list its root volume %s", s.ID, volume)
	return
}

// TestRootDiskIsNeverDetached: a dangling mapping of a server's root disk
// is reported without an action (Nova refuses to detach a root device:
// nova/api/openstack/compute/volume_attachments.py, "Cannot detach a root
// device volume"), and if the repair were tried all the same, Nova's 400
// is Refused and the attachment tether made for it is deleted again.
func TestRootDiskIsNeverDetached(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	s, v, a := bootFromVolume(t, w, "root")
	w.DeleteAttachmentAsNova(t, a)
	w.WaitVolume(t, v, "available")
	f := planned(t, e, check.DanglingNovaAttachment, v)
	if f.Action.Type != drift.None || f.Action.Safe || f.Action.BlockedBy != check.RootVolume {
		t.Fatalf("plan: %+v, want no action, blocked by RootVolume", f)
	}
	wantOutcome(t, e.Apply(context.Background(), f), drift.Refused, "not safe")

	r := e.recreateAndDetach(context.Background(), s, v)
	if r.Outcome != drift.Refused || r.Cause != Rejected || !strings.Contains(r.Message, "root device") || !strings.Contains(r.Message, "deleted again") {
		t.Fatalf("repair of a root disk: %+v, want Refused (Rejected) naming the root device and the undo", r)
	}
	if got := liveAttachments(t, w, v); len(got) != 0 {
		t.Fatalf("Cinder lists %v after the undo, want none", got)
	}
	if !w.NovaLists(t, s, v) {
		t.Fatal("Nova lost the root disk's mapping")
	}
}

// TestDeleteLeftoverReservation: a volume attached through Nova (the
// attachment Nova's mapping records) and a second reservation of it for the
// same server, as a retried attach leaves it. The plan deletes the
// reservation, on a running server too (a reservation has no connection to
// cut); afterwards Cinder holds only Nova's attachment, still attached,
// the volume stays in-use and Nova still records that attachment.
func TestDeleteLeftoverReservation(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	s := w.Server(t, "leftover")
	t.Cleanup(func() { w.DeleteServer(t, s) })
	v, used, left := leftover(t, w, s, "leftover")
	plannedDelete(t, e, check.LeftoverCinderAttachment, v, left)
	if got := liveAttachments(t, w, v); len(got) != 1 || got[0] != used+"/"+s+"/attached" {
		t.Fatalf("Cinder lists %v, want only %s attached to %s", got, used, s)
	}
	if a, ok := novaHas(w.NovaAttachments(t, s), v); !ok || a.AttachmentID != used {
		t.Fatalf("Nova records %+v for volume %s, want attachment %s", a, v, used)
	}
	w.WaitVolume(t, v, "in-use")
	w.WaitServer(t, s, "ACTIVE")
}

// TestLeftoverRefusedWhenItChanged: the live re-check right before the
// DELETE refuses when the reservation moved on since the plan (attaching,
// as Cinder records it once a connector is given: its delete would
// terminate that connection), and when Nova's mapping now records the
// reservation itself. Nothing is deleted.
func TestLeftoverRefusedWhenItChanged(t *testing.T) {
	w := ostest.Start(t)
	e := executor(t, w)
	s := w.Server(t, "leftover-changed")
	t.Cleanup(func() { w.DeleteServer(t, s) })
	v, used, left := leftover(t, w, s, "leftover-connected")
	f := planned(t, e, check.LeftoverCinderAttachment, v)
	// Cinder refuses a connector for a second attachment of a
	// non-multiattach volume while another has one ("duplicate connectors
	// detected", cinder/volume/api.py:2512-2532), so the move to attaching
	// is written where Cinder's volume service writes it
	// (manager.py:4921, db volume_attached).
	cinderSQL(t, w, "update volume_attachment set attach_status = 'attaching' where id = ?", left)
	wantOutcome(t, e.Apply(context.Background(), f), drift.Refused, string(check.AttachmentConnected))
	if got := liveAttachments(t, w, v); len(got) != 2 || !slices.Contains(got, used+"/"+s+"/attached") || !slices.Contains(got, left+"/"+s+"/attaching") {
		t.Fatalf("Cinder lists %v, want %s attached and %s attaching", got, used, left)
	}

	v2, used2, left2 := leftover(t, w, s, "leftover-recorded")
	f = planned(t, e, check.LeftoverCinderAttachment, v2)
	sql(t, w, "update block_device_mapping set attachment_id = ? where instance_uuid = ? and volume_id = ? and deleted = 0", left2, s, v2)
	t.Cleanup(func() {
		sql(t, w, "update block_device_mapping set attachment_id = ? where instance_uuid = ? and volume_id = ? and deleted = 0", used2, s, v2)
	})
	wantOutcome(t, e.Apply(context.Background(), f), drift.Refused, "no longer holds")
	if got := liveAttachments(t, w, v2); len(got) != 2 || !slices.Contains(got, left2+"/"+s+"/reserved") {
		t.Fatalf("Cinder lists %v, want %s still reserved beside %s", got, left2, used2)
	}
}

// leftover attaches a new volume to the server through Nova (used, the
// attachment Nova records) and reserves it for the server again (left).
// (The tests of a package share Nova's quota of 10 servers: the leftover
// tests delete theirs.)
func leftover(t *testing.T, w *ostest.World, server, name string) (volume, used, left string) {
	t.Helper()
	volume = w.Volume(t, name)
	used = w.Attach(t, server, volume)
	return volume, used, w.Reserve(t, server, volume)
}

func novaHas(as []ostest.NovaAttachment, volume string) (ostest.NovaAttachment, bool) {
	for _, a := range as {
		if a.VolumeID == volume {
			return a, true
		}
	}
	return ostest.NovaAttachment{}, false
}
