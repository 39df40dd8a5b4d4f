package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/tether-dev/tether/internal/drift"
)

// ChangedSincePlan starts the Skipped text of a reviewed plan's finding that
// was not acted on because the cluster no longer shows it as reviewed.
const ChangedSincePlan = "changed-since-plan"

// notInPlan is the Skipped text of a safe finding the reviewed plan did not
// hold.
const notInPlan = "not in the reviewed plan"

// readPlan reads a plan written by `tether fix -o json` and returns the
// findings it would have acted on, by id. Anything else is an error that
// names the file and how to write a plan: nothing is acted on.
func readPlan(path string) (map[string]drift.Finding, error) {
	const how = "write the plan with `tether fix -o json > plan.json` (without --apply) and review it"
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--plan: %v; %s", err, how)
	}
	var p FixPlan
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

// planReviewed is the plan of a run with --plan: the fresh findings that
// match a reviewed one are planned (at most max), every reviewed finding
// that no longer matches is reported as changed since the plan, and fresh
// safe findings the plan did not hold are left out. It returns the items
// and how many reviewed findings changed.
func planReviewed(fresh []drift.Finding, reviewed map[string]drift.Finding, max int) ([]planItem, int) {
	var matched []drift.Finding
	var rest []planItem
	seen := map[string]bool{}
	changed := 0
	for _, f := range fresh {
		r, ok := reviewed[f.ID]
		switch {
		case ok:
			seen[f.ID] = true
			if why := differs(r, f); why != "" {
				rest = append(rest, planItem{Finding: f, Skipped: ChangedSincePlan + ": " + why})
				changed++
				continue
			}
			matched = append(matched, f)
		case f.Action.Safe:
			rest = append(rest, planItem{Finding: f, Skipped: notInPlan})
		default:
			rest = append(rest, planItem{Finding: f})
		}
	}
	for id, r := range reviewed {
		if !seen[id] {
			rest = append(rest, planItem{Finding: r, Skipped: ChangedSincePlan + ": the finding is gone"})
			changed++
		}
	}
	return append(plan(matched, max), rest...), changed
}
