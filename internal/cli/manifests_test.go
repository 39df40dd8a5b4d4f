package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tether-dev/tether/config/rbac"
)

// run runs the command line and returns the exit code, stdout and stderr.
func run(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestManifestsRBAC(t *testing.T) {
	code, out, errOut := run("manifests", "rbac", "--namespace", "tenant-a", "--namespace", "tenant-b", "--protection")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"kind: ClusterRole\n", "name: " + rbac.ClusterRoleName, "namespace: tenant-a", "namespace: tenant-b",
		"name: " + rbac.RecordsRoleName, "- patch", "- controllerrevisions"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "creationTimestamp") || strings.Contains(out, "nodes") {
		t.Errorf("output carries creationTimestamp or a storage read:\n%s", out)
	}
}

func TestManifestsRBAC_badInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no namespace -> names --namespace", nil, "--namespace NS"},
		{"invalid namespace -> names it", []string{"--namespace", "Tenant_A"}, `namespace "Tenant_A" is not a valid namespace name`},
		{"a namespace twice -> says so", []string{"--namespace", "a", "--namespace", "a"}, `"a" is named twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(append([]string{"manifests", "rbac"}, tc.args...)...)
			if code != ExitError || out != "" || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and an error with %q", code, out, errOut, tc.want)
			}
		})
	}
}

func TestController_metricsCertDirNeedsHTTPS(t *testing.T) {
	code, _, errOut := run("controller", "--metrics-secure=false", "--metrics-cert-dir", t.TempDir(), "--kubeconfig", "/nonexistent")
	if code != ExitError || !strings.Contains(errOut, "--metrics-cert-dir is for HTTPS") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming --metrics-cert-dir", code, errOut)
	}
}
