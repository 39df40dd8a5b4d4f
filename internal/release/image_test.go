package release

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/tether-dev/tether/internal/version"
)

// testBuild is the build the tests make: a version and commit no real build
// has, so that finding them in the binary's output proves they came
// through.
func testBuild(t *testing.T) Build {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return Build{
		Root:    filepath.Join(filepath.Dir(file), "..", ".."),
		Version: "v0.0.0-test.1", Commit: "0123456789abcdef0123456789abcdef01234567",
		Epoch: 1700000000,
	}
}

var testPlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}}

// built is one BuildImage of testBuild, shared by the image tests.
var built struct {
	once sync.Once
	dir  string
	r    ImageResult
	err  error
}

func buildOnce(t *testing.T) ImageResult {
	t.Helper()
	if testing.Short() {
		t.Skip("builds tether for two platforms")
	}
	if _, err := os.Stat(DefaultCACerts); err != nil {
		t.Skipf("no CA bundle at %s on this machine (apt-get install ca-certificates)", DefaultCACerts)
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "tether-image-")
		if built.err == nil {
			built.r, built.err = BuildImage(context.Background(), testBuild(t), testPlatforms, built.dir, DefaultCACerts)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.r
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// files lists the image's flattened file system: path -> header.
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	fs := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fs
		}
		if err != nil {
			t.Fatal(err)
		}
		fs[path.Clean("/"+h.Name)] = h
	}
}

// readFile returns name's contents from the image's file system.
func readFile(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the image: %v", name, err)
		}
		if path.Clean("/"+h.Name) == name {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

func TestImageLayout(t *testing.T) {
	r := buildOnce(t)
	b := testBuild(t)
	if r.Tag.String() != "ghcr.io/tether-dev/tether:v0.0.0-test.1" {
		t.Errorf("tag = %s, want the manifests' repository with the version", r.Tag)
	}
	l, err := layout.ImageIndexFromPath(r.Layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := l.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].Digest != r.Digest || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v0.0.0-test.1" {
		t.Fatalf("index.json = %+v, want one entry: the index %s named v0.0.0-test.1", top.Manifests, r.Digest)
	}
	idx, err := l.ImageIndex(r.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(d.Platform.Architecture, func(t *testing.T) { checkImage(t, b, img, d.Platform) })
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("index platforms = %v, want linux/amd64 and linux/arm64", platforms)
	}
}

