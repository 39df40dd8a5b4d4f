package doctor

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// bytesOf hands out the fuzzer's bytes one at a time (0 once they run out).
type bytesOf struct{ b []byte }

func (g *bytesOf) next() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *bytesOf) pick(options ...string) string { return options[int(g.next())%len(options)] }

// facts builds any Facts from the fuzzer's bytes: known and unknown
// gates of any release, HCO or not, probes with every answer virt-api
// and the API server give (and some they do not), tenants in any state.
func (g *bytesOf) facts() Facts {
	var f Facts
	if g.next()%5 != 0 {
		f.Gates = snapshot.FeatureGates{Known: true, KubeVirtVersion: g.pick("v1.9.0", "v1.7.0", "v1.5.2", "v1.10.0-rc.1", "", "garbage"), Phase: g.pick("Deployed", "")}
		for _, gate := range []string{hp, decl} {
			switch g.next() % 3 {
			case 1:
				f.Gates.Enabled = append(f.Gates.Enabled, gate)
			case 2:
				f.Gates.Disabled = append(f.Gates.Disabled, gate)
			}
		}
	}
	f.HCO = HCO{Known: g.next()%4 != 0, Present: g.next()%2 == 0, Name: "ns/hco"}
	for _, r := range []Route{RouteVM, RouteVMIOwned, RouteVMIStandalone} {
		p := Probe{Route: r, Subject: "ns/" + g.pick("a", absentName), Exists: g.next()%2 == 0}
		p.Code = []int{0, 202, 400, 401, 403, 404, 409, 422, 500, 503}[int(g.next())%10]
		p.Message = g.pick(ansDoesNotExist, ansNotRunning, ansNoGate, ansOwned, `virtualmachineinstance.kubevirt.io "`+strings.TrimPrefix(p.Subject, "ns/")+`" not found`, "the server could not find the requested resource", "")
		if p.Code == 0 {
			p.Err = "connection refused"
		}
		f.Probes = append(f.Probes, p)
	}
	for i := int(g.next() % 3); i > 0; i-- {
		t := Tenant{Read: snapshot.Tenant{Name: fmt.Sprint("t", i), Reachable: g.next()%3 != 0, DriverMissing: g.next()%4 == 0, Error: g.pick("", "forbidden", "timeout")}}
		for n := int(g.next() % 3); n > 0; n-- {
			t.Read.Nodes = append(t.Read.Nodes, snapshot.TenantNode{Name: fmt.Sprint("w", n), ProviderID: g.pick("kubevirt://vm", "", "aws://x")})
		}
		t.Route = RouteEvidence{InVMSpec: int(g.next() % 2), VMIOnly: int(g.next() % 2), Example: "v"}
		if g.next()%2 == 0 {
			t.Fence = &FenceAccess{Err: g.pick("", "", "timeout")}
			if g.next()%2 == 0 {
				t.Fence.Missing = []string{"patch nodes"}
			}
		}
		f.Tenants = append(f.Tenants, t)
	}
	f.Kube = Kube{ControllerManagerFound: g.next()%2 == 0, NodesRead: g.next()%4 != 0}
	if f.Kube.ControllerManagerFound {
		f.Kube.ControllerManagerArgs = []string{g.pick("--disable-force-detach-on-timeout=true", "--disable-force-detach-on-timeout=false", "--disable-force-detach-on-timeout", "--v=2")}
	}
	if g.next()%2 == 0 {
		f.Kube.OutOfService = []TaintedNode{{Name: "n", Ready: g.next()%2 == 0}}
	}
	if g.next()%3 == 0 {
		f.Controller = &ControllerAccess{Account: "sa", Asked: 3, Fences: g.next()%2 == 0}
		if g.next()%2 == 0 {
			f.Controller.Missing = []MissingGrant{{Feature: "x", Grant: "get y", Fix: "z", Optional: g.next()%2 == 0}}
		}
	}
	return f
}

