package findingrecord

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/tether-dev/tether/api/v1alpha1"
)

// ScopeID names what a controller looks at (its namespaces, selector and
// volume prefix) in a short stable hash, stored on its records as
// v1alpha1.LabelScope. A controller resolves only the records of its own
// scope (or unlabelled ones): a second controller with another scope, or
// the same one after its scope changed, never resolves the records it does
// not produce because it does not look there. A record of another scope
// whose finding this controller also sees is taken over by name.
func ScopeID(namespaces []string, selector, volumePrefix string) string {
	ns := slices.Clone(namespaces)
	slices.Sort(ns)
	h := sha256.Sum256([]byte(strings.Join(ns, ",") + "\x00" + selector + "\x00" + volumePrefix))
	return hex.EncodeToString(h[:])[:16]
}

// OfOtherScope reports whether rec was filed by a controller of another
// scope than id.
func OfOtherScope(rec *v1alpha1.Finding, id string) bool {
	got, ok := rec.Labels[v1alpha1.LabelScope]
	return ok && id != "" && got != id
}

// Finished reports whether a record belongs to a run of the condition that
// has ended (only a resolved record carries resolvedAt).
func Finished(rec *v1alpha1.Finding) bool {
	return rec.Status.Phase == v1alpha1.PhaseResolved || rec.Status.ResolvedAt != nil
}
