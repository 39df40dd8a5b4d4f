package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/testing/cmdtest"
)

func TestCompletionScripts(t *testing.T) {
	// What each shell's script must contain to be that shell's: the
	// function or command that registers it.
	marks := map[string]string{
		"bash":       "complete -o default -F __start_tether tether",
		"zsh":        "#compdef tether",
		"fish":       "complete -c tether",
		"powershell": "Register-ArgumentCompleter -CommandName 'tether'",
	}
	for _, sh := range completionShells {
		code, out, errs := run("completion", sh)
		if code != ExitOK || errs != "" {
			t.Fatalf("completion %s: exit %d, stderr %q", sh, code, errs)
		}
		if !strings.Contains(out, marks[sh]) {
			t.Errorf("completion %s: no %q in the script", sh, marks[sh])
		}
	}
	if code, _, errs := run("completion", "tcsh"); code != ExitError || !strings.Contains(errs, `invalid argument "tcsh"`) {
		t.Errorf("completion tcsh: exit %d, stderr %q; want exit 2 naming the argument", code, errs)
	}
}

func TestBashCompletionParses(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on PATH")
	}
	_, out, _ := run("completion", "bash")
	script := filepath.Join(t.TempDir(), "tether.bash")
	if err := os.WriteFile(script, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(bash, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n rejects the completion script: %v\n%s", err, msg)
	}
}

func TestCompleteCommandNames(t *testing.T) {
	for _, c := range []struct{ args, want []string }{
		{[]string{"__complete", "au"}, []string{"audit"}},
		{[]string{"__complete", "completion", ""}, completionShells},
		{[]string{"__complete", "version", "--"}, []string{"--output"}},
	} {
		code, out, _ := run(c.args...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d", c.args, code)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v offers no %q:\n%s", c.args, w, out)
			}
		}
	}
}

func TestVersionOutput(t *testing.T) {
	code, out, _ := run("version")
	if code != ExitOK || !strings.HasPrefix(out, "tether ") || !strings.Contains(out, "kubevirt.io/api:") || !strings.Contains(out, "go:              "+runtime.Version()) {
		t.Errorf("version: exit %d\n%s", code, out)
	}
	code, out, _ = run("version", "-o", "json")
	var v map[string]string
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != ExitOK {
		t.Fatalf("version -o json: exit %d, %v\n%s", code, err, out)
	}
	if v["goVersion"] != runtime.Version() || v["kubevirtAPI"] == "" || v["kubernetesAPI"] == "" {
		t.Errorf("version -o json = %v", v)
	}
	_, out, _ = run("version", "-o", "yaml")
	if !strings.Contains(out, "goVersion: "+runtime.Version()) {
		t.Errorf("version -o yaml has no goVersion line:\n%s", out)
	}
	if code, _, errs := run("version", "-o", "table"); code != ExitError || !strings.Contains(errs, "use json or yaml") {
		t.Errorf("version -o table: exit %d, stderr %q; want exit 2 naming the formats", code, errs)
	}
}

// TestKubectlPluginCompletion completes `kubectl tether au` with the real
// kubectl, which runs kubectl_complete-tether from PATH.
func TestKubectlPluginCompletion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl on PATH")
	}
	dir, err := cmdtest.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	_, file, _, _ := runtime.Caller(0)
	script, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "hack", "kubectl_complete-tether"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-tether"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubectl, "__complete", "tether", "au")
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl __complete tether au: %v", err)
	}
	if !strings.Contains(string(out), "audit\t") {
		t.Errorf("kubectl __complete tether au offers no audit:\n%s", out)
	}
}
