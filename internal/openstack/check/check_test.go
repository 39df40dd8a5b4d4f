package check

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
	"github.com/tether-dev/tether/internal/plan"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// Fixture helpers: small composable options.

type world struct{ s snapshot.Snapshot }

func (w *world) server(id string, opts ...func(*snapshot.Server)) *world {
	s := snapshot.Server{ID: id, Name: "vm-" + id, Project: "p1", Status: "ACTIVE", VMState: "active"}
	for _, o := range opts {
		o(&s)
	}
	w.s.Servers = append(w.s.Servers, s)
	return w
}

func (w *world) volume(id string, opts ...func(*snapshot.Volume)) *world {
	v := snapshot.Volume{ID: id, Name: "vol-" + id, Project: "p1", Status: "in-use", Updated: now.Add(-time.Hour)}
	for _, o := range opts {
		o(&v)
	}
	w.s.Volumes = append(w.s.Volumes, v)
	return w
}

func (w *world) attachment(id, volume, server, status string) *world {
	w.s.Attachments = append(w.s.Attachments, snapshot.Attachment{ID: id, VolumeID: volume, Instance: server, Status: status})
	return w
}

// connected gives the attachments connection info (a connector was given).
func (w *world) connected(ids ...string) *world {
	for i := range w.s.Attachments {
		if slices.Contains(ids, w.s.Attachments[i].ID) {
			w.s.Attachments[i].Connected = true
		}
	}
	return w
}

// gone records that reads by ID of ids answered 404.
func (w *world) gone(ids ...string) *world {
	for _, id := range ids {
		w.s.Direct.MarkGone(id)
	}
	return w
}

// unread records that reads by ID of ids failed (a 503, a timeout).
func (w *world) unread(ids ...string) *world {
	for _, id := range ids {
		w.s.Direct.MarkUnread(id, errors.New("Cinder answered 503: Service Unavailable"))
	}
	return w
}

// outside adds objects that only a read by ID showed (another project's).
func (w *world) outside(more *world) *world {
	w.s.Direct.Servers = append(w.s.Direct.Servers, more.s.Servers...)
	w.s.Direct.Volumes = append(w.s.Direct.Volumes, more.s.Volumes...)
	w.s.Direct.Attachments = append(w.s.Direct.Attachments, more.s.Attachments...)
	return w
}

func lists(volume string) func(*snapshot.Server) {
	return func(s *snapshot.Server) { s.Volumes = append(s.Volumes, snapshot.ServerVolume{VolumeID: volume}) }
}

func listsWith(volume, attachment, device string) func(*snapshot.Server) {
	return func(s *snapshot.Server) {
		s.Volumes = append(s.Volumes, snapshot.ServerVolume{VolumeID: volume, AttachmentID: attachment, BDM: "bdm-" + volume, Device: device})
	}
}

func task(t string) func(*snapshot.Server) { return func(s *snapshot.Server) { s.TaskState = t } }

// state sets the API status and the vm_state together, as Nova maps one
// to the other (nova/api/openstack/common.py _STATE_MAP).
func state(status, vm string) func(*snapshot.Server) {
	return func(s *snapshot.Server) { s.Status, s.VMState = status, vm }
}

// stopped is a server powered off (`openstack server stop`).
var stopped = state("SHUTOFF", "stopped")

func vmState(st string) func(*snapshot.Server) { return func(s *snapshot.Server) { s.VMState = st } }
func root(dev string) func(*snapshot.Server) {
	return func(s *snapshot.Server) { s.RootDevice = dev }
}
func status(st string, age time.Duration) func(*snapshot.Volume) {
	return func(v *snapshot.Volume) { v.Status, v.Updated = st, now.Add(-age) }
}
func multiattach(v *snapshot.Volume) { v.Multiattach = true }

// seenLongAgo is the policy of the tables. The checks do not ask whether a
// finding was seen twice (the driver's first-sighting stage does, see
// TestChecksLeaveSeenTwiceToTheDriver), so the tables see the holds of the
// checks alone.
func seenLongAgo(*world) Policy { return Policy{Grace: time.Minute} }

