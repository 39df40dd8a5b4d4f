package version

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// goList returns what go.mod requires of each module (the replacement's
// version where one is set).
func goList(t *testing.T, modules ...string) map[string]string {
	t.Helper()
	args := append([]string{"list", "-m", "-f", "{{.Path}} {{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}"}, modules...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, v, _ := strings.Cut(line, " ")
		got[path] = v
	}
	return got
}

func TestGoModVersions(t *testing.T) {
	want := goList(t, KubeVirtAPIModule, KubernetesAPIModule)
	for m, v := range want {
		if goModVersions[m] != v {
			t.Errorf("modules.go says %s %q, go.mod requires %q: run go generate ./internal/version", m, goModVersions[m], v)
		}
	}
	// A test binary carries no dependency list: the versions still hold.
	i := Get()
	if i.KubeVirtAPI != want[KubeVirtAPIModule] || i.KubernetesAPI != want[KubernetesAPIModule] {
		t.Errorf("in a test binary Get() = kubevirt %q, kubernetes %q; go.mod requires %v", i.KubeVirtAPI, i.KubernetesAPI, want)
	}
	if i.GoVersion != runtime.Version() || i.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("Get() = go %q platform %q, want %q %q", i.GoVersion, i.Platform, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
	}
}

func TestInfoFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		Deps: []*debug.Module{
			{Path: KubeVirtAPIModule, Version: "v1.2.3"},
			{Path: KubernetesAPIModule, Version: "v0.1.0", Replace: &debug.Module{Path: "example.com/fork/api", Version: "v0.1.1-fork"}},
			{Path: "k8s.io/apimachinery", Version: "v9.9.9"},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}},
	}
	i := info(bi)
	if i.KubeVirtAPI != "v1.2.3" {
		t.Errorf("kubevirt API = %q, want the dependency's v1.2.3", i.KubeVirtAPI)
	}
	if i.KubernetesAPI != "v0.1.1-fork" {
		t.Errorf("kubernetes API = %q, want the replacement's v0.1.1-fork", i.KubernetesAPI)
	}
	if i.Commit != "abc123" {
		t.Errorf("commit = %q, want vcs.revision abc123 when -ldflags set none", i.Commit)
	}
	Commit = "fromldflags"
	defer func() { Commit = "" }()
	if got := info(bi).Commit; got != "fromldflags" {
		t.Errorf("commit = %q, want the -ldflags value over vcs.revision", got)
	}
}

func TestBuildDate(t *testing.T) {
	for epoch, want := range map[string]string{
		"0":          "1970-01-01T00:00:00Z",
		"1700000000": "2023-11-14T22:13:20Z",
		"":           "",
		"yesterday":  "",
	} {
		if got := buildDate(epoch); got != want {
			t.Errorf("buildDate(%q) = %q, want %q", epoch, got, want)
		}
	}
}

// TestBuiltBinary builds tether as the Makefile does and checks that
// `tether version -o json` reports the -ldflags values and go.mod's API
// versions, read from the binary's own dependency list.
func TestBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bin := filepath.Join(t.TempDir(), "tether")
	ldflags := "-X " + Package + ".Version=v1.2.3-test -X " + Package + ".Commit=0123456789abcdef -X " + Package + ".Epoch=1700000000"
	build := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/tether")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("tether version -o json: %v", err)
	}
	var got Info
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	mods := goList(t, KubeVirtAPIModule, KubernetesAPIModule)
	want := Info{
		Version: "v1.2.3-test", Commit: "0123456789abcdef", BuildDate: "2023-11-14T22:13:20Z",
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		KubeVirtAPI: mods[KubeVirtAPIModule], KubernetesAPI: mods[KubernetesAPIModule],
	}
	if got != want {
		t.Errorf("tether version -o json = %+v\nwant %+v", got, want)
	}
	// The field names are a contract.
	for _, field := range []string{`"version"`, `"commit"`, `"buildDate"`, `"goVersion"`, `"platform"`, `"kubevirtAPI"`, `"kubernetesAPI"`} {
		if !strings.Contains(string(out), field) {
			t.Errorf("tether version -o json has no %s field:\n%s", field, out)
		}
	}
}
