package controller_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/crdinstall"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/report/policyreport"
	"github.com/tether-dev/tether/internal/report/reportapi"
	"github.com/tether-dev/tether/internal/testing/reportcrds"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// reportsOn turns the policy reports on with a short interval.
func reportsOn(cfg *config.Config, api reportapi.API) *config.Config {
	cfg.PolicyReports = config.PolicyReportsConfig{Enabled: true, API: api, Interval: metav1.Duration{Duration: 500 * time.Millisecond}}
	return cfg
}

// report reads tether's PolicyReport in the world's namespace; nil when
// there is none.
func (w *world) report() *unstructured.Unstructured {
	w.t.Helper()
	api := reportapi.WGPolicy
	res, _ := api.Resources()
	u, err := w.env.Dynamic.Resource(schema.GroupVersionResource{Group: api.Group(), Version: api.Version(), Resource: res}).
		Namespace(w.ns).Get(w.ctx, policyreport.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return u
}

// volumesIn lists the volume property of each result of r, in order.
func volumesIn(r *unstructured.Unstructured) []string {
	results, _, _ := unstructured.NestedSlice(r.Object, "results")
	var out []string
	for _, res := range results {
		v, _, _ := unstructured.NestedString(res.(map[string]any), "properties", "volume")
		out = append(out, v)
	}
	return out
}

func (w *world) waitReport(what string, want []string) *unstructured.Unstructured {
	w.t.Helper()
	var got *unstructured.Unstructured
	testenv.Eventually(w.t, 30*time.Second, what, func() (bool, error) {
		got = w.report()
		if want == nil {
			return got == nil, nil
		}
		return got != nil && fmt.Sprint(volumesIn(got)) == fmt.Sprint(want), nil
	})
	return got
}

// TestController_policyReports: with --policy-reports the controller,
// running as its ServiceAccount with config/rbac/policyreports, writes a
// PolicyReport for an existing finding, adds a result when a finding
// appears, drops one when its finding closes, and deletes the namespace's
// report when the last one does; every write is its field manager's.
func TestController_policyReports(t *testing.T) {
	w := newWorld(t)
	w.env.InstallController(t, "rbac/policyreports")
	if err := crdinstall.Install(w.ctx, w.env.Config, reportcrds.For(reportapi.WGPolicy)...); err != nil {
		t.Fatal(err)
	}
	w.orphan("vm-p", "pvc-a")
	// A long grace period: the findings stay open until the test closes them.
	w.start(reportsOn(w.cfg(time.Hour), reportapi.WGPolicy))

	r := w.waitReport("report with pvc-a", []string{"pvc-a"})
	res := r.Object["results"].([]any)[0].(map[string]any)
	if res["rule"] != "OrphanHotplugVolume" || res["result"] != policyreport.Fail || res["policy"] != policyreport.Policy {
		t.Errorf("result %v", res)
	}
	if p := res["properties"].(map[string]any); p["phase"] != string(v1alpha1.PhaseWaiting) || !strings.HasPrefix(p["record"].(string), w.ns+"/") {
		t.Errorf("properties %v: want phase Waiting and the record", p)
	}
	if r.GetLabels()[policyreport.LabelManagedBy] != policyreport.ManagedBy {
		t.Errorf("labels %v", r.GetLabels())
	}
	for _, m := range r.GetManagedFields() {
		if m.Manager != v1alpha1.FieldManager || m.Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("written by %s (%s), want only %s applying", m.Manager, m.Operation, v1alpha1.FieldManager)
		}
	}
	rv := r.GetResourceVersion()

	// Findings refreshed but unchanged: the report is not written again.
	time.Sleep(2 * time.Second)
	if again := w.report(); again.GetResourceVersion() != rv {
		t.Errorf("report rewritten with no change in the findings (resourceVersion %s -> %s)", rv, again.GetResourceVersion())
	}

	// A finding appears.
	w.orphan("vm-p", "pvc-b")
	w.waitReport("report with pvc-a and pvc-b", []string{"pvc-a", "pvc-b"})

	// A finding closes: its result goes.
	w.unplug("vm-p", "pvc-a")
	w.waitReport("report with pvc-b only", []string{"pvc-b"})

	// The last one closes: the report goes; the namespaced scope has no
	// cluster report.
	w.unplug("vm-p", "pvc-b")
	w.waitReport("no report", nil)
	api := reportapi.WGPolicy
	_, clRes := api.Resources()
	if _, err := w.env.Dynamic.Resource(schema.GroupVersionResource{Group: api.Group(), Version: api.Version(), Resource: clRes}).
		Get(w.ctx, policyreport.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a controller limited to namespaces wrote the cluster report (get: %v)", err)
	}
}

// unplug removes a hot-plugged volume from the VMI by hand: its finding
// closes.
func (w *world) unplug(vmi, volume string) {
	w.t.Helper()
	if err := virtapi.RemoveVolume(w.ctx, w.sub, virtapi.VMI, w.ns, vmi, &kubevirtv1.RemoveVolumeOptions{Name: volume}); err != nil {
		w.t.Fatal(err)
	}
	w.waitVMI(vmi, volume+" unplugged", func(v *kubevirtv1.VirtualMachineInstance) bool { return !lists(v, volume) })
}

// TestController_policyReports_noCRD: without the report API's CRDs the
// controller says so once, naming the fix, and records and acts as ever.
func TestController_policyReports_noCRD(t *testing.T) {
	w := newWorld(t)
	w.env.InstallController(t, "rbac/policyreports")
	var mu sync.Mutex
	var logs []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		logs = append(logs, prefix+" "+args)
		mu.Unlock()
		t.Log(prefix, args)
	}, funcr.Options{})
	w.orphan("vm-n", "pvc-n")
	// No package test installs the openreports.io CRDs.
	w.start(reportsOn(w.cfg(time.Second), reportapi.OpenReports), func(o *controller.Options) { o.Log = log })
	w.waitVMI("vm-n", "pvc-n detached", func(v *kubevirtv1.VirtualMachineInstance) bool { return !lists(v, "pvc-n") })
	w.waitFinding("vm-n", "pvc-n", v1alpha1.PhaseResolved, "")
	time.Sleep(time.Second) // several report passes
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, l := range logs {
		if strings.Contains(l, "does not serve openreports.io/v1alpha1") {
			n++
			if !strings.Contains(l, "install the report CRDs") || !strings.Contains(l, "--report-api") {
				t.Errorf("the message does not name the fix: %s", l)
			}
		}
	}
	if n != 1 {
		t.Errorf("the missing report API was logged %d times, want once", n)
	}
}
