package check

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
	"github.com/tether-dev/tether/internal/plan"
)

// snapshotFrom builds a small snapshot from fuzz bytes: 3 servers, 3
// volumes, up to 6 attachments, with ids drawn from small sets so that
// records meet.
func snapshotFrom(data []byte) *snapshot.Snapshot {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	pick := func(xs []string) string { return xs[int(next())%len(xs)] }
	servers := []string{"s0", "s1", "s2", "s3"} // s3 is never listed
	volumes := []string{"v0", "v1", "v2", "v3"} // v3 is never listed
	vstat := []string{"available", "in-use", "reserved", "attaching", "detaching", "error", "maintenance"}
	astat := []string{"attached", "reserved", "attaching", "detached", "error_detaching", "deleted"}
	tasks := []string{"", "", "", "migrating", "resize_prep", "shelving", "deleting"}
	vms := []string{"active", "active", "stopped", "stopped", "building", "resized", "deleted", "soft-deleted",
		"shelved_offloaded", "shelved", "paused", "suspended", "rescued", "error"}
	s := &snapshot.Snapshot{}
	for _, id := range servers[:3] {
		sv := snapshot.Server{ID: id, Name: id, Project: "p", Status: "ACTIVE", TaskState: pick(tasks), VMState: pick(vms)}
		if next()%4 == 0 {
			sv.RootDevice = "/dev/vda"
		}
		for _, v := range volumes {
			if b := next(); b%3 == 0 {
				m := snapshot.ServerVolume{VolumeID: v, Device: pick([]string{"/dev/vda", "/dev/vdb"})}
				if b%2 == 0 {
					m.AttachmentID = pick([]string{"a0", "a1", "a2", "a3", "a4", "a5", "a9"})
				}
				sv.Volumes = append(sv.Volumes, m)
			}
		}
		s.Servers = append(s.Servers, sv)
	}
	for _, id := range volumes[:3] {
		s.Volumes = append(s.Volumes, snapshot.Volume{ID: id, Project: "p", Status: pick(vstat),
			Multiattach: next()%3 == 0, Updated: now.Add(-time.Duration(next()) * 5 * time.Second)})
	}
	for i := range int(next() % 7) {
		s.Attachments = append(s.Attachments, snapshot.Attachment{ID: fmt.Sprintf("a%d", i), VolumeID: pick(volumes),
			Instance: pick(servers), Status: pick(astat), Connected: next()%2 == 0})
	}
	// What reads by ID said of what the lists did not show: s3, v3 and a9
	// (and an attachment number the list did not reach) are gone, unread,
	// not read, or exist outside the lists.
	for _, id := range []string{"s3", "v3", "a9", pick([]string{"a4", "a5", "a6"})} {
		switch next() % 4 {
		case 0:
			s.Direct.MarkGone(id)
		case 1:
			s.Direct.MarkUnread(id, fmt.Errorf("503"))
		case 2:
			switch id[0] {
			case 's':
				sv := snapshot.Server{ID: id, Name: id, Project: "q", Status: "SHUTOFF", VMState: pick(vms)}
				if next()%2 == 0 {
					sv.Volumes = append(sv.Volumes, snapshot.ServerVolume{VolumeID: pick(volumes)})
				}
				s.Direct.Servers = append(s.Direct.Servers, sv)
			case 'v':
				s.Direct.Volumes = append(s.Direct.Volumes, snapshot.Volume{ID: id, Project: "q", Status: pick(vstat), Updated: now.Add(-time.Hour)})
			default:
				if !slices.ContainsFunc(s.Attachments, func(a snapshot.Attachment) bool { return a.ID == id }) {
					s.Direct.Attachments = append(s.Direct.Attachments, snapshot.Attachment{ID: id, VolumeID: pick(volumes),
						Instance: pick(servers), Status: pick(astat), Connected: next()%2 == 0})
				}
			}
		}
	}
	return s
}

