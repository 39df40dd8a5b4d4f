package tether_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/config/crd"
	"github.com/tether-dev/tether/internal/testing/authz"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// scoped are the namespaces the ci/ values files scope the controller to.
var scoped = []string{"tenant-a", "tenant-b"}

// prepare installs the CRDs the rendered objects need (the Finding CRD,
// and testdata/crds.yaml for the ServiceMonitor and cert-manager kinds) and
// creates the scoped namespaces.
func prepare(t *testing.T, env *testenv.Env) {
	t.Helper()
	if err := crd.Install(context.Background(), env.Config); err != nil {
		t.Fatal(err)
	}
	kubectl(t, env, "apply", "-f", filepath.Join("testdata", "crds.yaml"))
	kubectl(t, env, "wait", "--for=condition=Established", "--timeout=60s", "-f", filepath.Join("testdata", "crds.yaml"))
	for _, n := range scoped {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func kubectl(t *testing.T, env *testenv.Env, args ...string) {
	t.Helper()
	if out, err := env.Kubectl(t, args...); err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
}

// file writes objects as one YAML stream into a temporary file.
func file(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	var data []byte
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		data = append(append(data, "---\n"...), y...)
	}
	f := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestServerDryRun: the real API server accepts everything each ci/ values
// file renders (server-side apply as a dry run, which runs validation and
// admission without storing anything). The chart's CRD is the one
// prepare installs for real (TestCRDIsConfigs).
func TestServerDryRun(t *testing.T) {
	env := testenv.Get(t)
	prepare(t, env)
	for _, f := range ciFiles(t) {
		t.Run(f, func(t *testing.T) {
			ns := env.Namespace(t)
			objs, err := renderIn(t, ns, values(t, f))
			if err != nil {
				t.Fatal(err)
			}
			objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "CustomResourceDefinition" })
			out, err := env.Kubectl(t, "apply", "--server-side", "--field-manager=helm", "--dry-run=server", "-f", file(t, objs))
			if err != nil {
				t.Fatalf("the API server refuses what ci/%s-values.yaml renders: %v\n%s", f, err, out)
			}
		})
	}
}

// TestRBAC: the RBAC each values file renders, applied for real, lets the
// controller's ServiceAccount (impersonated, so the real authorizer
// decides) do what the values enable and refuses the rest.
func TestRBAC(t *testing.T) {
	env := testenv.Get(t)
	prepare(t, env)
	other := env.Namespace(t)
	cases := []struct {
		values string
		check  func(sa *authz.Client, own, ns string)
	}{
		{"default", func(sa *authz.Client, own, ns string) {
			for _, r := range []string{authz.VMIs, authz.VMs, authz.KubeVirts, authz.Pods, authz.PVCs, authz.DataVolumes, authz.Nodes, authz.PVs, authz.Attachments} {
				sa.Want(true, "list", r, "")
			}
			sa.Want(true, "get", authz.Pods, ns)
			sa.Want(true, "patch", authz.Findings, ns)
			sa.Want(true, "delete", authz.Findings, ns)
			sa.Want(true, "patch", authz.Leases, own)
			sa.Want(false, "patch", authz.Leases, ns)
			// Protection is off: no finalizer patches, no revisions.
			sa.Want(false, "patch", authz.PVCs, ns)
			sa.Want(false, "patch", authz.DataVolumes, ns)
			sa.Want(false, "patch", authz.Revisions, ns)
			sa.Want(false, "get", authz.Namespaces, "")
			// Storage remediation is off: no pod deletes, no VolumeAttachment writes.
			sa.Want(false, "delete", authz.Pods, ns)
			sa.Want(false, "delete", authz.Attachments, "")
			sa.Want(false, "patch", authz.Attachments, "")
			sa.Want(false, "patch", authz.VMIs, ns)
			sa.Want(false, "get", authz.Secrets, own)
			sa.Want(false, "delete", authz.PolicyReports, ns)
		}},
		{"protection-off", func(sa *authz.Client, own, ns string) {
			sa.Want(true, "list", authz.VMIs, "")
			sa.Want(false, "patch", authz.PVCs, ns)
			sa.Want(false, "list", authz.Revisions, "")
			sa.Want(false, "delete", authz.Attachments, "")
		}},
		{"protection", func(sa *authz.Client, own, ns string) {
			sa.Want(true, "patch", authz.PVCs, ns)
			sa.Want(true, "patch", authz.DataVolumes, ns)
			sa.Want(true, "patch", authz.Revisions, ns)
			sa.Want(true, "get", authz.Namespaces, "")
			sa.Want(false, "delete", authz.PVCs, ns)
			sa.Want(false, "delete", authz.Revisions, ns)
			sa.Want(false, "delete", authz.Attachments, "")
		}},
		{"storage-remediation", func(sa *authz.Client, own, ns string) {
			sa.Want(true, "delete", authz.Attachments, "")
			sa.Want(true, "patch", authz.Attachments, "")
			sa.Want(true, "delete", authz.Pods, ns)
			sa.Want(false, "delete", authz.Nodes, "")
			sa.Want(false, "delete", authz.PVCs, ns)
			sa.Want(false, "patch", authz.Pods, ns)
			sa.Want(false, "patch", authz.PVCs, ns)
		}},
		{"namespaced", func(sa *authz.Client, own, ns string) {
			for _, s := range scoped {
				for _, r := range []string{authz.Pods, authz.VMIs, authz.VMs, authz.PVCs, authz.DataVolumes} {
					sa.Want(true, "list", r, s)
				}
				sa.Want(true, "patch", authz.Findings, s)
				sa.Want(false, "patch", authz.PVCs, s)
				sa.Want(false, "delete", authz.Pods, s)
			}
			sa.Want(true, "list", authz.KubeVirts, "")
			sa.Want(true, "patch", authz.Findings, own)
			sa.Want(false, "list", authz.Pods, own)
			for _, r := range []string{authz.Pods, authz.VMIs, authz.PVCs, authz.Findings} {
				sa.Want(false, "list", r, ns) // a namespace outside the scope
				sa.Want(false, "list", r, "")
			}
			for _, r := range []string{authz.Nodes, authz.PVs, authz.Attachments} {
				sa.Want(false, "list", r, "")
			}
		}},
		{"tenants", func(sa *authz.Client, own, ns string) {
			sa.Want(true, "delete", authz.PolicyReports, scoped[0])
			sa.Want(false, "delete", authz.PolicyReports, ns)
			sa.Want(false, "get", authz.Secrets, own) // the kubeconfigs are mounted, not read
		}},
		{"metrics", func(sa *authz.Client, own, ns string) {
			sa.Want(true, "delete", authz.PolicyReports, ns)
			sa.Want(true, "list", "clusterpolicyreports.wgpolicyk8s.io/v1alpha2", "")
			sa.Want(false, "patch", authz.PVCs, ns)
		}},
		{"flowcontrol", func(sa *authz.Client, own, ns string) {
			// Priority and fairness grant nothing (TestFlowControl).
			sa.Want(true, "list", authz.VMIs, "")
			sa.Want(false, "patch", authz.PVCs, ns)
		}},
		{"ha", func(sa *authz.Client, own, ns string) {
			sa.Want(true, "patch", authz.Leases, own)
			sa.Want(false, "delete", authz.Attachments, "")
		}},
	}
	var covered []string
	for _, tc := range cases {
		covered = append(covered, tc.values)
		t.Run(tc.values, func(t *testing.T) {
			own := env.Namespace(t)
			objs, err := renderIn(t, own, values(t, tc.values))
			if err != nil {
				t.Fatal(err)
			}
			objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
				k := o.GetKind()
				return k != "ServiceAccount" && k != "Role" && k != "RoleBinding" && k != "ClusterRole" && k != "ClusterRoleBinding"
			})
			f := file(t, objs)
			kubectl(t, env, "apply", "--server-side", "--field-manager=helm", "--force-conflicts", "-f", f)
			// The ClusterRoles' names are fixed: the next case binds them anew.
			t.Cleanup(func() { _, _ = env.Kubectl(t, "delete", "--ignore-not-found", "-f", f) })
			sa := authz.As(t, env.Config, "system:serviceaccount:"+own+":"+name)
			sa.WaitAllowed("patch", authz.Findings, own)
			tc.check(sa, own, other)
		})
	}
	for _, f := range ciFiles(t) {
		if !slices.Contains(covered, f) {
			t.Errorf("ci/%s-values.yaml has no RBAC case", f)
		}
	}
}

