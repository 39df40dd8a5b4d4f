package kubevirt

import (
	"fmt"
	"strings"
	"testing"

	f "github.com/tether-dev/tether/internal/testing/fixture"
)

// A tenant that could not be read, or that lists no attachment of its
// driver while the VMIs it serves hold AnomalyFloor hot-plugs or more, is an
// anomaly; fewer hot-plugs, or one attachment, is not.
func TestAnomalies(t *testing.T) {
	vmis := func(n int) []any {
		var out []any
		for i := 0; i < n; i++ {
			out = append(out, f.VMI(fmt.Sprintf("vm-%d", i), f.WithHotplug("dv")))
		}
		return out
	}
	cases := []struct {
		name  string
		items []any
		want  string
	}{
		{"unreachable", []any{f.Tenant("t1", f.Unreachable("dial tcp: refused"))}, `tenant "t1" could not be read (dial tcp: refused)`},
		{"no attachment, many hot-plugs", append(vmis(AnomalyFloor), f.Tenant("t1", f.Nodes("vm-0"))), `tenant "t1" lists no VolumeAttachment of driver csi.kubevirt.io, while the VMIs it serves have 10 hot-plugged volumes`},
		{"no attachment, few hot-plugs", append(vmis(AnomalyFloor-1), f.Tenant("t1", f.Nodes("vm-0"))), ""},
		{"one attachment", append(vmis(AnomalyFloor), f.Tenant("t1", f.Nodes("vm-0"), f.Attaches("vm-0", "dv"))), ""},
		{"hot-plugs of another namespace", append(vmis(AnomalyFloor), f.Tenant("t1", f.ForNamespace("other"))), ""},
	}
	for _, c := range cases {
		got := strings.Join(Anomalies(f.Snapshot(c.items...)), "; ")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: anomalies %q, want %q", c.name, got, c.want)
		}
	}
}
