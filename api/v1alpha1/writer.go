package v1alpha1

import (
	"encoding/json"
	"slices"
)

// FieldManager is the field manager of every write the controller makes to
// its Finding records (contract: the records' times count as evidence only
// when the controller wrote them; see StatusWrittenBy).
const FieldManager = "tether-controller"

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
