package drift

import (
	"cmp"
	"slices"
	"strings"
)

// Sort orders findings the one way every platform lists them: by scope
// (namespace or project), object kind and name, volume, check, and object
// UID last (two objects of one name, one of them re-created).
func Sort(fs []Finding) {
	slices.SortStableFunc(fs, Compare)
}

// Compare is the order of Sort.
func Compare(a, b Finding) int {
	return cmp.Or(
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Object.Kind, b.Object.Kind),
		strings.Compare(a.Object.Name, b.Object.Name),
		strings.Compare(a.Volume, b.Volume),
		strings.Compare(a.Check, b.Check),
		strings.Compare(string(a.Object.UID), string(b.Object.UID)),
	)
}
