package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/testing/bundles"
	"github.com/tether-dev/tether/internal/testing/cmdtest"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// The kinds a support engineer is asked to dump (docs/bundles.md), in the
// infra cluster and in a tenant.
const (
	dumpNamespaced = "vm,vmi,pods,pvc,datavolumes,kubevirt"
	dumpCluster    = "nodes pv volumeattachments csidrivers validatingwebhookconfigurations"
	dumpTenant     = "nodes,csinodes,volumeattachments,pv,csidrivers"
)

// audit --from decides as the live audit does, on the real control plane's
// world: the world seeded with drift and tenant evidence, audited live,
// then dumped as a user would (kubectl get -o yaml, in the infra cluster
// and in the tenant) and as each bundler lays it out, and audited from the
// dumps. The findings are the live ones, field for field, ages aside; with
// the tenant's bundle and without it, each as live, and the tenant's
// evidence changes the decision offline as it does live.
func TestAuditFrom_decidesAsLive(t *testing.T) {
	env := testenv.Get(t)
	ns, tenantKC := seed(t, env)
	moreDrift(t, env, ns)
	tenant := "guest=" + tenantKC + ":" + ns
	withTenant := findings(t, tether(t, env, "tether", "audit", "-o", "json", "-n", ns, "--tenant", tenant))
	alone := findings(t, tether(t, env, "tether", "audit", "-o", "json", "-n", ns))
	everywhere := findings(t, tether(t, env, "tether", "audit", "-o", "json", "-A"))
	if checks := checksOf(everywhere); !slices.Contains(checks, "StaleVolumeAttachment") || !slices.Contains(checks, "DanglingVolumeReference") {
		t.Fatalf("the world lacks the drift seeded: %v", checks)
	}
	if reflect.DeepEqual(withTenant, alone) {
		t.Fatalf("the tenant's evidence changes nothing live: the test proves nothing\n%v", alone)
	}

	dir := t.TempDir()
	infra := filepath.Join(dir, "infra")
	dumpTo(t, filepath.Join(infra, "ns.yaml"), tether(t, env, "kubectl", "get", dumpNamespaced, "-A", "-o", "yaml"))
	for _, kind := range strings.Fields(dumpCluster) {
		// A file per kind: this world has no PV, and an empty list says so.
		dumpTo(t, filepath.Join(infra, kind+".yaml"), tether(t, env, "kubectl", "get", kind, "-o", "yaml"))
	}
	guest := filepath.Join(dir, "guest.yaml")
	dumpTo(t, guest, cmdtest.Run(t, binDir, tenantKC, time.Minute, "kubectl", "get", dumpTenant, "-o", "yaml"))
	offline := "guest=" + guest + ":" + ns

	// Every namespace and the cluster's storage (StaleVolumeAttachment): a
	// dump of every namespace holds them, as the live cluster does.
	if got := findings(t, tether(t, env, "tether", "audit", "--from", infra, "-o", "json", "-A")); !reflect.DeepEqual(got, everywhere) {
		t.Errorf("kubectl get -o yaml, every namespace: offline findings differ from live\noffline: %v\nlive:    %v", got, everywhere)
	}
	from := map[string]string{"kubectl get -o yaml": infra, "kubectl cluster-info dump": clusterInfoDump(t, env, filepath.Join(dir, "cluster-info"))}
	objs := worldObjects(t, env, ns)
	for _, layout := range []string{bundles.MustGather, bundles.Harvester, bundles.DumpJSON} {
		d := filepath.Join(dir, layout)
		if err := bundles.Write(d, layout, time.Now(), objs); err != nil {
			t.Fatal(err)
		}
		from[layout] = d
	}
	for name, path := range from {
		got := findings(t, tether(t, env, "tether", "audit", "--from", path, "-o", "json", "-n", ns, "--tenant", offline))
		if !reflect.DeepEqual(got, withTenant) {
			t.Errorf("%s, with the tenant's bundle: offline findings differ from live\noffline: %v\nlive:    %v", name, got, withTenant)
		}
		got = findings(t, tether(t, env, "tether", "audit", "--from", path, "-o", "json", "-n", ns))
		if !reflect.DeepEqual(got, alone) {
			t.Errorf("%s, without a tenant: offline findings differ from live\noffline: %v\nlive:    %v", name, got, alone)
		}
	}
}

