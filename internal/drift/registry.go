package drift

import (
	"fmt"
	"slices"
	"strings"
)

// Row is what every place beside the decision needs to know of a check:
// the command line (`tether checks`, --check), the docs tables, the plan
// and the tests that keep them in step. A platform's check row embeds it
// and adds what only that platform needs (the kinds it reads, the
// controller loop that runs it, its Event reasons).
type Row struct {
	// Name is the check's stable name (contract).
	Name string
	// Doc says in one line what a finding of this check proves.
	Doc string
	// Page is the check's documentation page, from the repository root.
	Page string
	// Subjects are the kinds of object its findings are about.
	Subjects []string
	// Actions are the action types its findings may propose (None aside).
	Actions []ActionType
}

// Meta returns the row itself: a platform's row that embeds Row satisfies
// Described through it.
func (r Row) Meta() Row { return r }

// Described is a platform's check row.
type Described interface{ Meta() Row }

// Finder is a platform's check row that can run on the platform's input.
type Finder[In any] interface {
	Described
	Find(In) []Finding
}

// Names are the rows' names, in the rows' order.
func Names[R Described](rows []R) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Meta().Name
	}
	return out
}

// Lookup returns the row called name, or an error naming the valid ones;
// what says whose checks they are ("check", "OpenStack check").
func Lookup[R Described](rows []R, name, what string) (R, error) {
	for _, r := range rows {
		if r.Meta().Name == name {
			return r, nil
		}
	}
	var zero R
	return zero, fmt.Errorf("unknown %s %q (valid checks: %s)", what, name, strings.Join(Names(rows), ", "))
}

// Run runs the rows that selected names (all when none are named; unknown
// names are skipped, Lookup reports them) on in, and returns their findings
// in the one order of Sort. The arrays the rows return become Run's (it
// sorts and appends in place): a row must return an array of its own, not
// one it or another row keeps.
func Run[R Finder[In], In any](rows []R, in In, selected []string) []Finding {
	// The rows' findings are joined once: into the array of the row with
	// the most room when it holds them all (with one check, or one check
	// with findings, always), else into a new one of their total size. A
	// second array of hundreds of thousands of findings would be made
	// while every row's is still held, when the heap is at its largest.
	parts, n, roomiest := make([][]Finding, 0, len(rows)), 0, -1
	for _, r := range rows {
		if len(selected) == 0 || slices.Contains(selected, r.Meta().Name) {
			fs := r.Find(in)
			if len(fs) == 0 {
				continue
			}
			if roomiest < 0 || cap(fs) > cap(parts[roomiest]) {
				roomiest = len(parts)
			}
			parts, n = append(parts, fs), n+len(fs)
		}
	}
	if n == 0 {
		return nil
	}
	var out []Finding
	if cap(parts[roomiest]) >= n {
		out = parts[roomiest]
		parts[roomiest] = nil
	} else {
		out = make([]Finding, 0, n)
	}
	for i, fs := range parts {
		out = append(out, fs...)
		parts[i] = nil
	}
	Sort(out)
	return out
}

// Incomplete says what a row lacks ("" when nothing): every row names its
// check, says what it proves, has a page and names its subjects.
func (r Row) Incomplete() string {
	var missing []string
	for _, f := range []struct{ name, value string }{{"Name", r.Name}, {"Doc", r.Doc}, {"Page", r.Page}} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(r.Subjects) == 0 {
		missing = append(missing, "Subjects")
	}
	if len(missing) == 0 {
		return ""
	}
	return "no " + strings.Join(missing, ", ")
}
