package v1alpha1

import (
	"encoding/json"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FieldManager is the field manager of every write the controller makes to
// its Finding records (contract: the records' times count as evidence only
// when the controller wrote them; see StatusWrittenBy).
const FieldManager = "tether-controller"

// DefaultNamespace is the controller's namespace unless told otherwise
// (POD_NAMESPACE in the cluster). Records whose times decide node fencing
// count only there.
const DefaultNamespace = "tether-system"

// StatusWrittenBy reports whether manager, and no other field manager,
// wrote the record's status: metadata.managedFields has an entry of manager
// that owns status fields and no entry of another manager owns any.
//
// The API server records the manager of every write (the client names it),
// so a status edited by hand (kubectl edit, patch, a script) is told apart
// from the controller's own. It is an integrity check against edits made
// with other tools, not an authentication: a writer that names the same
// manager is not detected, which is why records whose times decide actions
// are read only from the controller's own namespace as well.
func (f *Finding) StatusWrittenBy(manager string) bool {
	w := f.StatusWriters()
	return len(w) > 0 && !slices.ContainsFunc(w, func(m string) bool { return m != manager })
}

// StatusWriters returns the field managers that own status fields, in the
// order of metadata.managedFields.
func (f *Finding) StatusWriters() []string {
	var out []string
	for _, e := range f.ManagedFields {
		if e.FieldsV1 != nil && ownsStatus(e.FieldsV1.Raw) && !slices.Contains(out, e.Manager) {
			out = append(out, e.Manager)
		}
	}
	return out
}

// ownsStatus reports whether a managedFields FieldsV1 set names any field
// under status. A set that cannot be decoded counts as owning status, so an
// unreadable entry of another manager makes the record untrusted.
func ownsStatus(raw []byte) bool {
	var set map[string]json.RawMessage
	if err := json.Unmarshal(raw, &set); err != nil {
		return true
	}
	_, ok := set["f:status"]
	return ok
}

// FutureTime names the first of the status's observation times
// (firstObserved, lastObserved, safeSince, nodeGoneSince) that lies after
// now, as "lastObserved 2030-01-01T00:00:00Z", or returns "". A time after
// now comes from a clock that runs ahead or from a forged record: it is no
// evidence of anything observed.
func (s *FindingStatus) FutureTime(now time.Time) string {
	for _, t := range []struct {
		name string
		at   *metav1.Time
	}{{"firstObserved", s.FirstObserved}, {"lastObserved", s.LastObserved}, {"safeSince", s.SafeSince}, {"nodeGoneSince", s.NodeGoneSince}} {
		if t.at != nil && t.at.Time.After(now) {
			return t.name + " " + t.at.UTC().Format(time.RFC3339)
		}
	}
	return ""
}
