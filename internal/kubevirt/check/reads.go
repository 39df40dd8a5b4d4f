package check

import "github.com/tether-dev/tether/internal/kubevirt/snapshot"

// Reads returns the kinds the named checks decide from; no names means
// every check. An unknown name reads everything.
func Reads(names []string) snapshot.Kinds {
	if len(names) == 0 {
		return snapshot.AllKinds
	}
	var k snapshot.Kinds
	for _, n := range names {
		c, err := Lookup(n)
		if err != nil {
			return snapshot.AllKinds
		}
		k |= c.Reads
	}
	return k
}
