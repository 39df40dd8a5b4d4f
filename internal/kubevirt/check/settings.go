package check

import "time"

// Setting is one of the checks' own durations: when a check first reports
// (a "report after" grace), or what its rule waits for. Each has one row
// here, from which tether audit's and fix's flag derives
// (internal/cli), and against which the controller's configuration key,
// the chart's value and the docs are tested: a new setting is one row,
// and the tests say what else it needs.
type Setting struct {
	// Name is its key in the controller's configuration and the chart's
	// values, under Section.
	Name string
	// Section holds the key ("storage", "hotplug", "fencing"); "" when
	// the controller's configuration has none (the controller uses
	// Default).
	Section string
	// Checks are the checks it concerns.
	Checks []string
	// Flag is the flag of tether audit and fix ("" for none).
	Flag string
	// Default is what a zero value means.
	Default time.Duration
	// Usage is the flag's help.
	Usage string
	// Of is the policy's field it sets.
	Of func(*Policy) *time.Duration
}

// Settings are the checks' durations.
func Settings() []Setting {
	return []Setting{
		{Name: "staleAttachmentGrace", Section: "storage", Checks: []string{StaleVolumeAttachment}, Flag: "stale-attachment-grace", Default: DefaultStaleAttachmentGrace,
			Usage: "report a VolumeAttachment that no pod needs only after this long",
			Of:    func(p *Policy) *time.Duration { return &p.Storage.StaleAttachmentGrace }},
		{Name: "multiAttachGrace", Section: "storage", Checks: []string{MultiAttachConflict}, Default: DefaultMultiAttachGrace,
			Of: func(p *Policy) *time.Duration { return &p.Storage.MultiAttachGrace }},
		{Name: "blockedDeletionGrace", Section: "storage", Checks: []string{BlockedDeletion}, Flag: "blocked-deletion-grace", Default: DefaultBlockedDeletionGrace,
			Usage: "report an object stuck terminating only after this long",
			Of:    func(p *Policy) *time.Duration { return &p.Storage.BlockedDeletionGrace }},
		{Name: "fenceGoneNodesAfter", Section: "storage", Checks: []string{StaleVolumeAttachment}, Flag: "fence-gone-nodes-after",
			Usage: "opt-in: treat a Node that tether controller has recorded as missing for longer than this as fenced (read from its Finding records; 0: only the out-of-service taint proves a node is down)",
			Of:    func(p *Policy) *time.Duration { return &p.Storage.FenceGoneNodesAfter }},
		{Name: "tenantAttachGrace", Section: "hotplug", Checks: []string{PhantomAttach, AttachAlreadyPresent}, Flag: "tenant-attach-grace", Default: DefaultTenantAttachGrace,
			Usage: "PhantomAttach and AttachAlreadyPresent: hold (as info) tenant VolumeAttachments and VMIs younger than this",
			Of:    func(p *Policy) *time.Duration { return &p.TenantAttachGrace }},
		{Name: "stuckPhaseGrace", Section: "hotplug", Checks: []string{StuckHotplugPhase}, Flag: "stuck-phase-grace", Default: DefaultStuckPhaseGrace,
			Usage: "StuckHotplugPhase: call a hot-plug phase stuck only after this long",
			Of:    func(p *Policy) *time.Duration { return &p.StuckPhaseGrace }},
		{Name: "stuckPublishGrace", Checks: []string{StuckPublish}, Flag: "stuck-publish-grace", Default: DefaultStuckPublishGrace,
			Usage: "StuckPublish: tether fix acts only on a finding seen twice this far apart (it observes again after this long)",
			Of:    func(p *Policy) *time.Duration { return &p.StuckPublishGrace }},
		{Name: "fenceAfter", Section: "fencing", Checks: []string{TenantNodeDown}, Flag: "fence-after", Default: DefaultFenceAfter,
			Usage: "TenantNodeDown: fence a tenant Node whose infra VM is down only once it has been NotReady this long",
			Of:    func(p *Policy) *time.Duration { return &p.FenceAfter }},
		{Name: "unfenceSettle", Section: "fencing", Checks: []string{TenantNodeDown}, Flag: "unfence-settle", Default: DefaultUnfenceSettle,
			Usage: "TenantNodeDown: keep a tenant Node cordoned this long after tether removed its out-of-service taint, before uncordoning it",
			Of:    func(p *Policy) *time.Duration { return &p.UnfenceSettle }},
	}
}