// TestFlowControl: what ci/flowcontrol-values.yaml renders, applied for
// real, puts the requests of the controller's ServiceAccount and of each
// identity in flowControl.subjects on the chart's priority level, and the
// controller's leader lease on the built-in leader-election level: the API
// server says so itself, in the headers of priority and fairness on its
// answers (a refused request is classified first).
func TestFlowControl(t *testing.T) {
	env := testenv.Get(t)
	objs := slices.DeleteFunc(render(t, values(t, "flowcontrol")), func(o *unstructured.Unstructured) bool {
		return o.GetKind() != "FlowSchema" && o.GetKind() != "PriorityLevelConfiguration"
	})
	f := file(t, objs)
	kubectl(t, env, "apply", "--server-side", "--field-manager=helm", "-f", f)
	t.Cleanup(func() { _, _ = env.Kubectl(t, "delete", "--ignore-not-found", "-f", f) })
	fc := env.Client.FlowcontrolV1()
	level := func(n string) string {
		pl, err := fc.PriorityLevelConfigurations().Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(pl.UID)
	}
	own, leader := level(name), level("leader-election")
	for _, tc := range []struct {
		who       rest.ImpersonationConfig
		path      string
		wantLevel string
	}{
		{rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + name}, "/apis/kubevirt.io/v1/virtualmachineinstances", own},
		{rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + name}, "/apis/coordination.k8s.io/v1/namespaces/" + namespace + "/leases/tether-controller", leader},
		{rest.ImpersonationConfig{UserName: "alice"}, "/api/v1/nodes", own},
		{rest.ImpersonationConfig{UserName: "bob", Groups: []string{"sre", "system:authenticated"}}, "/api/v1/persistentvolumes", own},
		{rest.ImpersonationConfig{UserName: "system:serviceaccount:ops:tether-audit"}, "/api/v1/pods", own},
		// Not a subject: the built-in schemas decide.
		{rest.ImpersonationConfig{UserName: "carol", Groups: []string{"system:authenticated"}}, "/api/v1/nodes", ""},
	} {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = tc.who
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, tc.who.UserName+" on its level", func() (bool, error) {
			resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + tc.path)
			if err != nil {
				return false, err
			}
			resp.Body.Close()
			got := resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
			if tc.wantLevel == "" {
				return got != "" && got != own && got != leader, nil
			}
			return got == tc.wantLevel, fmt.Errorf("%s %s: priority level %q (status %d)", tc.who.UserName, tc.path, got, resp.StatusCode)
		})
	}
}
