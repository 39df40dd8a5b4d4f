package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"text/template"
)

// DistPlatforms are the platforms of the kubectl plugin archives.
const DistPlatforms = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64"

// ReleaseURL is where a release's archives are downloaded from.
const ReleaseURL = SourceURL + "/releases/download"

// Archive is one platform's kubectl plugin archive.
type Archive struct {
	Platform
	Path   string // where it was written
	URL    string // where a release serves it
	SHA256 string
	Bin    string // the binary's name in it
}

// ArchiveName is the archive's file name for version and p.
func ArchiveName(version string, p Platform) string {
	return fmt.Sprintf("tether_%s_%s_%s.tar.gz", version, p.OS, p.Arch)
}

// semver is what krew takes as a plugin version: vMAJOR.MINOR.PATCH with
// an optional pre-release and build.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// WriteArchive writes p's archive into dir: the binary, the kubectl
// completion helper, LICENSE and README.md from b.Root, every time stamp the
// commit's time, compressed without a name or time in the gzip header.
func WriteArchive(b Build, p Platform, binary, dir string) (Archive, error) {
	a := Archive{Platform: p, Bin: BinaryName(p)}
	name := ArchiveName(b.Version, p)
	a.Path, a.URL = filepath.Join(dir, name), ReleaseURL+"/"+b.Version+"/"+name
	var raw bytes.Buffer
	err := writeTar(&raw, []entry{
		fileFrom(a.Bin, 0o755, binary),
		fileFrom("kubectl_complete-tether", 0o755, filepath.Join(b.Root, "hack", "kubectl_complete-tether")),
		fileFrom("LICENSE", 0o644, filepath.Join(b.Root, "LICENSE")),
		fileFrom("README.md", 0o644, filepath.Join(b.Root, "README.md")),
	}, b.Time())
	if err != nil {
		return a, fmt.Errorf("archive for %s: %v", p, err)
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return a, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return a, err
	}
	if err := zw.Close(); err != nil {
		return a, err
	}
	sum := sha256.Sum256(gz.Bytes())
	a.SHA256 = hex.EncodeToString(sum[:])
	return a, os.WriteFile(a.Path, gz.Bytes(), 0o644)
}

// KrewManifest renders the krew plugin manifest template for b's version
// and archives.
func KrewManifest(templatePath string, b Build, archives []Archive) ([]byte, error) {
	t, err := template.New(filepath.Base(templatePath)).Option("missingkey=error").ParseFiles(templatePath)
	if err != nil {
		return nil, fmt.Errorf("reading the krew manifest template: %v", err)
	}
	var out bytes.Buffer
	if err := t.Execute(&out, struct {
		Version  string
		Archives []Archive
	}{b.Version, archives}); err != nil {
		return nil, fmt.Errorf("rendering %s: %v", templatePath, err)
	}
	return out.Bytes(), nil
}

// DistResult says what BuildDist wrote.
type DistResult struct {
	Archives []Archive
	Manifest string // the krew manifest
	Sums     string // SHA256SUMS of the archives
}

// BuildDist builds the binaries for platforms, writes their archives and
// the krew manifest (tether.yaml, from templatePath) and SHA256SUMS to out.
// The version must be a release tag krew accepts (v1.2.3).
func BuildDist(ctx context.Context, b Build, platforms []Platform, out, templatePath string) (DistResult, error) {
	var r DistResult
	if !semver.MatchString(b.Version) {
		return r, fmt.Errorf("version %q is not a release version (vMAJOR.MINOR.PATCH) that krew and the release URLs need: tag the commit (git tag v0.1.0) or pass VERSION=v0.1.0", b.Version)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return r, err
	}
	var sums bytes.Buffer
	for _, p := range platforms {
		bin, err := BuildBinary(ctx, b, p, filepath.Join(out, "build"))
		if err != nil {
			return r, err
		}
		a, err := WriteArchive(b, p, bin, out)
		if err != nil {
			return r, err
		}
		r.Archives = append(r.Archives, a)
		fmt.Fprintf(&sums, "%s  %s\n", a.SHA256, filepath.Base(a.Path))
	}
	manifest, err := KrewManifest(templatePath, b, r.Archives)
	if err != nil {
		return r, err
	}
	r.Manifest, r.Sums = filepath.Join(out, "tether.yaml"), filepath.Join(out, "SHA256SUMS")
	if err := os.WriteFile(r.Manifest, manifest, 0o644); err != nil {
		return r, err
	}
	return r, os.WriteFile(r.Sums, sums.Bytes(), 0o644)
}
