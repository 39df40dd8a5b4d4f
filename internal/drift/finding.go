package drift

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

// Severity says whether a finding is a proven problem or information.
type Severity string

// Rank orders severities: info 1, warning 2, critical 3 (0 for unknown).
func (s Severity) Rank() int {
	switch s {
	case SeverityInfo:
		return 1
	case SeverityWarning:
		return 2
	case SeverityCritical:
		return 3
	}
	return 0
}

// Severities, from the highest.
const (
	// SeverityCritical marks a problem that also stops the platform's work
	// on other objects (a hot-plug volume whose PVC is missing freezes every
	// hot-plug attach and detach of its VMI).
	SeverityCritical Severity = "critical"
	// SeverityWarning marks an orphan: something nothing wants.
	SeverityWarning Severity = "warning"
	// SeverityInfo marks a divergence that is legitimate or not proven.
	SeverityInfo Severity = "info"
)

// ActionType is what would fix a finding (contract: it appears in JSON
// output and plans). Each platform defines its own; None is shared.
type ActionType string

// None means no action can fix the finding.
const None ActionType = "None"

// BlockReason says why a proposed action is not safe now (contract: it
// appears in JSON output). Each names the fact that has to change, and the
// remedy says how to change it by hand. Each platform defines its own; the
// ones below are the driver's and every platform's.
type BlockReason string

const (
	// NotRequested: the action is destructive and was not asked for.
	NotRequested BlockReason = "NotRequested"
	// NotSeenTwice: the platform acts only on a finding observed twice, the
	// grace period apart, and this one has not been (the first-sighting
	// stage of the driver, internal/plan).
	NotSeenTwice BlockReason = "NotSeenTwice"
)

// BlockClass says what a block reason tells of its finding beyond "the
// action waits": whether the check could judge the subject at all. Reports
// that grade findings read it (a policy report's result is error or skip
// for the two classes below). Each platform classifies its own reasons
// (its check package's BlockClassOf).
type BlockClass int

const (
	// Judged: the finding stands as its severity says; the reason only
	// holds the action. The zero value, and the class of every reason a
	// platform does not classify (NotRequested and NotSeenTwice among
	// them).
	Judged BlockClass = iota
	// Unreadable: evidence the check needs could not be read, so the
	// subject could not be judged.
	Unreadable
	// MidChange: the subject is changing under someone else's hand right
	// now (being deleted, migrated, attached, detached); the next pass
	// judges it.
	MidChange
)

// ObjectRef names the subject of a finding.
type ObjectRef struct {
	Kind string    `json:"kind"`
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

// Action is the proposed fix: safe, or blocked with the reason, and always
// the manual procedure.
type Action struct {
	Type      ActionType  `json:"type"`
	Safe      bool        `json:"safe"`
	BlockedBy BlockReason `json:"blockedBy,omitempty"`
	Remedy    string      `json:"remedy"`
}

// Finding is one thing a check found (contract: its JSON form is part of
// `tether audit -o json`). Namespace is the scope the object lives in: a
// Kubernetes namespace, or an OpenStack project.
type Finding struct {
	ID        string `json:"id"`
	Check     string `json:"check"`
	Namespace string `json:"namespace"`
	// Cluster names the cluster the subject lives in when it is not the
	// one tether reads: a tenant cluster's name ("" otherwise).
	Cluster  string    `json:"cluster,omitempty"`
	Object   ObjectRef `json:"object"`
	Volume   string    `json:"volume"`
	Severity Severity  `json:"severity"`
	Message  string    `json:"message"`
	// Evidence are short facts a human can verify with the platform's own
	// client (kubectl, the openstack CLI).
	Evidence []string `json:"evidence"`
	Action   Action   `json:"action"`

	// text, when set, writes the finding's words (Deferred).
	text func() Text
}

// Text is a finding's words: its message, the evidence its check gives
// and the remedy.
type Text struct {
	Message  string
	Evidence []string
	Remedy   string
}

// Defer drops f's message, evidence and remedy, and has text write them
// again when they are asked for (Write). An audit of hundreds of thousands
// of findings then holds their facts, not their words, until it prints
// each: text must give what f held, from facts that do not change.
// Evidence added to f afterwards (Block) comes after text's.
func (f *Finding) Defer(text func() Text) {
	f.Message, f.Evidence, f.Action.Remedy, f.text = "", nil, "", text
}

// Deferred reports whether f's words are still to be written.
func (f *Finding) Deferred() bool { return f.text != nil }

// Write writes f's deferred words into it; a finding whose words are
// written is left alone.
func (f *Finding) Write() {
	if f.text == nil {
		return
	}
	t := f.text()
	f.Message, f.Action.Remedy, f.text = t.Message, t.Remedy, nil
	f.Evidence = append(t.Evidence, f.Evidence...)
}

// Written returns a copy of f with its words written; f keeps its words
// deferred, so that they are garbage once the copy is.
func (f *Finding) Written() Finding {
	c := *f
	c.Write()
	return c
}

// WriteAll writes the deferred words of every finding of fs.
func WriteAll(fs []Finding) {
	for i := range fs {
		fs[i].Write()
	}
}

// TextOf returns f's words as they are now.
func TextOf(f Finding) Text {
	return Text{Message: f.Message, Evidence: f.Evidence, Remedy: f.Action.Remedy}
}

// Block marks f's action not safe for reason and adds the fact that says
// why to its evidence.
func (f *Finding) Block(reason BlockReason, fact string) {
	f.Action.Safe, f.Action.BlockedBy = false, reason
	if fact != "" {
		f.Evidence = append(f.Evidence, fact)
	}
}

// FindingID is the stable id of a finding: the first 12 hex digits of the
// SHA-256 of check/namespace/kind/name/uid/volume.
func FindingID(check, ns string, obj ObjectRef, volume string) string {
	h := sha256.New()
	for i, part := range []string{check, ns, obj.Kind, obj.Name, string(obj.UID), volume} {
		if i > 0 {
			h.Write([]byte{'/'})
		}
		h.Write([]byte(part))
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:6])
}

// DerivedID is the id FindingID gives f's parts; a subject in another
// cluster (Cluster) counts that cluster's name with the volume.
func (f Finding) DerivedID() string {
	v := f.Volume
	if f.Cluster != "" {
		v += "@" + f.Cluster
	}
	return FindingID(f.Check, f.Namespace, f.Object, v)
}

// Qualified names an object as "namespace/name", or "name" when it is
// cluster-scoped (ns is empty).
func Qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