// checkImage checks one platform's image: config, labels and exactly the
// files it should hold (so no shell or anything else slips in).
func checkImage(t *testing.T, b Build, img v1.Image, p *v1.Platform) {
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("config platform = %s/%s, index says %s/%s", cf.OS, cf.Architecture, p.OS, p.Architecture)
	}
	if !slices.Equal(c.Entrypoint, []string{"/tether"}) || !slices.Equal(c.Cmd, []string{"controller"}) {
		t.Errorf("entrypoint %q cmd %q, want [/tether] [controller]", c.Entrypoint, c.Cmd)
	}
	if c.User != "65532:65532" || c.WorkingDir != "/home/nonroot" {
		t.Errorf("user %q workdir %q, want 65532:65532 and /home/nonroot", c.User, c.WorkingDir)
	}
	if !cf.Created.Time.Equal(b.Time()) {
		t.Errorf("created %v, want the commit's time %v", cf.Created.Time, b.Time())
	}
	want := map[string]string{
		"title": "tether", "source": "https://github.com/tether-dev/tether", "url": "https://github.com/tether-dev/tether",
		"version": b.Version, "revision": b.Commit, "created": "2023-11-14T22:13:20Z", "licenses": "Apache-2.0",
	}
	for k, v := range want {
		if got := c.Labels["org.opencontainers.image."+k]; got != v {
			t.Errorf("label org.opencontainers.image.%s = %q, want %q", k, got, v)
		}
	}
	if c.Labels["org.opencontainers.image.description"] == "" {
		t.Error("no org.opencontainers.image.description label")
	}

	fs := files(t, img)
	var names []string
	for n := range fs {
		names = append(names, n)
	}
	sort.Strings(names)
	wantFiles := []string{"/etc", "/etc/group", "/etc/nsswitch.conf", "/etc/passwd", "/etc/ssl", "/etc/ssl/certs",
		"/etc/ssl/certs/ca-certificates.crt", "/home", "/home/nonroot", "/tether", "/tmp"}
	if !slices.Equal(names, wantFiles) {
		t.Errorf("image files = %v\nwant %v", names, wantFiles)
	}
	for _, n := range names {
		switch path.Base(n) {
		case "sh", "bash", "ash", "dash", "zsh", "busybox":
			t.Errorf("the image has a shell: %s", n)
		}
		if !fs[n].ModTime.Equal(b.Time()) {
			t.Errorf("%s time stamp %v, want the commit's time", n, fs[n].ModTime)
		}
	}
	if h := fs["/tether"]; h == nil || h.Mode&0o111 == 0 || h.Uid != 0 {
		t.Errorf("/tether = %+v, want an executable owned by root", h)
	}
	if h := fs["/home/nonroot"]; h == nil || h.Uid != NonRoot || h.Gid != NonRoot {
		t.Errorf("/home/nonroot = %+v, want owned by 65532:65532", h)
	}
	if h := fs["/tmp"]; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("/tmp = %+v, want mode 1777", h)
	}
	if !strings.Contains(string(readFile(t, img, "/etc/passwd")), "nonroot:x:65532:65532:") {
		t.Error("/etc/passwd has no nonroot entry for 65532")
	}
	if !strings.Contains(string(readFile(t, img, "/etc/group")), "nonroot:x:65532:") {
		t.Error("/etc/group has no nonroot group 65532")
	}
	ca, err := os.ReadFile(DefaultCACerts)
	if err != nil {
		t.Fatal(err)
	}
	if string(readFile(t, img, "/etc/ssl/certs/ca-certificates.crt")) != string(ca) {
		t.Error("the image's CA bundle is not the build machine's")
	}
}

// TestImageRunsVersion takes /tether out of the docker tarball's image for
// this machine and runs `tether version`.
func TestImageRunsVersion(t *testing.T) {
	r := buildOnce(t)
	if r.TarballPlatform.Arch != runtime.GOARCH || runtime.GOOS != "linux" {
		t.Skipf("no image for %s/%s to run", runtime.GOOS, runtime.GOARCH)
	}
	b := testBuild(t)
	img, err := tarball.ImageFromPath(r.Tarball, &r.Tag)
	if err != nil {
		t.Fatalf("the tarball is no image named %s: %v", r.Tag, err)
	}
	bin := filepath.Join(t.TempDir(), "tether")
	if err := os.WriteFile(bin, readFile(t, img, "/tether"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("tether version from the image: %v", err)
	}
	var got version.Info
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	if got.Version != b.Version || got.Commit != b.Commit || got.BuildDate != "2023-11-14T22:13:20Z" || got.Platform != "linux/"+runtime.GOARCH {
		t.Errorf("tether version in the image = %+v, want version %s, commit %s, built 2023-11-14T22:13:20Z", got, b.Version, b.Commit)
	}
	if got.KubeVirtAPI == "" || got.KubernetesAPI == "" {
		t.Errorf("tether version in the image names no API versions: %+v", got)
	}
}

// TestImageReproducible builds the image a second time, binaries and all,
// and expects the same digest.
func TestImageReproducible(t *testing.T) {
	r := buildOnce(t)
	again, err := BuildImage(context.Background(), testBuild(t), testPlatforms, t.TempDir(), DefaultCACerts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != r.Digest {
		t.Errorf("two builds of one commit: digests %s and %s", r.Digest, again.Digest)
	}
}

func TestReadCACertsMissing(t *testing.T) {
	_, err := ReadCACerts(filepath.Join(t.TempDir(), "none.crt"))
	if err == nil || !strings.Contains(err.Error(), "apt-get install ca-certificates") {
		t.Errorf("err = %v, want one naming apt-get install ca-certificates", err)
	}
}