// moreDrift adds to the seeded world a stopped VM whose disk's claim and
// hot-plugged volume's claim are gone (DanglingVolumeReference; the
// removal of the hot-plugged one is not asked for by name) and a VolumeAttachment to a node that is
// gone (StaleVolumeAttachment).
func moreDrift(t *testing.T, env *testenv.Env, ns string) {
	t.Helper()
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	vm := fixture.VM("stopped-x", fixture.InNamespace(ns), fixture.WithVolume("data", fixture.PVC("pvc-gone", fixture.InNamespace(ns))),
		fixture.WithVolume("hp-gone", fixture.PVC("pvc-hp-gone", fixture.InNamespace(ns)), fixture.Hotpluggable()))
	va := fixture.VolumeAttachment("va-"+ns, "node-gone-"+ns, "pv-gone-"+ns)
	for _, o := range []client.Object{vm, va} {
		o.SetUID("")
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), va) })
}

// clusterInfoDump is a bundle of what `kubectl cluster-info dump` writes
// (the nodes, and the pods of every namespace) beside a dump of the kinds
// it lacks, each into a file of its own.
func clusterInfoDump(t *testing.T, env *testenv.Env, dir string) string {
	t.Helper()
	if r := tether(t, env, "kubectl", "cluster-info", "dump", "-A", "--output-directory", filepath.Join(dir, "cluster-info")); r.Code != 0 {
		t.Fatalf("kubectl cluster-info dump: exit %d: %s", r.Code, r.Stderr)
	}
	for _, kind := range strings.Fields("vm vmi pvc datavolumes kubevirt") {
		dumpTo(t, filepath.Join(dir, kind+".yaml"), tether(t, env, "kubectl", "get", kind, "-A", "-o", "yaml"))
	}
	for _, kind := range strings.Fields("pv volumeattachments csidrivers validatingwebhookconfigurations") {
		dumpTo(t, filepath.Join(dir, kind+".yaml"), tether(t, env, "kubectl", "get", kind, "-o", "yaml"))
	}
	return dir
}

// dumpTo writes what kubectl printed to path.
func dumpTo(t *testing.T, path string, r cmdtest.Result) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("kubectl: exit %d: %s", r.Code, r.Stderr)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(r.Stdout), 0o644); err != nil {
		t.Fatal(err)
	}
}

// worldObjects reads the world an audit of ns reads: ns's objects, the
// cluster's storage view and the KubeVirt CR.
func worldObjects(t *testing.T, env *testenv.Env, ns string) []client.Object {
	t.Helper()
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	var (
		vms   kubevirtv1.VirtualMachineList
		vmis  kubevirtv1.VirtualMachineInstanceList
		kvs   kubevirtv1.KubeVirtList
		pods  corev1.PodList
		pvcs  corev1.PersistentVolumeClaimList
		nodes corev1.NodeList
		pvs   corev1.PersistentVolumeList
		vas   storagev1.VolumeAttachmentList
		drvs  storagev1.CSIDriverList
	)
	var out []client.Object
	for _, l := range []client.ObjectList{&vms, &vmis, &pods, &pvcs, &kvs, &nodes, &pvs, &vas, &drvs} {
		var opts []client.ListOption
		switch l.(type) {
		case *kubevirtv1.VirtualMachineList, *kubevirtv1.VirtualMachineInstanceList, *corev1.PodList, *corev1.PersistentVolumeClaimList:
			opts = append(opts, client.InNamespace(ns))
		}
		if err := c.List(context.Background(), l, opts...); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			out = append(out, it.(client.Object))
		}
	}
	return out
}

// ages are the durations and times in a finding's words, which differ
// between two readings a moment apart.
var ages = regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z|\b(\d+(\.\d+)?(ns|µs|ms|s|m|h|d))+\b`)

// findings are an audit's findings as JSON values, ages aside.
func findings(t *testing.T, r cmdtest.Result) []any {
	t.Helper()
	if r.Code != 0 && r.Code != 1 {
		t.Fatalf("audit: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	var rep struct {
		Findings []any `json:"findings"`
	}
	if err := json.Unmarshal([]byte(ages.ReplaceAllString(r.Stdout, "AGE")), &rep); err != nil {
		t.Fatalf("audit -o json: %v\n%s", err, r.Stdout)
	}
	return rep.Findings
}

// checksOf names the checks of findings.
func checksOf(fs []any) []string {
	var out []string
	for _, f := range fs {
		c, _ := f.(map[string]any)["check"].(string)
		out = append(out, c)
	}
	return out
}