// FuzzChecksNeverActUnsafely holds every safe action to the rules of
// Nova and Cinder, written here without the code under test:
//   - a finding is acted on only once first seen at least the grace period
//     before now;
//   - a Cinder attachment may be removed only when it is live and its
//     server is not listed, is deleted, or exists idle (no task_state,
//     vm_state neither building nor resized) and stopped without listing
//     the volume;
//   - a Nova mapping may be repaired only on an idle, stopped server that
//     lists the volume, when Cinder holds no live attachment of that volume
//     for that server, the volume is listed, available, and not the root
//     disk;
//   - stopped is vm_state stopped or shelved_offloaded: no guest on a
//     host (nova/compute/vm_states.py); in every other state the guest may
//     use the volume through the host's connection whatever the records
//     say;
//   - a volume in a transitional status younger than the grace period, or a
//     multiattach volume that another idle server lists and holds, is never
//     acted on;
//   - a second attachment of a volume for a server (beside the attached one
//     Nova's mapping records, for the same server and volume) may be
//     deleted only when it is reserved without connection info, listed, and
//     its server is listed and idle: Cinder then deletes it in its API
//     alone, with no connection to cut (cinder/volume/api.py:2629-2631), so
//     neither a running server nor other users of a multiattach volume
//     hold it;
//   - a server, volume or attachment that the lists do not show is gone
//     only when a read by ID answered 404: no finding calls a volume gone,
//     and no safe action rests on a server or attachment being gone,
//     without that 404; nor does a safe action rest on an object that
//     only a read by ID showed (outside the listed scope), unless that read
//     shows it deleted.
func FuzzChecksNeverActUnsafely(f *testing.F) {
	f.Add([]byte{0, 3, 0, 0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 1, 0})
	f.Add([]byte("stale and dangling attachments of nova and cinder"))
	const grace = time.Minute
	f.Fuzz(func(t *testing.T, data []byte) {
		s := snapshotFrom(data)
		before := deepCopy(s)
		first := plan.FirstSighting(Run(s, Policy{Grace: grace}, now), plan.Memory{}, plan.Every(grace), now, "fix")
		seen := plan.Memory{}
		for i, fd := range first {
			if fd.Action.Safe {
				t.Fatalf("a first observation is never safe: %+v", fd)
			}
			// Half seen long enough ago, half too recently.
			seen[fd.ID] = now.Add(-grace)
			if i%2 == 1 {
				seen[fd.ID] = now.Add(-grace + time.Second)
			}
		}
		fs := plan.FirstSighting(Run(s, Policy{Grace: grace}, now), seen, plan.Every(grace), now, "fix")
		if !reflect.DeepEqual(s, before) {
			t.Fatal("Run changed its snapshot")
		}
		if again := plan.FirstSighting(Run(s, Policy{Grace: grace}, now), seen, plan.Every(grace), now, "fix"); !reflect.DeepEqual(fs, again) {
			t.Fatal("Run is not deterministic")
		}
		server := func(id string) *snapshot.Server {
			for _, xs := range [][]snapshot.Server{s.Servers, s.Direct.Servers} {
				for i := range xs {
					if xs[i].ID == id {
						return &xs[i]
					}
				}
			}
			return nil
		}
		volume := func(id string) *snapshot.Volume {
			for _, xs := range [][]snapshot.Volume{s.Volumes, s.Direct.Volumes} {
				for i := range xs {
					if xs[i].ID == id {
						return &xs[i]
					}
				}
			}
			return nil
		}
		outside := func(id string) bool {
			return slices.ContainsFunc(s.Direct.Servers, func(x snapshot.Server) bool { return x.ID == id }) ||
				slices.ContainsFunc(s.Direct.Volumes, func(x snapshot.Volume) bool { return x.ID == id }) ||
				slices.ContainsFunc(s.Direct.Attachments, func(x snapshot.Attachment) bool { return x.ID == id })
		}
		attachment := func(id string) *snapshot.Attachment {
			for _, xs := range [][]snapshot.Attachment{s.Attachments, s.Direct.Attachments} {
				for i := range xs {
					if xs[i].ID == id {
						return &xs[i]
					}
				}
			}
			return nil
		}
		for _, fd := range fs {
			if fd.Action.BlockedBy == VolumeGone && (volume(fd.Volume) != nil || !s.Direct.Gone[fd.Volume]) {
				t.Fatalf("volume %s called gone without a 404: %+v", fd.Volume, fd)
			}
		}
		listed := func(sv *snapshot.Server, v string) bool {
			return sv != nil && slices.ContainsFunc(sv.Volumes, func(m snapshot.ServerVolume) bool { return m.VolumeID == v })
		}
		idle := func(sv *snapshot.Server) bool {
			return sv.TaskState == "" && sv.VMState != "building" && sv.VMState != "resized"
		}
		deleted := func(sv *snapshot.Server) bool { return sv == nil || sv.VMState == "deleted" }
		stopped := func(sv *snapshot.Server) bool {
			return sv.VMState == "stopped" || sv.VMState == "shelved_offloaded"
		}
		live := func(st string) bool { return st != "detached" && st != "deleted" }
		transitional := map[string]bool{"reserved": true, "attaching": true, "detaching": true, "maintenance": true}
		for _, fd := range fs {
			if !fd.Action.Safe {
				continue
			}
			if seen[fd.ID].Add(grace).After(now) {
				t.Fatalf("safe although seen less than the grace ago: %+v", fd)
			}
			v := volume(fd.Volume)
			if v != nil && transitional[v.Status] && now.Sub(v.Updated) < grace {
				t.Fatalf("safe on a volume %s for %s: %+v", v.Status, now.Sub(v.Updated), fd)
			}
			subject := string(fd.Object.UID)
			if fd.Check == LeftoverCinderAttachment {
				leftoverSafe(t, fd, attachment, server, outside, idle, deleted)
				continue
			}
			if fd.Check == StaleCinderAttachment {
				var at *snapshot.Attachment
				for i := range s.Attachments {
					if s.Attachments[i].ID == fd.Object.Name {
						at = &s.Attachments[i]
					}
				}
				if at == nil || !live(at.Status) {
					t.Fatalf("safe on an attachment that is not live: %+v", fd)
				}
				subject = at.Instance
				sv := server(at.Instance)
				if sv == nil && !s.Direct.Gone[at.Instance] {
					t.Fatalf("safe on an attachment whose server %s no read by ID answered 404 for: %+v", at.Instance, fd)
				}
				if outside(at.Instance) && !deleted(sv) {
					t.Fatalf("safe on an attachment whose server %s exists outside the lists: %+v", at.Instance, fd)
				}
				if !deleted(sv) && (listed(sv, at.VolumeID) || !idle(sv) || !stopped(sv)) {
					t.Fatalf("safe on an attachment whose server %+v lists the volume, is busy or may run: %+v", sv, fd)
				}
			} else {
				sv := server(subject)
				if deleted(sv) || !idle(sv) || !stopped(sv) || !listed(sv, fd.Volume) {
					t.Fatalf("safe repair of a mapping on server %+v: %+v", sv, fd)
				}
				for _, at := range s.Attachments {
					if at.VolumeID == fd.Volume && at.Instance == subject && live(at.Status) {
						t.Fatalf("safe repair although Cinder holds %+v: %+v", at, fd)
					}
				}
				for _, at := range s.Direct.Attachments {
					if at.VolumeID == fd.Volume && at.Instance == subject && live(at.Status) {
						t.Fatalf("safe repair although a read by ID shows %+v: %+v", at, fd)
					}
				}
				if v == nil || v.Status != "available" || outside(v.ID) {
					t.Fatalf("safe repair of a volume that is not available, or outside the lists: %+v", fd)
				}
				for _, m := range sv.Volumes {
					if m.VolumeID == fd.Volume && sv.RootDevice != "" && m.Device == sv.RootDevice {
						t.Fatalf("safe repair of the root disk: %+v", fd)
					}
					if m.VolumeID == fd.Volume && m.AttachmentID != "" && attachment(m.AttachmentID) == nil && !s.Direct.Gone[m.AttachmentID] {
						t.Fatalf("safe repair although the recorded attachment %s was not read as gone: %+v", m.AttachmentID, fd)
					}
				}
			}
			if v != nil && v.Multiattach {
				for _, at := range s.Attachments {
					if other := server(at.Instance); at.VolumeID == v.ID && at.Instance != subject && live(at.Status) && !deleted(other) && listed(other, v.ID) {
						t.Fatalf("safe on a multiattach volume %s that %s uses: %+v", v.ID, at.Instance, fd)
					}
				}
			}
		}
	})
}

