package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
)

// scopeID names what a controller looks at (scope.namespaces, selector and
// volume prefix) in a short stable hash, stored on its records as
// v1alpha1.LabelScope. A controller resolves only the records of its own
// scope (or unlabelled ones): a second controller with another scope, or
// the same one after its scope changed, never resolves the records it does
// not produce because it does not look there. A record of another scope
// whose finding this controller also sees is taken over by name.
func scopeID(s config.ScopeConfig) string {
	ns := slices.Clone(s.Namespaces)
	slices.Sort(ns)
	h := sha256.Sum256([]byte(strings.Join(ns, ",") + "\x00" + s.Selector + "\x00" + s.VolumePrefix))
	return hex.EncodeToString(h[:])[:16]
}

// ofOtherScope reports whether rec was filed by a controller of another
// scope than id.
func ofOtherScope(rec *v1alpha1.Finding, id string) bool {
	got, ok := rec.Labels[v1alpha1.LabelScope]
	return ok && id != "" && got != id
}
