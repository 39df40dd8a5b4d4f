package doctor

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/tether-dev/tether/internal/openstack/observe"
)

// Options say what the gatherer may do beyond reading.
type Options struct {
	// GuardVolume, when set, is an available volume with no attachments to
	// probe Cinder's attachment guard with (see GuardProbe).
	GuardVolume string
	// Servers bounds how many servers' instance actions are read, the most
	// recently updated first (default 50).
	Servers int
	// ActionsPerServer bounds the detach actions read per server (default
	// 3).
	ActionsPerServer int
}

// Gather reads the facts with c. It writes nothing; with o.GuardVolume it
// sends one os-detach that Cinder's guard refuses, and that has nothing to
// detach without it.
func Gather(ctx context.Context, c *observe.Clients, o Options) Facts {
	if o.Servers <= 0 {
		o.Servers = 50
	}
	if o.ActionsPerServer <= 0 {
		o.ActionsPerServer = 3
	}
	var f Facts
	f.Compute = versionDoc(ctx, c.Compute, "/v2.1", "/v2")
	f.BlockStorage = versionDoc(ctx, c.BlockStorage, "/v3")
	f.Admin = []Right{
		right(ctx, c.Compute, "Nova: list servers of all projects", c.Compute.ServiceURL("servers")+"?all_tenants=True&limit=1"),
		right(ctx, c.BlockStorage, "Cinder: list its services (os-services)", c.BlockStorage.ServiceURL("os-services")),
	}
	if o.GuardVolume != "" {
		f.Guard = probeGuard(ctx, c.BlockStorage, o.GuardVolume)
	}
	f.Detaches, f.DetachesNote = detaches(ctx, c.Compute, o)
	return f
}

// statusOf is the HTTP status of a gophercloud error (0 without one).
func statusOf(err error) (int, string) {
	var e gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &e) {
		return e.Actual, string(e.Body)
	}
	return 0, ""
}

// versionDoc reads the version document of the API at the root of c's
// endpoint ending in one of prefixes ("/v2.1", "/v3").
func versionDoc(ctx context.Context, c *gophercloud.ServiceClient, prefixes ...string) Service {
	base := c.ResourceBaseURL()
	root := ""
	for _, p := range prefixes {
		if i := strings.Index(base, p+"/"); i >= 0 {
			root = base[:i+len(p)+1]
			break
		}
	}
	if root == "" {
		return Service{Err: fmt.Sprintf("endpoint %s names no API version (%s)", base, strings.Join(prefixes, ", "))}
	}
	type version struct {
		ID         string `json:"id"`
		Version    string `json:"version"`
		MinVersion string `json:"min_version"`
	}
	var doc struct {
		Version  *version  `json:"version"`
		Versions []version `json:"versions"`
	}
	if _, err := c.Get(ctx, root, &doc, &gophercloud.RequestOpts{OkCodes: []int{200, 300}, OmitHeaders: []string{"OpenStack-API-Version", "X-OpenStack-Nova-API-Version"}}); err != nil {
		return Service{Err: err.Error()}
	}
	if doc.Version != nil {
		doc.Versions = append(doc.Versions, *doc.Version)
	}
	for _, v := range doc.Versions {
		if v.Version != "" {
			return Service{Max: v.Version, Min: v.MinVersion}
		}
	}
	return Service{Err: "the version document at " + root + " names no microversion"}
}

// right tries one admin-only read.
func right(ctx context.Context, c *gophercloud.ServiceClient, what, u string) Right {
	var body any
	_, err := c.Get(ctx, u, &body, &gophercloud.RequestOpts{OkCodes: []int{200}})
	if err == nil {
		return Right{What: what, Code: 200}
	}
	code, _ := statusOf(err)
	return Right{What: what, Code: code, Err: err.Error()}
}

