package plan

import (
	"fmt"
	"strings"
)

// The anomaly guard's defaults: a batch of more safe findings than the
// larger of these is refused as a whole.
const (
	DefaultGuardMaxSafe = 25
	DefaultGuardShare   = 0.10
)

// Guard refuses a whole batch, before anything is changed, when the
// picture it was planned from looks wrong: the platform says so
// (Survey.Anomalies: a partial read, a source that lists none of a kind
// the other source says exists), or more findings are safe than a sane
// world has (more than the larger of MaxSafe and Share of the subjects).
// A mass of drift found at once is more often a half-read world than mass
// drift.
type Guard struct {
	// MaxSafe and Share bound the safe findings of one batch; zero values
	// mean DefaultGuardMaxSafe and DefaultGuardShare.
	MaxSafe int
	Share   float64
	// Override lets a refused batch go on; the run says so in its notes.
	Override bool
	// Flag is the override's flag as the operator types it, for the
	// message ("--override-guard").
	Flag string
}

// Limit is the most safe findings a batch over subjects may have.
func (g Guard) Limit(subjects int) int {
	max, share := g.MaxSafe, g.Share
	if max <= 0 {
		max = DefaultGuardMaxSafe
	}
	if share <= 0 {
		share = DefaultGuardShare
	}
	if n := int(share * float64(subjects)); n > max {
		return n
	}
	return max
}

// Reasons says why the guard refuses a batch of safe safe findings
// planned from s; nil when it does not.
func (g Guard) Reasons(s Survey, safe int) []string {
	reasons := append([]string(nil), s.Anomalies...)
	if limit := g.Limit(s.Subjects); safe > limit {
		reasons = append(reasons, fmt.Sprintf("%d findings are safe to act on at once, more than the limit of %d (the larger of %d and %.0f%% of the %d subjects read): a half-read world looks like mass drift",
			safe, limit, g.maxSafe(), 100*g.share(), s.Subjects))
	}
	return reasons
}

func (g Guard) flag() string {
	if g.Flag == "" {
		return "--override-guard"
	}
	return g.Flag
}

func (g Guard) maxSafe() int {
	if g.MaxSafe <= 0 {
		return DefaultGuardMaxSafe
	}
	return g.MaxSafe
}

func (g Guard) share() float64 {
	if g.Share <= 0 {
		return DefaultGuardShare
	}
	return g.Share
}

// GuardError is a batch the guard refused: nothing was changed.
type GuardError struct {
	Reasons []string
	Flag    string
}

func (e *GuardError) Error() string {
	flag := Guard{Flag: e.Flag}.flag()
	return fmt.Sprintf("the anomaly guard refused the whole batch, nothing was changed: %s; if the picture is right, check it with the dry run and re-run with %s",
		strings.Join(e.Reasons, "; "), flag)
}