type want struct {
	check   string
	action  drift.ActionType
	safe    bool
	blocked drift.BlockReason
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    *world
		want []want
	}{
		// StaleCinderAttachment. Cinder's attachment statuses and volume
		// statuses: api-ref/source/v3/attachments.inc and
		// volumes-v3-volumes.inc; a server is gone when GET /servers/{id}
		// answers 404.
		{"attachment for a server Nova answers 404 for -> delete the attachment",
			(&world{}).volume("v1").attachment("a1", "v1", "ghost", "attached").gone("ghost"),
			[]want{{StaleCinderAttachment, DeleteCinderAttachment, true, ""}}},
		{"attachment for a server listed as deleted -> delete the attachment",
			(&world{}).server("s1", vmState("deleted")).volume("v1").attachment("a1", "v1", "s1", "attached"),
			[]want{{StaleCinderAttachment, DeleteCinderAttachment, true, ""}}},
		{"server lists the volume -> no finding",
			(&world{}).server("s1", lists("v1")).volume("v1").attachment("a1", "v1", "s1", "attached"),
			nil},
		{"soft-deleted server that lists the volume -> no finding (it can be restored)",
			(&world{}).server("s1", vmState("soft-deleted"), lists("v1")).volume("v1").attachment("a1", "v1", "s1", "attached"),
			nil},
		{"detached attachment -> no finding",
			(&world{}).volume("v1", status("available", time.Hour)).attachment("a1", "v1", "ghost", "detached").gone("ghost"),
			nil},
		{"stopped server that does not list the volume -> force detach",
			(&world{}).server("s1", stopped).volume("v1").attachment("a1", "v1", "s1", "attached"),
			[]want{{StaleCinderAttachment, ForceDetachVolume, true, ""}}},
		{"shelved-offloaded server (no host) that does not list the volume -> force detach",
			(&world{}).server("s1", state("SHELVED_OFFLOADED", "shelved_offloaded")).volume("v1").attachment("a1", "v1", "s1", "attached"),
			[]want{{StaleCinderAttachment, ForceDetachVolume, true, ""}}},
		// A server whose guest may run keeps the compute host's
		// connection to the volume whatever Nova's database lists
		// (nova/compute/vm_states.py: only stopped is "powered off" and
		// only shelved_offloaded has nothing on the hypervisor), so
		// force-detaching cuts a disk a guest may use.
		{"running server that does not list the volume -> held",
			(&world{}).server("s1").volume("v1").attachment("a1", "v1", "s1", "attached"),
			[]want{{StaleCinderAttachment, ForceDetachVolume, false, ServerRunning}}},
		{"paused server that does not list the volume -> held",
			(&world{}).server("s1", state("PAUSED", "paused")).volume("v1").attachment("a1", "v1", "s1", "attached"),
			[]want{{StaleCinderAttachment, ForceDetachVolume, false, ServerRunning}}},
		{"server migrating -> held",
			(&world{}).server("s1", task("migrating")).volume("v1").attachment("a1", "v1", "s1", "attached"),
			[]want{{StaleCinderAttachment, ForceDetachVolume, false, ServerTaskState}}},
		{"server building -> held",
			(&world{}).server("s1", vmState("building")).volume("v1").attachment("a1", "v1", "s1", "attached"),
			[]want{{StaleCinderAttachment, ForceDetachVolume, false, ServerTransitional}}},
		{"resize awaiting confirmation -> held",
			(&world{}).server("s1", vmState("resized")).volume("v1").attachment("a1", "v1", "s1", "attached"),
			[]want{{StaleCinderAttachment, ForceDetachVolume, false, ServerTransitional}}},
		{"volume attaching for 30s -> held",
			(&world{}).server("s1", stopped).volume("v1", status("attaching", 30*time.Second)).attachment("a1", "v1", "s1", "attaching"),
			[]want{{StaleCinderAttachment, ForceDetachVolume, false, VolumeTransitional}}},
		{"volume reserved for 30s for a gone server -> held",
			(&world{}).volume("v1", status("reserved", 30*time.Second)).attachment("a1", "v1", "ghost", "reserved").gone("ghost"),
			[]want{{StaleCinderAttachment, DeleteCinderAttachment, false, VolumeTransitional}}},
		{"volume reserved for 10m for a gone server -> delete",
			(&world{}).volume("v1", status("reserved", 10*time.Minute)).attachment("a1", "v1", "ghost", "reserved").gone("ghost"),
			[]want{{StaleCinderAttachment, DeleteCinderAttachment, true, ""}}},
		{"multiattach volume another server uses -> held",
			(&world{}).server("s2", lists("v1")).volume("v1", multiattach).
				attachment("a1", "v1", "ghost", "attached").gone("ghost").attachment("a2", "v1", "s2", "attached"),
			[]want{{StaleCinderAttachment, DeleteCinderAttachment, false, MultiattachInUse}}},
		{"multiattach volume with no other user -> delete",
			(&world{}).volume("v1", multiattach).attachment("a1", "v1", "ghost", "attached").gone("ghost"),
			[]want{{StaleCinderAttachment, DeleteCinderAttachment, true, ""}}},

		// Gone only on a 404 to a read by ID (issue 32): the lists are
		// narrowed to a project or to what the credentials see, and Cinder
		// filters attachments by their volume's project
		// (cinder/db/sqlalchemy/api.py:2474-2486), so an object the lists
		// leave out may exist.
		{"attachment for a server not listed and not read -> held, not gone",
			(&world{}).volume("v1").attachment("a1", "v1", "ghost", "attached"),
			[]want{{StaleCinderAttachment, DeleteCinderAttachment, false, Unconfirmed}}},
		{"attachment for a server whose read failed -> held, not gone",
			(&world{}).volume("v1").attachment("a1", "v1", "ghost", "attached").unread("ghost"),
			[]want{{StaleCinderAttachment, DeleteCinderAttachment, false, Unconfirmed}}},
		{"attachment for another project's server that lists the volume -> no finding",
			(&world{}).volume("v1").attachment("a1", "v1", "s9", "attached").outside((&world{}).server("s9", stopped, lists("v1"))),
			nil},
		{"attachment for another project's stopped server that does not list the volume -> held outside scope",
			(&world{}).volume("v1").attachment("a1", "v1", "s9", "attached").outside((&world{}).server("s9", stopped)),
			[]want{{StaleCinderAttachment, ForceDetachVolume, false, OutsideScope}}},
		{"mapping of a volume not listed whose read failed -> held, not gone",
			(&world{}).server("s1", stopped, lists("v1")).unread("v1"),
			[]want{{DanglingNovaAttachment, drift.None, false, Unconfirmed}}},
		{"mapping of another project's volume Cinder holds for the server -> no finding",
			(&world{}).server("s1", stopped, listsWith("v1", "a1", "/dev/vdb")).
				outside((&world{}).volume("v1").attachment("a1", "v1", "s1", "attached")),
			nil},
		{"mapping of another project's volume with no attachment for the server -> held outside scope",
			(&world{}).server("s1", stopped, listsWith("v1", "a1", "/dev/vdb")).gone("a1").
				outside((&world{}).volume("v1", status("available", time.Hour))),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, false, OutsideScope}}},
		{"mapping whose recorded attachment is not listed and not read -> held",
			(&world{}).server("s1", stopped, listsWith("v1", "a1", "/dev/vdb")).volume("v1", status("available", time.Hour)),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, false, Unconfirmed}}},
		{"mapping whose recorded attachment answered 404 -> recreate and detach",
			(&world{}).server("s1", stopped, listsWith("v1", "a1", "/dev/vdb")).volume("v1", status("available", time.Hour)).gone("a1"),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, true, ""}}},

		// LeftoverCinderAttachment: a second attachment of the volume for
		// the server, beside the one Nova's mapping records. Cinder deletes
		// a reserved attachment in its API alone (cinder/volume/api.py:
		// 2629-2631) and hands an attaching one, which has a connector, to
		// the volume service to terminate its connection (cinder/volume/
		// manager.py:4994-5002). A running server does not hold the
		// delete: a reservation has no connection to cut.
		{"reservation beside the attachment Nova records, server running -> delete the reservation",
			(&world{}).server("s1", listsWith("v1", "a1", "/dev/vdb")).volume("v1").
				attachment("a1", "v1", "s1", "attached").attachment("a2", "v1", "s1", "reserved"),
			[]want{{LeftoverCinderAttachment, DeleteCinderAttachment, true, ""}}},
		{"reservation beside Nova's attachment on a multiattach volume another server uses -> delete",
			(&world{}).server("s1", listsWith("v1", "a1", "/dev/vdb")).server("s2", listsWith("v1", "a3", "/dev/vdb")).volume("v1", multiattach).
				attachment("a1", "v1", "s1", "attached").attachment("a2", "v1", "s1", "reserved").attachment("a3", "v1", "s2", "attached"),
			[]want{{LeftoverCinderAttachment, DeleteCinderAttachment, true, ""}}},
		{"attaching attachment beside Nova's -> held (it has a connector)",
			(&world{}).server("s1", stopped, listsWith("v1", "a1", "/dev/vdb")).volume("v1").
				attachment("a1", "v1", "s1", "attached").attachment("a2", "v1", "s1", "attaching"),
			[]want{{LeftoverCinderAttachment, DeleteCinderAttachment, false, AttachmentConnected}}},
		{"reservation with connection info beside Nova's -> held",
			(&world{}).server("s1", stopped, listsWith("v1", "a1", "/dev/vdb")).volume("v1").
				attachment("a1", "v1", "s1", "attached").attachment("a2", "v1", "s1", "reserved").connected("a2"),
			[]want{{LeftoverCinderAttachment, DeleteCinderAttachment, false, AttachmentConnected}}},
		{"reservation beside Nova's, server migrating -> held",
			(&world{}).server("s1", task("migrating"), listsWith("v1", "a1", "/dev/vdb")).volume("v1").
				attachment("a1", "v1", "s1", "attached").attachment("a2", "v1", "s1", "reserved"),
			[]want{{LeftoverCinderAttachment, DeleteCinderAttachment, false, ServerTaskState}}},
		{"reservation beside Nova's, resize awaiting confirmation -> held",
			(&world{}).server("s1", vmState("resized"), listsWith("v1", "a1", "/dev/vdb")).volume("v1").
				attachment("a1", "v1", "s1", "attached").attachment("a2", "v1", "s1", "reserved"),
			[]want{{LeftoverCinderAttachment, DeleteCinderAttachment, false, ServerTransitional}}},
		{"reservation beside Nova's, volume attaching for 30s -> held",
			(&world{}).server("s1", listsWith("v1", "a1", "/dev/vdb")).volume("v1", status("attaching", 30*time.Second)).
				attachment("a1", "v1", "s1", "attached").attachment("a2", "v1", "s1", "reserved"),
			[]want{{LeftoverCinderAttachment, DeleteCinderAttachment, false, VolumeTransitional}}},
		{"reservation Nova's mapping records -> no finding (it is Nova's)",
			(&world{}).server("s1", listsWith("v1", "a2", "/dev/vdb")).volume("v1", status("reserved", time.Hour)).
				attachment("a2", "v1", "s1", "reserved"),
			nil},
		{"reservation beside Nova's attachment that is not attached yet -> no finding",
			(&world{}).server("s1", listsWith("v1", "a1", "/dev/vdb")).volume("v1").
				attachment("a1", "v1", "s1", "attaching").attachment("a2", "v1", "s1", "reserved"),
			nil},
		{"two attachments, mapping's attachment id not read -> no finding",
			(&world{}).server("s1", lists("v1")).volume("v1").
				attachment("a1", "v1", "s1", "attached").attachment("a2", "v1", "s1", "reserved"),
			nil},

		// DanglingNovaAttachment. Nova's mappings: servers detail
		// os-extended-volumes:volumes_attached and, with compute 2.89,
		// os-volume_attachments' attachment_id (api-ref
		// os-volume-attachments.inc); Nova never detaches the root disk
		// (nova/api/openstack/compute/volume_attachments.py: "Cannot detach
		// a root device volume").
		{"stopped server's mapping without a Cinder attachment, volume available -> recreate and detach",
			(&world{}).server("s1", stopped, lists("v1")).volume("v1", status("available", time.Hour)),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, true, ""}}},
		{"shelved-offloaded server's mapping without a Cinder attachment -> recreate and detach",
			(&world{}).server("s1", state("SHELVED_OFFLOADED", "shelved_offloaded"), lists("v1")).volume("v1", status("available", time.Hour)),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, true, ""}}},
		// `cinder reset-state` changes only Cinder's database: "this does
		// not affect whether the volume is actually attached to the Nova
		// compute host or instance" (python-cinderclient,
		// cinderclient/v3/shell.py do_reset_state). A guest that may run
		// can still use the disk Nova's detach would pull out.
		{"running server's mapping without a Cinder attachment -> held",
			(&world{}).server("s1", lists("v1")).volume("v1", status("available", time.Hour)),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, false, ServerRunning}}},
		{"suspended server's mapping -> held",
			(&world{}).server("s1", state("SUSPENDED", "suspended"), lists("v1")).volume("v1", status("available", time.Hour)),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, false, ServerRunning}}},
		{"rescued server's mapping -> held",
			(&world{}).server("s1", state("RESCUE", "rescued"), lists("v1")).volume("v1", status("available", time.Hour)),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, false, ServerRunning}}},
		{"server in ERROR -> held (its guest may still run)",
			(&world{}).server("s1", state("ERROR", "error"), lists("v1")).volume("v1", status("available", time.Hour)),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, false, ServerRunning}}},
		{"shelved server (still on its host) -> held",
			(&world{}).server("s1", state("SHELVED", "shelved"), lists("v1")).volume("v1", status("available", time.Hour)),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, false, ServerRunning}}},
		{"mapping whose attachment is reserved for the server -> no finding",
			(&world{}).server("s1", lists("v1")).volume("v1", status("reserved", time.Hour)).attachment("a1", "v1", "s1", "reserved"),
			nil},
		{"mapping with only a detached attachment -> finding",
			(&world{}).server("s1", stopped, lists("v1")).volume("v1", status("available", time.Hour)).attachment("a1", "v1", "s1", "detached"),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, true, ""}}},
		{"mapping of a volume Cinder answers 404 for -> no action",
			(&world{}).server("s1", lists("v1")).gone("v1"),
			[]want{{DanglingNovaAttachment, drift.None, false, VolumeGone}}},
		{"volume attached to another server -> no action, and no stale finding for it",
			(&world{}).server("s1", lists("v1")).server("s2", lists("v1")).volume("v1").attachment("a2", "v1", "s2", "attached"),
			[]want{{DanglingNovaAttachment, drift.None, false, AttachedElsewhere}}},
		{"recorded attachment belongs to another server -> no action",
			(&world{}).server("s1", listsWith("v1", "a2", "/dev/vdb")).server("s2", lists("v1")).volume("v1", multiattach).
				attachment("a2", "v1", "s2", "attached").attachment("a1", "v1", "s1", "attached"),
			[]want{{DanglingNovaAttachment, drift.None, false, AttachedElsewhere}}},
		{"root disk -> no action",
			(&world{}).server("s1", root("/dev/vda"), listsWith("v1", "a9", "/dev/vda")).volume("v1", status("available", time.Hour)),
			[]want{{DanglingNovaAttachment, drift.None, false, RootVolume}}},
		{"server rebuilding -> held",
			(&world{}).server("s1", task("rebuilding"), lists("v1")).volume("v1", status("available", time.Hour)),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, false, ServerTaskState}}},
		{"volume detaching for 10s -> held",
			(&world{}).server("s1", stopped, lists("v1")).volume("v1", status("detaching", 10*time.Second)),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, false, VolumeTransitional}}},
		{"volume in-use without any attachment -> busy",
			(&world{}).server("s1", stopped, lists("v1")).volume("v1", status("in-use", time.Hour)),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, false, VolumeBusy}}},
		{"multiattach volume another server uses -> held",
			(&world{}).server("s1", stopped, lists("v1")).server("s2", lists("v1")).volume("v1", multiattach).attachment("a2", "v1", "s2", "attached"),
			[]want{{DanglingNovaAttachment, RecreateAttachmentAndDetach, false, MultiattachInUse}}},
		{"deleted server's mappings -> no finding",
			(&world{}).server("s1", vmState("deleted"), lists("v1")).volume("v1", status("available", time.Hour)),
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Run(&tc.w.s, seenLongAgo(tc.w), now)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d findings, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				f := got[i]
				if f.Check != w.check || f.Action.Type != w.action || f.Action.Safe != w.safe || f.Action.BlockedBy != w.blocked {
					t.Errorf("finding %d: %s %s safe=%t blocked=%q, want %s %s safe=%t blocked=%q\nevidence: %s",
						i, f.Check, f.Action.Type, f.Action.Safe, f.Action.BlockedBy, w.check, w.action, w.safe, w.blocked, strings.Join(f.Evidence, "\n  "))
				}
				if f.Action.Remedy == "" || len(f.Evidence) < 2 || f.Message == "" {
					t.Errorf("finding %d lacks a message, evidence or remedy: %+v", i, f)
				}
			}
		})
	}
}

