package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack"
)

// osLogFlags choose the structured log of `tether openstack`: one line on
// stderr for every finding a run observes and every repair's outcome, with
// a stable reason (openstack.Reason*), as the KubeVirt side's Events.
type osLogFlags struct {
	format string
}

func (f *osLogFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.format, "log-format", "text", "the log line of each finding and repair on stderr: text (logfmt), json, or none")
}

func (f *osLogFlags) validate() error {
	switch f.format {
	case "text", "json", "none":
		return nil
	}
	return fmt.Errorf("--log-format %q is not supported: use text (logfmt), json or none", f.format)
}

// logger writes to w in the chosen format.
func (f *osLogFlags) logger(w io.Writer) *slog.Logger {
	switch f.format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil))
	case "none":
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// findingAttrs are the fields every line about f carries.
func findingAttrs(f drift.Finding) []any {
	return []any{"finding", f.ID, "check", f.Check, "project", f.Namespace,
		"object", f.Object.Kind + "/" + string(f.Object.UID), "name", f.Object.Name, "volume", f.Volume,
		"action", string(f.Action.Type)}
}

// logObserved writes the line of a finding a run observed.
func logObserved(log *slog.Logger, f drift.Finding) {
	args := append([]any{"reason", openstack.ReasonFindingObserved}, findingAttrs(f)...)
	args = append(args, "severity", string(f.Severity), "safe", f.Action.Safe, "blockedBy", string(f.Action.BlockedBy), "message", f.Message)
	log.Warn("finding observed", args...)
}

// logOutcome writes the line of a repair's outcome.
func logOutcome(log *slog.Logger, f drift.Finding, r drift.Result) {
	args := append([]any{"reason", openstack.OutcomeReason(r.Outcome)}, findingAttrs(f)...)
	args = append(args, "outcome", string(r.Outcome), "cause", string(r.Cause), "message", r.Message)
	level := slog.LevelWarn
	switch r.Outcome {
	case drift.Applied:
		level = slog.LevelInfo
	case drift.Failed:
		level = slog.LevelError
	}
	log.Log(context.Background(), level, "repair ended", args...)
}

// loggedFixer is OpenStack's Fixer that logs each repair's outcome as it
// ends, and keeps it by finding id in results (for the run's metrics).
type loggedFixer struct {
	*openstack.Fixer
	log     *slog.Logger
	results map[string]drift.Result
}

// Fix repairs f and logs how it ended.
func (x loggedFixer) Fix(ctx context.Context, f drift.Finding) drift.Result {
	r := x.Fixer.Fix(ctx, f)
	logOutcome(x.log, f, r)
	if x.results != nil {
		x.results[f.ID] = r
	}
	return r
}
