package guard

import (
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/findingrecord"
)

// The anomaly guard trips on a picture that turned wrong, and not on one
// an operator accepted (the same picture, recorded as the last counts).
func TestGuardReasons(t *testing.T) {
	counts := func(vmis, safe, limit int, tenants ...any) findingrecord.Counts {
		c := findingrecord.Counts{VMIs: vmis, Safe: safe, Limit: limit, TenantAttachments: map[string]int{}, Hotplugs: map[string]int{}}
		for i := 0; i+2 < len(tenants)+1; i += 3 {
			name := tenants[i].(string)
			c.TenantAttachments[name], c.Hotplugs[name] = tenants[i+1].(int), tenants[i+2].(int)
		}
		return c
	}
	p := func(c findingrecord.Counts) *findingrecord.Counts { return &c }
	for _, tc := range []struct {
		name string
		last *findingrecord.Counts
		now  findingrecord.Counts
		want []string // substrings, one per reason; none: no trip
	}{
		{"steady", p(counts(100, 2, 25, "g", 50, 50)), counts(100, 3, 25, "g", 48, 50), nil},
		{"a tenant empties while its VMIs keep their hot-plugs", p(counts(100, 2, 25, "g", 50, 50)), counts(100, 2, 25, "g", 0, 50),
			[]string{`tenant "g" lists no VolumeAttachment of its driver (it listed 50 before), while the VMIs it serves hold 50`}},
		{"first look: a tenant with none and many hot-plugs", nil, counts(100, 0, 25, "g", 0, 12), []string{`tenant "g" lists no VolumeAttachment`}},
		{"a tenant with none and few hot-plugs", nil, counts(100, 0, 25, "g", 0, 9), nil},
		{"an accepted empty tenant stays accepted", p(counts(100, 0, 25, "g", 0, 50)), counts(100, 0, 25, "g", 0, 60), nil},
		{"the VMIs vanish", p(counts(100, 0, 25)), counts(0, 0, 25), []string{"hold no VMI, where they held 100"}},
		{"few VMIs go", p(counts(3, 0, 25)), counts(0, 0, 25), nil},
		{"mass safe findings", p(counts(100, 2, 25)), counts(100, 40, 25), []string{"40 findings are safe to act on at once, more than the limit of 25"}},
		{"mass safe findings, accepted", p(counts(100, 40, 25)), counts(100, 41, 25), nil},
		{"an unreachable tenant (not counted) is no anomaly", p(counts(100, 0, 25, "g", 50, 50)), counts(100, 0, 25), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Reasons(tc.last, tc.now)
			if len(got) != len(tc.want) {
				t.Fatalf("reasons %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("reason %q lacks %q", got[i], w)
				}
			}
		})
	}
	// The record is rewritten only when what the comparison reads changes.
	if shape(counts(100, 2, 25, "g", 50, 50)) != shape(counts(120, 3, 25, "g", 48, 51)) {
		t.Error("counts that read the same have different shapes")
	}
	if shape(counts(100, 2, 25, "g", 50, 50)) == shape(counts(100, 2, 25, "g", 0, 50)) {
		t.Error("an emptied tenant has the same shape")
	}
}