// probeGuard sends os-detach of volume with an attachment ID that does
// not exist, after checking that the volume is available and has no
// attachment (so that, without the guard, there is nothing to detach).
func probeGuard(ctx context.Context, c *gophercloud.ServiceClient, volume string) *GuardProbe {
	p := &GuardProbe{Volume: volume}
	var v struct {
		Volume struct {
			Status      string `json:"status"`
			Attachments []any  `json:"attachments"`
		} `json:"volume"`
	}
	if _, err := c.Get(ctx, c.ServiceURL("volumes", url.PathEscape(volume)), &v, nil); err != nil {
		p.Skipped = "reading the volume: " + err.Error()
		return p
	}
	if v.Volume.Status != "available" || len(v.Volume.Attachments) > 0 {
		p.Skipped = fmt.Sprintf("volume %s is %s with %d attachments; name an available volume with none", volume, v.Volume.Status, len(v.Volume.Attachments))
		return p
	}
	body := map[string]any{"os-detach": map[string]string{"attachment_id": randomID()}}
	_, err := c.Post(ctx, c.ServiceURL("volumes", url.PathEscape(volume), "action"), body, nil, &gophercloud.RequestOpts{OkCodes: []int{202}})
	if err == nil {
		p.Code = 202
		return p
	}
	p.Code, p.Message = statusOf(err)
	if p.Code == 0 {
		p.Err = err.Error()
	}
	return p
}

// detaches reads Nova's detach_volume actions of the most recently
// updated servers of every project, newest first.
func detaches(ctx context.Context, c *gophercloud.ServiceClient, o Options) ([]Detach, string) {
	var list struct {
		Servers []struct {
			ID string `json:"id"`
		} `json:"servers"`
	}
	u := fmt.Sprintf("%s?all_tenants=True&limit=%d&sort_key=updated_at&sort_dir=desc", c.ServiceURL("servers"), o.Servers)
	if _, err := c.Get(ctx, u, &list, nil); err != nil {
		return nil, "listing servers: " + err.Error()
	}
	var out []Detach
	for _, s := range list.Servers {
		d, err := serverDetaches(ctx, c, s.ID, o.ActionsPerServer)
		if err != nil {
			return out, fmt.Sprintf("reading the instance actions of server %s: %v", s.ID, err)
		}
		out = append(out, d...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	return out, fmt.Sprintf("the instance actions of the %d most recently updated servers", len(list.Servers))
}

// serverDetaches reads a server's newest detach_volume actions with their
// events (details, and for admins the traceback).
func serverDetaches(ctx context.Context, c *gophercloud.ServiceClient, server string, most int) ([]Detach, error) {
	var actions struct {
		Actions []struct {
			Action    string `json:"action"`
			RequestID string `json:"request_id"`
		} `json:"instanceActions"`
	}
	if _, err := c.Get(ctx, c.ServiceURL("servers", server, "os-instance-actions"), &actions, nil); err != nil {
		return nil, err
	}
	var out []Detach
	for _, a := range actions.Actions {
		if a.Action != "detach_volume" || len(out) == most {
			continue
		}
		var detail struct {
			Action struct {
				StartTime string `json:"start_time"`
				Events    []struct {
					Event     string `json:"event"`
					Result    string `json:"result"`
					Details   string `json:"details"`
					Traceback string `json:"traceback"`
				} `json:"events"`
			} `json:"instanceAction"`
		}
		if _, err := c.Get(ctx, c.ServiceURL("servers", server, "os-instance-actions", a.RequestID), &detail, nil); err != nil {
			return out, err
		}
		d := Detach{Server: server, RequestID: a.RequestID, Time: parseTime(detail.Action.StartTime)}
		done := false
		for _, e := range detail.Action.Events {
			// Only nova-compute's detach deletes an attachment with a
			// connection, which Cinder's guard checks; a shelved-offloaded
			// server's (api_detach_volume) proves nothing either way.
			if e.Event != "compute_detach_volume" {
				continue
			}
			done = e.Result != ""
			d.Failed = e.Result == "Error"
			d.Details, d.Traceback = e.Details, e.Traceback
		}
		if done {
			out = append(out, d)
		}
	}
	return out, nil
}

// parseTime reads Nova's times ("2026-11-26T18:00:00.000000", UTC).
func parseTime(s string) time.Time {
	for _, layout := range []string{"2006-01-02T15:04:05.999999", time.RFC3339Nano, "2006-01-02T15:04:05Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// randomID is a random UUID (version 4): an attachment ID no attachment
// has.
func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
