package openstack

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// Target is the one server, volume or Cinder attachment that --object
// names, as one observation knows it.
type Target struct {
	// Kind is Server, Volume or Attachment.
	Kind string
	ID   string
	// Name is the server's or volume's name ("" for an attachment).
	Name string
}

func (t Target) String() string {
	if t.Name != "" && t.Name != t.ID {
		return fmt.Sprintf("%s %s (%s)", strings.ToLower(t.Kind), t.ID, t.Name)
	}
	return strings.ToLower(t.Kind) + " " + t.ID
}

// Resolve finds the object that --object names in s: a server or volume
// by ID or name, or a Cinder attachment by ID, optionally written
// PROJECT/NAME as the findings' table shows it. A server that only a Cinder
// attachment names (Nova does not have it) is found by its ID. An object
// s does not know, and a name several objects share, is an error that
// says what was read and how to name the object instead: an empty success
// would read as "no drift about it".
func Resolve(s *snapshot.Snapshot, object string) (Target, error) {
	name, project := object, ""
	if p, n, ok := strings.Cut(object, "/"); ok {
		project, name = p, n
	}
	if name == "" {
		return Target{}, fmt.Errorf("--object %q names nothing: give a server's or volume's ID or name (or PROJECT/NAME)", object)
	}
	var byID, byName []Target
	for _, c := range candidates(s) {
		switch {
		case project != "" && c.project != project:
		case c.ID == name:
			byID = append(byID, c.Target)
		case c.Name == name:
			byName = append(byName, c.Target)
		}
	}
	for _, a := range allAttachments(s) {
		switch {
		case a.ID == name:
			byID = append(byID, Target{Kind: "Attachment", ID: a.ID})
		case a.Instance == name && project == "":
			// A server Nova does not list, named by an attachment.
			byID = append(byID, Target{Kind: "Server", ID: a.Instance})
		}
	}
	byID = unique(byID)
	switch {
	case len(byID) == 1:
		return byID[0], nil
	case len(byID) > 1:
		return Target{}, fmt.Errorf("--object %q is the ID of %s: cannot tell which one is meant", object, list(byID))
	case len(byName) == 1:
		return byName[0], nil
	case len(byName) > 1:
		return Target{}, fmt.Errorf("--object %q names %s: pass the ID of the one you mean", object, list(byName))
	}
	scope := "every project"
	if project != "" {
		scope = "project " + project
	}
	return Target{}, fmt.Errorf("--object %q: no server, volume or Cinder attachment in %s has this ID or name (read: %d servers, %d volumes, %d attachments; --project narrows what is read); check it with `openstack server show %s` or `openstack volume show %s`",
		object, scope, len(s.Servers), len(s.Volumes), len(s.Attachments), name, name)
}

// About reports whether finding f is about t: a finding on the server (its
// mapping) or on an attachment held for the server, a finding on the
// volume, or the attachment itself.
func (t Target) About(s *snapshot.Snapshot, f drift.Finding) bool {
	switch t.Kind {
	case "Volume":
		return f.Volume == t.ID
	case "Attachment":
		return f.Object.Kind == "Attachment" && string(f.Object.UID) == t.ID
	}
	if f.Object.Kind == "Server" {
		return string(f.Object.UID) == t.ID
	}
	for _, a := range allAttachments(s) {
		if a.ID == string(f.Object.UID) {
			return a.Instance == t.ID
		}
	}
	return false
}

// candidate is a server or volume --object may name, with its project.
type candidate struct {
	Target
	project string
}

// candidates are the servers and volumes of s, listed or read by ID.
func candidates(s *snapshot.Snapshot) []candidate {
	var out []candidate
	for _, sv := range append(slices.Clip(s.Servers), s.Direct.Servers...) {
		out = append(out, candidate{Target{Kind: "Server", ID: sv.ID, Name: sv.Name}, sv.Project})
	}
	for _, v := range append(slices.Clip(s.Volumes), s.Direct.Volumes...) {
		out = append(out, candidate{Target{Kind: "Volume", ID: v.ID, Name: v.Name}, v.Project})
	}
	return out
}

func allAttachments(s *snapshot.Snapshot) []snapshot.Attachment {
	return append(slices.Clip(s.Attachments), s.Direct.Attachments...)
}

// unique keeps the first target of each kind and ID (a server's own entry,
// with its name, before the attachments that name it).
func unique(ts []Target) []Target {
	var out []Target
	for _, t := range ts {
		if !slices.ContainsFunc(out, func(o Target) bool { return o.Kind == t.Kind && o.ID == t.ID }) {
			out = append(out, t)
		}
	}
	return out
}

func list(ts []Target) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
	}
	return strings.Join(parts, ", ")
}
