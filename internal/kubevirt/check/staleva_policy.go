package check

import (
	"fmt"
	"time"
)

// Defaults of the storage checks.
const (
	// DefaultStaleAttachmentGrace: a VolumeAttachment that no pod needs is
	// reported only after this long (the attach/detach controller normally
	// detaches within seconds; its own forced path waits 6 minutes).
	DefaultStaleAttachmentGrace = 5 * time.Minute
	// DefaultMultiAttachGrace: a pod is reported as stuck on a volume held
	// elsewhere only after this long (a normal move detaches first).
	DefaultMultiAttachGrace = time.Minute
	// DefaultBlockedDeletionGrace: an object is reported as stuck
	// terminating only after this long.
	DefaultBlockedDeletionGrace = time.Minute
	// MinFenceGoneNodesAfter is the shortest accepted FenceGoneNodesAfter:
	// a live machine whose Node object was deleted by mistake re-registers
	// within that time.
	MinFenceGoneNodesAfter = time.Minute
)

// StoragePolicy is what an operator decides about the VolumeAttachment
// checks. The zero value is the conservative default: report only.
type StoragePolicy struct {
	// StaleAttachmentGrace: see DefaultStaleAttachmentGrace (zero means it).
	StaleAttachmentGrace time.Duration
	// MultiAttachGrace: see DefaultMultiAttachGrace (zero means it).
	MultiAttachGrace time.Duration
	// BlockedDeletionGrace: see DefaultBlockedDeletionGrace (zero means it).
	BlockedDeletionGrace time.Duration
	// FenceGoneNodesAfter, when positive, enables the rule "a Node object
	// that has been gone for longer than this is fenced". How long a node
	// has been gone comes only from durable records
	// (Snapshot.NodesGoneSince, kept by `tether controller`); a Node that
	// exists, even one re-created under the same name, is never fenced by
	// this rule. Zero: the rule is off, and only the out-of-service taint
	// proves that a node is down.
	FenceGoneNodesAfter time.Duration
	// ForceDetach accepts the last resort on a fenced node: deleting a stale
	// VolumeAttachment that no pod keeps desired, or removing the attacher's
	// finalizer from one whose deletion hangs. Both bypass the driver's
	// confirmation of the detach, and are counted as forced.
	ForceDetach bool
}

func (p StoragePolicy) withDefaults() StoragePolicy {
	if p.StaleAttachmentGrace == 0 {
		p.StaleAttachmentGrace = DefaultStaleAttachmentGrace
	}
	if p.MultiAttachGrace == 0 {
		p.MultiAttachGrace = DefaultMultiAttachGrace
	}
	if p.BlockedDeletionGrace == 0 {
		p.BlockedDeletionGrace = DefaultBlockedDeletionGrace
	}
	return p
}

func (p StoragePolicy) validate() []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"stale attachment grace", p.StaleAttachmentGrace},
		{"multi-attach grace", p.MultiAttachGrace},
		{"blocked deletion grace", p.BlockedDeletionGrace},
		{"fence gone nodes after", p.FenceGoneNodesAfter},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", d.name, d.v))
		}
	}
	if d := p.FenceGoneNodesAfter; d > 0 && d < MinFenceGoneNodesAfter {
		errs = append(errs, fmt.Errorf("fence gone nodes after %s is too short: use at least %s (6m or more is advised), or 0 to turn the rule off", d, MinFenceGoneNodesAfter))
	}
	return errs
}
