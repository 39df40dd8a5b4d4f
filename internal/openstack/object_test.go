package openstack

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// objects is a cloud with two servers of one name, a volume named like a
// server of another project, an attachment of a server Nova does not have,
// and a volume only a read by ID showed.
func objects() *snapshot.Snapshot {
	return &snapshot.Snapshot{
		Servers: []snapshot.Server{
			{ID: "srv-1", Name: "web", Project: "p1"},
			{ID: "srv-2", Name: "web", Project: "p2"},
			{ID: "srv-3", Name: "db", Project: "p1"},
		},
		Volumes: []snapshot.Volume{
			{ID: "vol-1", Name: "data", Project: "p1"},
			{ID: "vol-2", Name: "db", Project: "p2"},
		},
		Attachments: []snapshot.Attachment{
			{ID: "att-1", VolumeID: "vol-1", Instance: "ghost-1"},
			{ID: "att-2", VolumeID: "vol-2", Instance: "srv-3"},
		},
		Direct: snapshot.Direct{Volumes: []snapshot.Volume{{ID: "vol-9", Name: "elsewhere", Project: "p9"}}},
	}
}

// --object names one server, volume or attachment, by ID or name (in a
// project with PROJECT/NAME); a name two objects share asks for the ID,
// and an object nobody read is an error naming what was read.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		object string
		want   Target
		err    string
	}{
		{object: "srv-1", want: Target{Kind: "Server", ID: "srv-1", Name: "web"}},
		{object: "data", want: Target{Kind: "Volume", ID: "vol-1", Name: "data"}},
		{object: "p2/web", want: Target{Kind: "Server", ID: "srv-2", Name: "web"}},
		{object: "p1/db", want: Target{Kind: "Server", ID: "srv-3", Name: "db"}},
		{object: "att-2", want: Target{Kind: "Attachment", ID: "att-2"}},
		{object: "p1/att-2", want: Target{Kind: "Attachment", ID: "att-2"}},
		{object: "ghost-1", want: Target{Kind: "Server", ID: "ghost-1"}},
		{object: "srv-3", want: Target{Kind: "Server", ID: "srv-3", Name: "db"}},
		{object: "elsewhere", want: Target{Kind: "Volume", ID: "vol-9", Name: "elsewhere"}},
		{object: "web", err: "server srv-1 (web), server srv-2 (web): pass the ID"},
		{object: "db", err: "server srv-3 (db), volume vol-2 (db): pass the ID"},
		{object: "nope", err: "no server, volume or Cinder attachment in every project has this ID or name (read: 3 servers, 2 volumes, 2 attachments"},
		{object: "p2/data", err: "in project p2"},
		{object: "p1/", err: "names nothing"},
	} {
		got, err := Resolve(objects(), tc.object)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error saying %q", tc.object, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %+v, %v; want %+v", tc.object, got, err, tc.want)
		}
	}
}

// A finding is about a server when it is on the server (a mapping) or on
// an attachment held for it; about a volume when it names the volume.
func TestTargetAbout(t *testing.T) {
	s := objects()
	onServer := drift.Finding{Object: drift.ObjectRef{Kind: "Server", UID: types.UID("srv-3")}, Volume: "vol-7"}
	onAttachment := drift.Finding{Object: drift.ObjectRef{Kind: "Attachment", UID: types.UID("att-2")}, Volume: "vol-2"}
	ghost := drift.Finding{Object: drift.ObjectRef{Kind: "Attachment", UID: types.UID("att-1")}, Volume: "vol-1"}
	for _, tc := range []struct {
		t    Target
		f    drift.Finding
		want bool
	}{
		{Target{Kind: "Server", ID: "srv-3"}, onServer, true},
		{Target{Kind: "Server", ID: "srv-3"}, onAttachment, true},
		{Target{Kind: "Server", ID: "srv-3"}, ghost, false},
		{Target{Kind: "Server", ID: "ghost-1"}, ghost, true},
		{Target{Kind: "Volume", ID: "vol-2"}, onAttachment, true},
		{Target{Kind: "Volume", ID: "vol-2"}, onServer, false},
		{Target{Kind: "Attachment", ID: "att-1"}, ghost, true},
		{Target{Kind: "Attachment", ID: "att-1"}, onAttachment, false},
	} {
		if got := tc.t.About(s, tc.f); got != tc.want {
			t.Errorf("%s about %s/%s: %v, want %v", tc.t, tc.f.Object.Kind, tc.f.Object.UID, got, tc.want)
		}
	}
}