// Seen twice is one stage of the driver (internal/plan FirstSighting), not
// a hold of the checks: the pure check marks a ghost's attachment safe on
// its first observation, and the driver's stage holds it NotSeenTwice
// until the grace has passed since its first sighting.
func TestChecksLeaveSeenTwiceToTheDriver(t *testing.T) {
	w := (&world{}).volume("v1").attachment("a1", "v1", "ghost", "attached").gone("ghost")
	fs := Run(&w.s, Policy{Grace: time.Minute}, now)
	if len(fs) != 1 || !fs[0].Action.Safe {
		t.Fatalf("the check alone: want one safe finding, got %+v", fs)
	}
	held := plan.FirstSighting(slices.Clone(fs), plan.Memory{}, plan.Every(time.Minute), now, "fix")
	if held[0].Action.Safe || held[0].Action.BlockedBy != drift.NotSeenTwice {
		t.Fatalf("after the first-sighting stage with no earlier sighting: want held NotSeenTwice, got %+v", held[0].Action)
	}
}

func TestFindingNamesProjectAndSubject(t *testing.T) {
	w := (&world{}).server("s1", lists("v1")).volume("v1", status("available", time.Hour))
	w.s.Servers[0].Project = "proj-a"
	fs := Run(&w.s, Policy{}, now)
	if len(fs) != 1 {
		t.Fatalf("want 1 finding, got %d", len(fs))
	}
	f := fs[0]
	if f.Namespace != "proj-a" || f.Object.Kind != "Server" || f.Object.Name != "vm-s1" || f.Object.UID != "s1" || f.Volume != "v1" {
		t.Errorf("subject: %+v", f)
	}
	if f.ID != drift.FindingID(DanglingNovaAttachment, "proj-a", f.Object, "v1") {
		t.Errorf("id %s is not the FindingID of its subject", f.ID)
	}
}

