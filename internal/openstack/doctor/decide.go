// Package doctor is `tether openstack doctor`: it checks what tether's
// OpenStack repairs depend on — Nova's and Cinder's releases and
// microversions, the admin rights, Cinder's guard of attachments Nova
// uses (CVE-2023-2088, OSSA-2023-003) and whether Nova can detach under
// it (its service token) — and says, per line, OK, WARN or FAIL, why, and
// the fix.
//
// Facts are gathered first (gather.go: reads only, and with an explicit
// opt-in one guarded detach call that Cinder refuses when its guard is on);
// Decide is pure. Nova's configuration cannot be read through any API, so
// the service-token line decides from what Nova's instance actions show and
// is WARN when they show nothing: never a false OK.
package doctor

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/observe"
)

// Check names (contract: the -o json "check" values).
const (
	CheckNovaRelease        = "nova.release"
	CheckCinderRelease      = "cinder.release"
	CheckNovaMicroversion   = "nova.microversion"
	CheckCinderMicroversion = "cinder.microversion"
	CheckAdmin              = "openstack.admin"
	CheckAttachmentGuard    = "cinder.attachment-guard"
	CheckNovaServiceToken   = "nova.service-token"
)

// The microversions tether needs: compute as observe speaks it, and
// block-storage 3.44 for os-complete (act's recreate-and-detach).
const (
	NeedComputeMicroversion = observe.ComputeMicroversion
	NeedBlockStorageVersion = "3.44"
)

// The public sources of the lines (docs/doctor.md lists them).
const (
	srcRelease      = "nova/api/openstack/compute/rest_api_version_history.rst, cinder/api/openstack/rest_api_version_history.rst (maximum microversion of each release)"
	srcMicroversion = "nova api-ref os-volume-attachments (2.89: attachment_id, bdm_uuid); cinder/api/microversions.py (3.27 attachments, 3.44 os-complete)"
	srcAdmin        = "nova and cinder policies (all_tenants listing, os-services, os-force_detach: admin)"
	srcGuard        = "CVE-2023-2088 / OSSA-2023-003, Launchpad bug 2004555 (cinder \"Reject unsafe delete attachment calls\": 23.0.0, 22.1.0, 21.3.0, 20.3.0)"
	srcServiceToken = "CVE-2023-2088 / OSSA-2023-003; nova docs \"Service User Tokens\" ([service_user] send_service_user_token); nova-status upgrade check"
)

const (
	fixServiceToken = "configure every Nova service to send its service token: [service_user] send_service_user_token = true with a user holding the service role (Nova's \"Service User Tokens\" guide), and restart them"
	// Cinder's ConflictNovaUsingAttachment: "Detach volume from instance
	// %s using the Compute API" (cinder/exception.py).
	guardMessage       = "using the Compute API"
	guardExceptionName = "ConflictNovaUsingAttachment"
)

// Facts is everything Decide looks at.
type Facts struct {
	// Compute and BlockStorage are the services' version documents.
	Compute, BlockStorage Service
	// Admin are the admin-only reads tried.
	Admin []Right
	// Guard is the opt-in probe of Cinder's attachment guard; nil when not
	// asked for.
	Guard *GuardProbe
	// Detaches are Nova's volume detaches found in its instance actions,
	// newest first; DetachesNote says what was looked at or why nothing
	// could be.
	Detaches     []Detach
	DetachesNote string
}

// Service is what a service's version document says.
type Service struct {
	// Max and Min are its microversions ("2.93"); Err says why they could
	// not be read.
	Max, Min string
	Err      string
}

// Right is one admin-only read and its answer.
type Right struct {
	What string
	// Code is the HTTP status (0 with Err: no answer).
	Code int
	Err  string
}

// GuardProbe is Cinder's answer to os-detach of a volume with an
// attachment ID that does not exist, asked without a service token: with
// the guard, Cinder refuses it before anything else (409
// ConflictNovaUsingAttachment); without, it detaches nothing (there is no
// such attachment) and answers 202.
type GuardProbe struct {
	Volume string
	// Skipped says why the probe was not sent (the volume is not available
	// with no attachments).
	Skipped string
	Code    int
	Message string
	Err     string
}

// Detach is one of Nova's detach_volume actions.
type Detach struct {
	Server    string
	RequestID string
	Time      time.Time
	// Failed: its compute_detach_volume event ended in Error; Details and
	// Traceback are what the event says (admins see the traceback).
	Failed             bool
	Details, Traceback string
}