// leftoverSafe holds a safe LeftoverCinderAttachment finding to the rule
// of the oracle above.
func leftoverSafe(t *testing.T, fd drift.Finding, attachment func(string) *snapshot.Attachment, server func(string) *snapshot.Server,
	outside func(string) bool, idle, deleted func(*snapshot.Server) bool) {
	t.Helper()
	at := attachment(fd.Object.Name)
	if at == nil || outside(at.ID) || at.Status != "reserved" || at.Connected {
		t.Fatalf("safe delete of an attachment that is not a listed reservation without connection info: %+v (%+v)", fd, at)
	}
	sv := server(at.Instance)
	if deleted(sv) || outside(sv.ID) || !idle(sv) {
		t.Fatalf("safe delete of a reservation whose server %+v is gone, outside the lists or busy: %+v", sv, fd)
	}
	i := slices.IndexFunc(sv.Volumes, func(m snapshot.ServerVolume) bool { return m.VolumeID == at.VolumeID })
	if i < 0 || sv.Volumes[i].AttachmentID == "" || sv.Volumes[i].AttachmentID == at.ID {
		t.Fatalf("safe delete of a reservation that Nova's mapping records, or beside no recorded attachment: %+v", fd)
	}
	used := attachment(sv.Volumes[i].AttachmentID)
	if used == nil || used.Status != "attached" || used.Instance != sv.ID || used.VolumeID != at.VolumeID {
		t.Fatalf("safe delete of a reservation beside %+v, which is not the server's attached attachment: %+v", used, fd)
	}
}

func deepCopy(s *snapshot.Snapshot) *snapshot.Snapshot {
	c := *s
	c.Servers = slices.Clone(s.Servers)
	for i := range c.Servers {
		c.Servers[i].Volumes = slices.Clone(s.Servers[i].Volumes)
	}
	c.Volumes = slices.Clone(s.Volumes)
	c.Attachments = slices.Clone(s.Attachments)
	return &c
}
