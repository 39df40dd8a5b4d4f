package openstack

import (
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// One source listing none of what the other's records imply, past
// AnomalyFloor, is an anomaly; an empty cloud, or fewer, is not.
func TestAnomalies(t *testing.T) {
	servers := func(n int) []snapshot.Server {
		var out []snapshot.Server
		for i := 0; i < n; i++ {
			out = append(out, snapshot.Server{ID: "s", Volumes: []snapshot.ServerVolume{{VolumeID: "v"}}})
		}
		return out
	}
	inUse := func(n int) []snapshot.Volume {
		var out []snapshot.Volume
		for i := 0; i < n; i++ {
			out = append(out, snapshot.Volume{ID: "v", Status: "in-use"})
		}
		return out
	}
	cases := []struct {
		name string
		s    snapshot.Snapshot
		want string
	}{
		{"an empty cloud", snapshot.Snapshot{}, ""},
		{"Cinder lists no volume", snapshot.Snapshot{Servers: servers(AnomalyFloor)}, "Nova lists 10 servers with volumes, but Cinder lists no volume"},
		{"a few servers, no volume", snapshot.Snapshot{Servers: servers(AnomalyFloor - 1)}, ""},
		{"no attachment record", snapshot.Snapshot{Servers: servers(1), Volumes: inUse(AnomalyFloor)}, "Cinder lists 10 volumes in-use, but no attachment record"},
		{"Nova lists no server with a volume", snapshot.Snapshot{Volumes: inUse(AnomalyFloor), Attachments: []snapshot.Attachment{{ID: "a"}}}, "Nova lists no server with a volume"},
		{"consistent", snapshot.Snapshot{Servers: servers(AnomalyFloor), Volumes: inUse(AnomalyFloor), Attachments: []snapshot.Attachment{{ID: "a"}}}, ""},
	}
	for _, c := range cases {
		got := strings.Join(Anomalies(&c.s), "; ")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: anomalies %q, want %q", c.name, got, c.want)
		}
	}
}