// FuzzDecide holds the doctor's promises for any facts, by rules stated
// here and not taken from Decide:
//
//   - every line has a check, a subject, a status, a why and a source, and
//     a fix unless it is OK;
//   - nothing unread is OK: unknown gates, a tenant not read, a
//     controller-manager not found;
//   - a tenant's fence line is OK only when its answer was read and it
//     may fence, or it may not and the controller's configuration read
//     does not fence;
//   - a route line is OK only when virt-api's answer proved the route
//     passes its gate check (a 409 of its volume validation, or its own
//     404 for a name that does not exist) and, for VM-owned VMIs, never
//     when it refuses them (400 "owned by a VM");
//   - the exit code is 2 with a FAIL, else 1 with a WARN, else 0.
func FuzzDecide(f *testing.F) {
	for _, s := range [][]byte{{}, {1, 1, 1, 1, 1, 1}, []byte("doctor: never a false OK"), {255, 0, 255, 0, 255, 0, 255, 0, 255, 0, 255, 0, 255, 0, 255, 0}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		facts := (&bytesOf{b: data}).facts()
		lines := Decide(facts)
		worst := 0
		for _, l := range lines {
			if l.Check == "" || l.Subject == "" || l.Why == "" || l.Source == "" || (l.Status != drift.StatusOK && l.Fix == "") {
				t.Fatalf("incomplete line %+v", l)
			}
			worst = max(worst, map[drift.Status]int{drift.StatusOK: 0, drift.StatusWarn: 1, drift.StatusFail: 2}[l.Status])
			if l.Status != drift.StatusOK {
				continue
			}
			switch l.Check {
			case CheckGates, CheckUpgrade:
				if !facts.Gates.Known {
					t.Fatalf("%s OK with the KubeVirt object unread: %+v", l.Check, l)
				}
			case CheckForceDetach:
				if !facts.Kube.ControllerManagerFound {
					t.Fatalf("force-detach OK without the controller-manager's flags: %+v", l)
				}
			case CheckOutOfService:
				if !facts.Kube.NodesRead {
					t.Fatalf("out-of-service OK without reading Nodes: %+v", l)
				}
			case CheckTenantAccess, CheckTenantNodes, CheckTenantDriver, CheckTenantRoute:
				for _, tn := range facts.Tenants {
					if "tenant "+tn.Read.Name == l.Subject && !tn.Read.Reachable {
						t.Fatalf("%s OK for a tenant not read: %+v", l.Check, l)
					}
				}
			case CheckTenantFence:
				for _, tn := range facts.Tenants {
					if "tenant "+tn.Read.Name != l.Subject || tn.Fence == nil {
						continue
					}
					fences := facts.Controller != nil && facts.Controller.Fences
					if tn.Fence.Err != "" || (len(tn.Fence.Missing) > 0 && fences) {
						t.Fatalf("fence OK for %+v (controller fences: %v): %+v", *tn.Fence, fences, l)
					}
				}
			case CheckRoute:
				for _, p := range facts.Probes {
					if string(p.Route) == l.Subject && !provesGatePassed(p) {
						t.Fatalf("route OK without proof: %+v from %+v", l, p)
					}
				}
			}
		}
		if got := drift.DoctorExit(lines); got != worst {
			t.Fatalf("exit %d, want %d", got, worst)
		}
	})
}

// provesGatePassed: virt-api answered past its gate check (volumes.go:
// gate, then fetch (404 naming the object), then owner (400 "owned by a
// VM"), then running and volume validation (409)).
func provesGatePassed(p Probe) bool {
	name := strings.TrimPrefix(p.Subject, "ns/")
	switch {
	case p.Code == 409 && (strings.Contains(p.Message, "because it does not exist") || strings.Contains(p.Message, "VMI is not running")):
		return true
	case p.Code == 404 && !p.Exists && strings.Contains(p.Message, `"`+name+`" not found`):
		return true
	}
	return false
}
