// Package release builds what tether ships: the binaries, the container
// image (without a container engine: go-containerregistry assembles the
// layers from local files, nothing is pulled) and the kubectl plugin
// archives with their krew manifest. Every output is a function of the
// source, the Go toolchain and the commit's time (SOURCE_DATE_EPOCH), so two
// builds of one commit are the same bytes. It never pushes anything.
package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tether-dev/tether/internal/version"
)

// Build is what a release build is made from.
type Build struct {
	// Root is the module's directory (where go.mod is).
	Root string
	// Version is `git describe --tags --always --dirty`; Commit is
	// `git rev-parse HEAD`.
	Version, Commit string
	// Epoch is the commit's time in Unix seconds (SOURCE_DATE_EPOCH): the
	// build date and every timestamp in the outputs.
	Epoch int64
}

// Validate names what is missing.
func (b Build) Validate() error {
	switch {
	case b.Version == "":
		return fmt.Errorf("no version: pass -version (make sets it from git describe)")
	case b.Commit == "":
		return fmt.Errorf("no commit: pass -commit (make sets it from git rev-parse HEAD)")
	case b.Epoch <= 0:
		return fmt.Errorf("no commit time: pass -epoch or set SOURCE_DATE_EPOCH (make sets it from git log -1 --format=%%ct)")
	}
	if _, err := os.Stat(filepath.Join(b.Root, "go.mod")); err != nil {
		return fmt.Errorf("%s is not the module's root (no go.mod): pass -root", b.Root)
	}
	return nil
}

// Time is the commit's time, UTC.
func (b Build) Time() time.Time { return time.Unix(b.Epoch, 0).UTC() }

// LDFlags are the linker flags that strip the binary and record the
// version, commit and commit time for `tether version`.
func (b Build) LDFlags() string {
	return strings.Join([]string{"-s", "-w",
		"-X", version.Package + ".Version=" + b.Version,
		"-X", version.Package + ".Commit=" + b.Commit,
		"-X", version.Package + ".Epoch=" + strconv.FormatInt(b.Epoch, 10)}, " ")
}

// Platform is an os/arch pair, as Go and OCI name them.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatforms parses "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]Platform, error) {
	var ps []Platform
	for _, f := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q is not OS/ARCH (e.g. linux/amd64)", f)
		}
		ps = append(ps, Platform{os, arch})
	}
	return ps, nil
}

// BinaryName is the file name of tether's binary on p.
func BinaryName(p Platform) string {
	if p.OS == "windows" {
		return "tether.exe"
	}
	return "tether"
}

// BuildBinary compiles ./cmd/tether for p into dir/<os>_<arch>/ and returns
// the binary's path: static (CGO_ENABLED=0), without local paths
// (-trimpath) or VCS stamps, so the bytes depend only on the source, the
// toolchain and b.
func BuildBinary(ctx context.Context, b Build, p Platform, dir string) (string, error) {
	out := filepath.Join(dir, p.OS+"_"+p.Arch, BinaryName(p))
	if !filepath.IsAbs(out) {
		abs, err := filepath.Abs(out)
		if err != nil {
			return "", err
		}
		out = abs
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", b.LDFlags(), "-o", out, "./cmd/tether")
	cmd.Dir = b.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building tether for %s: %v\n%s", p, err, msg)
	}
	return out, nil
}