func TestRunSelectsChecks(t *testing.T) {
	w := (&world{}).server("s1", lists("v1")).volume("v1", status("available", time.Hour)).attachment("a2", "v2", "ghost", "attached").gone("ghost")
	if fs := Run(&w.s, Policy{Checks: []string{StaleCinderAttachment}}, now); len(fs) != 1 || fs[0].Check != StaleCinderAttachment {
		t.Fatalf("--check StaleCinderAttachment: %+v", fs)
	}
	if _, err := Lookup("Nope"); err == nil || !strings.Contains(err.Error(), DanglingNovaAttachment) {
		t.Fatalf("Lookup of an unknown name: %v", err)
	}
}

// TestServerRunningSaysWhyAndHow: the hold names the server's state, why
// the repair would hurt (the guest may use the disk through the compute
// host's connection) and what to do (stop the server, confirm, run fix
// again).
func TestServerRunningSaysWhyAndHow(t *testing.T) {
	w := (&world{}).server("s1", lists("v1")).volume("v1", status("available", time.Hour)).
		server("s2").volume("v2").attachment("a2", "v2", "s2", "attached")
	fs := Run(&w.s, seenLongAgo(w), now)
	if len(fs) != 2 {
		t.Fatalf("want 2 findings, got %+v", fs)
	}
	for _, f := range fs {
		server := string(f.Object.UID)
		if f.Check == StaleCinderAttachment {
			server = "s2"
		}
		if f.Action.BlockedBy != ServerRunning {
			t.Fatalf("%s: blocked by %q, want ServerRunning", f.Check, f.Action.BlockedBy)
		}
		for _, want := range []string{"ACTIVE", "guest", "compute host", "openstack server stop " + server, "SHUTOFF", "tether openstack fix"} {
			if !strings.Contains(f.Action.Remedy, want) {
				t.Errorf("%s: remedy %q lacks %q", f.Check, f.Action.Remedy, want)
			}
		}
	}
}