// Decide turns facts into the doctor's lines, in a fixed order.
func Decide(f Facts) []drift.Line {
	out := []drift.Line{
		releaseLine(CheckNovaRelease, "Nova", f.Compute, novaReleases),
		releaseLine(CheckCinderRelease, "Cinder", f.BlockStorage, cinderReleases),
		microversionLine(CheckNovaMicroversion, "Nova (compute API)", f.Compute, NeedComputeMicroversion, "tether reads each mapping's Cinder attachment ID and BDM uuid (compute 2.89, Nova 24.0.0 Xena)"),
		microversionLine(CheckCinderMicroversion, "Cinder (block-storage API)", f.BlockStorage, NeedBlockStorageVersion, "tether lists attachments (3.27) and completes the ones it creates (3.44)"),
		adminLine(f.Admin),
	}
	guard := guardState(f)
	out = append(out, guardLine(f, guard), serviceTokenLine(f, guard))
	return out
}

func line(check, subject string, s drift.Status, why, fix, src string) drift.Line {
	return drift.Line{Check: check, Subject: subject, Status: s, Why: why, Fix: fix, Source: src}
}

// microversion is "X.Y" as two numbers; ok false when it is not one.
func microversion(s string) (major, minor int, ok bool) {
	a, b, found := strings.Cut(s, ".")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	return x, y, found && err1 == nil && err2 == nil
}

// atLeast compares microversions numerically (2.100 > 2.96).
func atLeast(have, need string) bool {
	hx, hy, ok1 := microversion(have)
	nx, ny, ok2 := microversion(need)
	return ok1 && ok2 && (hx > nx || (hx == nx && hy >= ny))
}

// release is a maximum microversion and the releases that have it as
// theirs.
type release struct{ max, names string }

// novaReleases: the "(Maximum in ...)" marks of Nova's
// rest_api_version_history.rst (master, 2026).
var novaReleases = []release{
	{"2.60", "Queens"}, {"2.65", "Rocky"}, {"2.72", "Stein"}, {"2.79", "Train"}, {"2.87", "Ussuri or Victoria"},
	{"2.88", "Wallaby"}, {"2.90", "Xena or Yoga"}, {"2.93", "Zed"}, {"2.95", "2023.1 Antelope or 2023.2 Bobcat"},
	{"2.96", "2024.1 Caracal or 2024.2 Dalmatian"}, {"2.100", "2025.1 Epoxy or 2025.2 Flamingo"}, {"2.103", "2026.1 Gazpacho"},
}

// cinderReleases: the same marks of Cinder's history.
var cinderReleases = []release{
	{"3.50", "Queens"}, {"3.55", "Rocky"}, {"3.59", "Stein or Train"}, {"3.60", "Ussuri"}, {"3.62", "Victoria"},
	{"3.64", "Wallaby"}, {"3.66", "Xena"}, {"3.68", "Yoga"}, {"3.70", "Zed, 2023.1 Antelope or 2023.2 Bobcat"},
	{"3.71", "2024.1 Caracal or later"},
}

// releaseOf names the releases whose maximum is max; a maximum between
// two marks is a development version of the later release, and one past
// the last mark a release newer than this table.
func releaseOf(max string, table []release) string {
	for _, r := range table {
		switch {
		case max == r.max:
			return r.names
		case atLeast(r.max, max):
			return "a development version before " + r.names
		}
	}
	return "newer than " + table[len(table)-1].names
}

func releaseLine(check, name string, s Service, table []release) drift.Line {
	if s.Err != "" {
		return line(check, name, drift.StatusFail, "its version document could not be read: "+s.Err,
			"check the endpoint in the service catalog (or the endpoint override in clouds.yaml) and that the service runs", srcRelease)
	}
	return line(check, name, drift.StatusOK, fmt.Sprintf("maximum microversion %s: %s", s.Max, releaseOf(s.Max, table)), "", srcRelease)
}

