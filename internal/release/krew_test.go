package release

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/version"
)

// krewTools builds (once, cached) krew's own krew and
// validate-krew-manifest with hack/krew.sh and returns their directory. It
// skips the test only when Go cannot fetch krew's modules.
func krewTools(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "hack", "krew.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := stderr.String()
		for _, offline := range []string{"dial tcp", "no such host", "connection refused", "i/o timeout", "proxy.golang.org"} {
			if strings.Contains(msg, offline) {
				t.Skipf("go cannot fetch sigs.k8s.io/krew to build krew's tools:\n%s", msg)
			}
		}
		t.Fatalf("hack/krew.sh: %v\n%s", err, msg)
	}
	return strings.TrimSpace(string(out))
}

// TestKrewInstall builds the plugin archive for this machine and its krew
// manifest as make dist does, has krew's validator check the manifest, has
// krew install the plugin from the archive (offline) into a new KREW_ROOT,
// runs the installed kubectl-tether, and follows the manifest's caveat for
// completion through the real kubectl.
func TestKrewInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tether and krew")
	}
	b := testBuild(t)
	tools := krewTools(t, b.Root)
	host := Platform{runtime.GOOS, runtime.GOARCH}
	out := t.TempDir()
	r, err := BuildDist(context.Background(), b, []Platform{host}, out, filepath.Join(b.Root, "deploy", "krew", "tether.yaml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(r.Archives[0].Path); got != "tether_v0.0.0-test.1_"+host.OS+"_"+host.Arch+".tar.gz" {
		t.Errorf("archive name %s", got)
	}
	manifest, err := os.ReadFile(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: tether\n", "version: v0.0.0-test.1\n", "sha256: " + r.Archives[0].SHA256 + "\n",
		"uri: https://github.com/tether-dev/tether/releases/download/v0.0.0-test.1/tether_v0.0.0-test.1_" + host.OS + "_" + host.Arch + ".tar.gz\n"} {
		if !strings.Contains(string(manifest), want) {
			t.Errorf("the manifest has no %q:\n%s", want, manifest)
		}
	}
	if msg, err := exec.Command(filepath.Join(tools, "validate-krew-manifest"), "-manifest", r.Manifest, "-skip-install").CombinedOutput(); err != nil {
		t.Fatalf("validate-krew-manifest rejects the manifest: %v\n%s", err, msg)
	}

	krewRoot := t.TempDir()
	env := append(os.Environ(), "KREW_ROOT="+krewRoot, "KREW_NO_UPGRADE_CHECK=1", "PATH="+filepath.Join(krewRoot, "bin")+":"+os.Getenv("PATH"))
	install := exec.Command(filepath.Join(tools, "krew"), "install", "--manifest="+r.Manifest, "--archive="+r.Archives[0].Path)
	install.Env = env
	if msg, err := install.CombinedOutput(); err != nil {
		t.Fatalf("krew install: %v\n%s", err, msg)
	}
	run := exec.Command(filepath.Join(krewRoot, "bin", "kubectl-tether"), "version", "-o", "json")
	run.Env = env
	got, err := run.Output()
	if err != nil {
		t.Fatalf("the installed kubectl-tether version: %v", err)
	}
	var i version.Info
	if err := json.Unmarshal(got, &i); err != nil || i.Version != b.Version || i.Commit != b.Commit {
		t.Errorf("the installed kubectl-tether version = %s (%v), want version %s commit %s", got, err, b.Version, b.Commit)
	}

	// The caveat's link, then kubectl completes the plugin's commands.
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl on PATH to complete kubectl tether")
	}
	helper := filepath.Join(krewRoot, "store", "tether", b.Version, "kubectl_complete-tether")
	if err := os.Symlink(helper, filepath.Join(krewRoot, "bin", "kubectl_complete-tether")); err != nil {
		t.Fatal(err)
	}
	complete := exec.Command(kubectl, "__complete", "tether", "au")
	complete.Env = env
	if got, err := complete.Output(); err != nil || !strings.Contains(string(got), "audit\t") {
		t.Errorf("kubectl __complete tether au after krew install: %v\n%s", err, got)
	}
}

// TestArchiveReproducible writes one binary's archive twice, at different
// times and places, and expects the same bytes.
func TestArchiveReproducible(t *testing.T) {
	b := testBuild(t)
	bin := filepath.Join(t.TempDir(), "tether")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := Platform{"linux", "amd64"}
	a1, err := WriteArchive(b, p, bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(bin, b.Time(), b.Time().Add(3600e9)); err != nil {
		t.Fatal(err)
	}
	a2, err := WriteArchive(b, p, bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a1.SHA256 != a2.SHA256 {
		t.Errorf("two archives of one binary: sha256 %s and %s", a1.SHA256, a2.SHA256)
	}
}

func TestDistNeedsReleaseVersion(t *testing.T) {
	b := testBuild(t)
	b.Version = "5ae0c85-dirty"
	_, err := BuildDist(context.Background(), b, []Platform{{"linux", "amd64"}}, t.TempDir(), "")
	if err == nil || !strings.Contains(err.Error(), "VERSION=v0.1.0") {
		t.Errorf("err = %v, want one saying to pass a release version", err)
	}
}
