package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/tether-dev/tether/internal/drift"
)

// APIVersion of tether's report and plan documents (contract).
const APIVersion = "tether.dev/v1alpha1"

// Document is the `fix -o json|yaml` document (contract): what a dry run
// would do, which a reviewer saves and passes back with --plan, or what an
// applied run did.
type Document struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Applied    bool   `json:"applied"`
	Items      []Item `json:"items"`
}

// ChangedSincePlan starts the Skipped text of a reviewed plan's finding that
// was not acted on because the platform no longer shows it as reviewed.
const ChangedSincePlan = "changed-since-plan"

// notInPlan is the Skipped text of a safe finding the reviewed plan did not
// hold.
const notInPlan = "not in the reviewed plan"

// ReadPlan reads a plan written by `fix -o json` (command names the fix
// command, for the error messages) and returns the findings it would have
// acted on, by id. checks are the check names of the platform the plan is
// applied to: a plan of another platform is refused. Anything else is an
// error that names the file and how to write a plan: nothing is acted on.
func ReadPlan(path, command string, checks []string) (map[string]drift.Finding, error) {
	how := fmt.Sprintf("write the plan with `%s -o json > plan.json` (without --apply) and review it", command)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--plan: %v; %s", err, how)
	}
	var p Document
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("--plan %s: not a tether fix plan (%v); %s", path, err, how)
	}
	switch {
	case p.Kind != "FixPlan" || p.APIVersion != APIVersion:
		return nil, fmt.Errorf("--plan %s: kind %q, apiVersion %q, want FixPlan %s; %s", path, p.Kind, p.APIVersion, APIVersion, how)
	case p.Applied:
		return nil, fmt.Errorf("--plan %s: this is the report of a run that already applied its plan; %s", path, how)
	}
	out := map[string]drift.Finding{}
	for i, it := range p.Items {
		if !it.Planned {
			continue
		}
		if it.Finding.ID == "" || it.Finding.Check == "" || it.Finding.Object.UID == "" {
			return nil, fmt.Errorf("--plan %s: item %d is planned but names no finding id, check or object UID; %s", path, i, how)
		}
		if checks != nil && !slices.Contains(checks, it.Finding.Check) {
			return nil, fmt.Errorf("--plan %s: item %d is a finding of check %s, which `%s` does not run (its checks: %s); %s",
				path, i, it.Finding.Check, command, strings.Join(checks, ", "), how)
		}
		out[it.Finding.ID] = it.Finding
	}
	return out, nil
}

// differs says how a fresh finding differs from the reviewed one in what
// the action would touch, or "" when it is the same action on the same
// object.
func differs(reviewed, fresh drift.Finding) string {
	switch {
	case reviewed.Check != fresh.Check:
		return fmt.Sprintf("check %s, reviewed %s", fresh.Check, reviewed.Check)
	case reviewed.Namespace != fresh.Namespace || reviewed.Object != fresh.Object:
		return fmt.Sprintf("object %s %s/%s (uid %s), reviewed %s %s/%s (uid %s)",
			fresh.Object.Kind, fresh.Namespace, fresh.Object.Name, fresh.Object.UID,
			reviewed.Object.Kind, reviewed.Namespace, reviewed.Object.Name, reviewed.Object.UID)
	case reviewed.Volume != fresh.Volume:
		return fmt.Sprintf("volume %q, reviewed %q", fresh.Volume, reviewed.Volume)
	case reviewed.Action.Type != fresh.Action.Type:
		return fmt.Sprintf("action %s, reviewed %s", fresh.Action.Type, reviewed.Action.Type)
	case !fresh.Action.Safe:
		return fmt.Sprintf("no longer safe (%s)", fresh.Action.BlockedBy)
	}
	return ""
}

// Reviewed is the plan of a run with --plan: the fresh findings that match
// a reviewed one are planned (at most max), every reviewed finding that no
// longer matches is reported as changed since the plan, and fresh safe
// findings the plan did not hold are left out. It returns the items and
// how many reviewed findings changed.
func Reviewed(fresh []drift.Finding, reviewed map[string]drift.Finding, max int) ([]Item, int) {
	var matched []drift.Finding
	var rest []Item
	seen := map[string]bool{}
	changed := 0
	for _, f := range fresh {
		r, ok := reviewed[f.ID]
		switch {
		case ok:
			seen[f.ID] = true
			if why := differs(r, f); why != "" {
				rest = append(rest, Item{Finding: f, Skipped: ChangedSincePlan + ": " + why})
				changed++
				continue
			}
			matched = append(matched, f)
		case f.Action.Safe:
			rest = append(rest, Item{Finding: f, Skipped: notInPlan})
		default:
			rest = append(rest, Item{Finding: f})
		}
	}
	var gone []string
	for id := range reviewed {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		rest = append(rest, Item{Finding: reviewed[id], Skipped: ChangedSincePlan + ": the finding is gone"})
		changed++
	}
	return append(Items(matched, max), rest...), changed
}