func microversionLine(check, name string, s Service, need, what string) drift.Line {
	switch {
	case s.Err != "":
		return line(check, name, drift.StatusFail, "its microversions could not be read: "+s.Err, "see the release line", srcMicroversion)
	case !atLeast(s.Max, need):
		return line(check, name, drift.StatusFail, fmt.Sprintf("serves up to %s, tether needs %s: %s", s.Max, need, what),
			"upgrade the service (Nova Xena or later; Cinder Queens or later)", srcMicroversion)
	case s.Min != "" && !atLeast(need, s.Min):
		return line(check, name, drift.StatusFail, fmt.Sprintf("serves from %s only, tether speaks %s", s.Min, need), "use a tether that speaks this cloud's microversions", srcMicroversion)
	}
	return line(check, name, drift.StatusOK, fmt.Sprintf("serves %s to %s; tether uses %s: %s", orDefault(s.Min, "?"), s.Max, need, what), "", srcMicroversion)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func adminLine(rights []Right) drift.Line {
	const subj = "admin rights"
	if len(rights) == 0 {
		return line(CheckAdmin, subj, drift.StatusWarn, "nothing was asked", "run doctor with the credentials tether runs with", srcAdmin)
	}
	var ok, denied, failed []string
	for _, r := range rights {
		switch {
		case r.Code >= 200 && r.Code < 300:
			ok = append(ok, r.What)
		case r.Code == 401 || r.Code == 403:
			denied = append(denied, fmt.Sprintf("%s (%d)", r.What, r.Code))
		default:
			failed = append(failed, fmt.Sprintf("%s (%s)", r.What, orDefault(r.Err, strconv.Itoa(r.Code))))
		}
	}
	switch {
	case len(denied) > 0:
		return line(CheckAdmin, subj, drift.StatusFail, "refused: "+strings.Join(denied, ", ")+"; tether reads every project and repairs as an admin",
			"give tether's user the admin role (or run it with --project for one project, which still needs admin to repair)", srcAdmin)
	case len(failed) > 0:
		return line(CheckAdmin, subj, drift.StatusWarn, "could not be asked: "+strings.Join(failed, ", "), "check that the services answer", srcAdmin)
	}
	return line(CheckAdmin, subj, drift.StatusOK, "allowed: "+strings.Join(ok, ", "), "", srcAdmin)
}

// guard is what is known of Cinder's attachment guard.
type guard int

const (
	guardUnknown guard = iota
	guardOn
	guardOff
)

// guardState: proven by the probe, or by the release (every release since
// 2023.2 Bobcat has it; Bobcat's maximum is 3.70, as Zed's, so only 3.71 and
// later prove it).
func guardState(f Facts) guard {
	if p := f.Guard; p != nil && p.Skipped == "" {
		switch {
		case p.Code == 409 && strings.Contains(p.Message, guardMessage):
			return guardOn
		case p.Code >= 200 && p.Code < 300:
			return guardOff
		}
	}
	if f.BlockStorage.Err == "" && atLeast(f.BlockStorage.Max, "3.71") {
		return guardOn
	}
	return guardUnknown
}

// refusedByCinder says whether a failed detach failed where Nova deletes
// its Cinder attachment, on an answer of Cinder's that Nova's Cinder client
// raises as a bare ClientException: the 409 of Cinder's guard
// (ConflictNovaUsingAttachment; the client has no class for 409) is one,
// an unexpected server error another. Newer clients may carry the guard's
// message itself.
func refusedByCinder(d Detach) bool {
	if !d.Failed {
		return false
	}
	s := d.Details + "\n" + d.Traceback
	if strings.Contains(s, guardExceptionName) || strings.Contains(s, guardMessage) {
		return true
	}
	return strings.Contains(d.Traceback, "attachment_delete") && strings.Contains(d.Details+d.Traceback, "ClientException")
}

func guardLine(f Facts, g guard) drift.Line {
	const subj = "Cinder's attachment guard"
	p := f.Guard
	switch {
	case g == guardOff:
		return line(CheckAttachmentGuard, subj, drift.StatusFail,
			fmt.Sprintf("off: os-detach of volume %s with an attachment ID that does not exist, without Nova's service token, was accepted (%d): anyone allowed to delete attachments can cut a running server's disk (CVE-2023-2088)", p.Volume, p.Code),
			"upgrade Cinder to a release with the fix (23.0.0, or 22.1.0, 21.3.0, 20.3.0 on older branches) and configure Nova's service token", srcGuard)
	case g == guardOn && p != nil && p.Skipped == "" && p.Code == 409:
		return line(CheckAttachmentGuard, subj, drift.StatusOK, fmt.Sprintf("on: os-detach of volume %s with an attachment ID that does not exist, without Nova's service token, was refused 409 %q", p.Volume, p.Message), "", srcGuard)
	case g == guardOn && f.BlockStorage.Err == "" && atLeast(f.BlockStorage.Max, "3.71"):
		return line(CheckAttachmentGuard, subj, drift.StatusOK, "on: Cinder serves 3.71 ("+releaseOf(f.BlockStorage.Max, cinderReleases)+"), and every release since 23.0.0 has it", "", srcGuard)
	}
	why := "whether it is on cannot be seen through the API: "
	switch {
	case f.BlockStorage.Err != "":
		why += "Cinder's version is unknown"
	case atLeast(f.BlockStorage.Max, "3.67"):
		why += "Cinder " + releaseOf(f.BlockStorage.Max, cinderReleases) + " has it from 20.3.0 (Yoga), 21.3.0 (Zed), 22.1.0 (2023.1) and 23.0.0 (2023.2) on, and the API does not show the patch release"
	default:
		why += "Cinder " + releaseOf(f.BlockStorage.Max, cinderReleases) + " is older than every release with the fix; only a patched package has it"
	}
	if p != nil && p.Skipped != "" {
		why += "; the probe was not sent: " + p.Skipped
	} else if p != nil {
		why += fmt.Sprintf("; the probe of volume %s answered %d %q %s, which proves nothing", p.Volume, p.Code, p.Message, p.Err)
	}
	return line(CheckAttachmentGuard, subj, drift.StatusWarn, why,
		"prove it with --probe-attachment-guard VOLUME_ID (an available volume with no attachments: Cinder refuses the call when the guard is on, and has nothing to detach when it is off), or check the cinder package's version", srcGuard)
}

// serviceTokenLine: whether Nova can detach under the guard.
func serviceTokenLine(f Facts, g guard) drift.Line {
	const subj = "Nova's service token"
	for _, d := range f.Detaches {
		if refusedByCinder(d) {
			cause := "Cinder's guard is not proven on, but a Nova without its service token fails exactly so"
			if g == guardOn {
				cause = "Cinder's guard is on, and it refuses Nova only when Nova sends no service token"
			}
			return line(CheckNovaServiceToken, subj, drift.StatusFail,
				fmt.Sprintf("Nova cannot detach: its detach of a volume from server %s (request %s, %s) failed where Nova deletes its Cinder attachment, refused by Cinder (%s); %s. Every detach of an attached volume fails so, leaving the volume detaching, and tether's repairs through Nova's detach with it",
					d.Server, d.RequestID, d.Time.UTC().Format(time.RFC3339), firstLine(d.Details, d.Traceback), cause),
				fixServiceToken+"; then reset the volumes left detaching (cinder reset-state --state in-use, or os-roll_detaching) and detach again", srcServiceToken)
		}
		if !d.Failed {
			if g == guardOn {
				return line(CheckNovaServiceToken, subj, drift.StatusOK,
					fmt.Sprintf("Nova detached a volume from server %s (request %s, %s) with Cinder's guard on, which only its service token passes", d.Server, d.RequestID, d.Time.UTC().Format(time.RFC3339)), "", srcServiceToken)
			}
			return line(CheckNovaServiceToken, subj, drift.StatusWarn,
				fmt.Sprintf("Nova detached a volume from server %s (request %s, %s), but Cinder's guard is not proven on, so this does not prove Nova sends its service token", d.Server, d.RequestID, d.Time.UTC().Format(time.RFC3339)),
				"prove the guard (see the cinder.attachment-guard line); "+fixServiceToken, srcServiceToken)
		}
	}
	return line(CheckNovaServiceToken, subj, drift.StatusWarn,
		"Nova's configuration cannot be read through the API, and its instance actions show no volume detach to judge by ("+f.DetachesNote+")",
		"run `nova-status upgrade check` on a Nova host (it checks [service_user]), or detach a test volume through Nova and run doctor again; if the token is missing: "+fixServiceToken, srcServiceToken)
}

// firstLine is the guard's message where the event carries it, else the
// exception's name.
func firstLine(details, traceback string) string {
	for _, l := range strings.Split(details+"\n"+traceback, "\n") {
		if strings.Contains(l, guardMessage) {
			return strings.TrimSpace(l)
		}
	}
	if details != "" {
		return details
	}
	return "ClientException"
}
