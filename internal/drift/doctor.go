package drift

// The doctor's vocabulary: what `tether doctor` and `tether openstack
// doctor` say about the things repairs depend on (feature gates, API
// routes, rights, versions), one Line per check. A platform gathers facts
// and turns them into lines with a pure function; the command line prints
// them and exits with DoctorExit.

// Status is a doctor line's verdict.
type Status string

// Statuses, from good to bad. A check whose answer cannot be proved from
// what tether can read is WARN, never OK.
const (
	StatusOK   Status = "OK"
	StatusWarn Status = "WARN"
	StatusFail Status = "FAIL"
)

// rank orders statuses; an unknown status counts as FAIL.
func (s Status) rank() int {
	switch s {
	case StatusOK:
		return 0
	case StatusWarn:
		return 1
	}
	return 2
}

// Line is one doctor check's answer (contract: the -o json field names).
type Line struct {
	// Check is the line's stable name, e.g. "kubevirt.gates".
	Check string `json:"check"`
	// Subject is what the line is about (a tenant, a route, a service).
	Subject string `json:"subject"`
	Status  Status `json:"status"`
	// Why says what was read and what it means, including what could not
	// be proved.
	Why string `json:"why"`
	// Fix says what to do; empty only on an OK line that needs nothing.
	Fix string `json:"fix,omitempty"`
	// Source is the public issue, pull request, advisory or upstream
	// source the check comes from.
	Source string `json:"source"`
}

// Worst is the worst status of lines (OK for none).
func Worst(lines []Line) Status {
	w := StatusOK
	for _, l := range lines {
		if l.Status.rank() > w.rank() {
			w = l.Status
		}
	}
	return w
}

// DoctorExit is the exit code of a doctor command (contract): 0 when every
// line is OK, 1 when the worst is WARN, 2 when any line is FAIL.
func DoctorExit(lines []Line) int { return Worst(lines).rank() }
