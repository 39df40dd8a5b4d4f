package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's name (config/manager/manager.yaml runs it) and its fixed
// parts.
const (
	Repository  = "ghcr.io/tether-dev/tether"
	SourceURL   = "https://github.com/tether-dev/tether"
	Description = "Finds and safely fixes drifted volume attachments in Kubernetes and KubeVirt clusters"
	License     = "Apache-2.0"

	// DefaultCACerts is where Debian and Ubuntu keep the CA bundle.
	DefaultCACerts = "/etc/ssl/certs/ca-certificates.crt"

	// NonRoot is the user and group the image runs as (distroless's
	// "nonroot", as config/manager/manager.yaml expects).
	NonRoot = 65532

	entrypoint = "/tether"
	homeDir    = "/home/nonroot"
)

// Labels are the image's org.opencontainers.image.* labels for b.
func Labels(b Build) map[string]string {
	const p = "org.opencontainers.image."
	return map[string]string{
		p + "title":       "tether",
		p + "description": Description,
		p + "source":      SourceURL,
		p + "url":         SourceURL,
		p + "version":     b.Version,
		p + "revision":    b.Commit,
		p + "created":     b.Time().Format(time.RFC3339),
		p + "licenses":    License,
	}
}

// Tag is the image's name with b's version as the tag.
func Tag(b Build) (name.Tag, error) {
	t, err := name.NewTag(Repository + ":" + b.Version)
	if err != nil {
		return name.Tag{}, fmt.Errorf("version %q is not a valid image tag: %v", b.Version, err)
	}
	return t, nil
}

// baseLayer is what every platform's image holds besides the binary: the
// nonroot user and group, name-service order, the CA bundle, a home and
// /tmp. No shell, no package manager, nothing else.
func baseLayer(caCerts []byte, mtime time.Time) (v1.Layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", NonRoot, NonRoot, homeDir)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRoot)
	return layer([]entry{
		dir("etc/", 0o755, 0),
		file("etc/passwd", 0o644, []byte(passwd)),
		file("etc/group", 0o644, []byte(group)),
		file("etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n")),
		dir("etc/ssl/", 0o755, 0),
		dir("etc/ssl/certs/", 0o755, 0),
		file("etc/ssl/certs/ca-certificates.crt", 0o644, caCerts),
		dir("home/", 0o755, 0),
		dir("home/nonroot/", 0o700, NonRoot),
		dir("tmp/", 0o1777, 0),
	}, mtime)
}

// layer is es as a gzip-compressed OCI layer, compressed once.
func layer(es []entry, mtime time.Time) (v1.Layer, error) {
	data, err := tarBytes(es, mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// ReadCACerts reads the build machine's CA bundle for the image.
func ReadCACerts(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no CA certificates at %s for the image: install them (apt-get install ca-certificates) or pass -ca-certs with a PEM bundle", path)
	}
	if err == nil && !bytes.Contains(data, []byte("-----BEGIN CERTIFICATE-----")) {
		err = fmt.Errorf("%s holds no PEM certificate: pass -ca-certs with a PEM bundle", path)
	}
	return data, err
}

// Image is one platform's image: the base layer, then the binary as
// /tether, run as 65532:65532 with `controller` as the default command.
func Image(b Build, p Platform, binary string, caCerts []byte) (v1.Image, error) {
	t := b.Time()
	base, err := baseLayer(caCerts, t)
	if err != nil {
		return nil, err
	}
	bin, err := layer([]entry{fileFrom(entrypoint[1:], 0o755, binary)}, t)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: t}, CreatedBy: "tether-release: nonroot user, CA certificates, /tmp", Comment: "base"}},
		mutate.Addendum{Layer: bin, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: t}, CreatedBy: "tether-release: " + entrypoint, Comment: "binary"}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = p.OS, p.Arch, v1.Time{Time: t}
	cf.Config = v1.Config{
		Entrypoint: []string{entrypoint},
		Cmd:        []string{"controller"},
		User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
		WorkingDir: homeDir,
		Labels:     Labels(b),
	}
	return mutate.ConfigFile(img, cf)
}

// Index is the multi-platform image: one image per platform, each from its
// binary (binaries[i] is built for platforms[i]).
func Index(b Build, platforms []Platform, binaries []string, caCerts []byte) (v1.ImageIndex, []v1.Image, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var imgs []v1.Image
	for i, p := range platforms {
		if p.OS != "linux" {
			return nil, nil, fmt.Errorf("platform %s: the image runs on linux only", p)
		}
		img, err := Image(b, p, binaries[i], caCerts)
		if err != nil {
			return nil, nil, fmt.Errorf("image for %s: %v", p, err)
		}
		imgs = append(imgs, img)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
	}
	return mutate.Annotations(idx, Labels(b)).(v1.ImageIndex), imgs, nil
}

// WriteLayout replaces dir with an OCI image layout whose index.json names
// idx by tag's tag (annotation org.opencontainers.image.ref.name), as
// skopeo's oci:DIR:TAG reads it.
func WriteLayout(dir string, idx v1.ImageIndex, tag name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return l.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.TagStr()}))
}

// WriteTarball writes img as a tarball that `docker load`, `kind load
// image-archive` and `ctr images import` read, named tag.
func WriteTarball(path string, img v1.Image, tag name.Tag) error {
	return tarball.WriteToFile(path, tag, img)
}

// ImageResult says what BuildImage wrote.
type ImageResult struct {
	Tag    name.Tag
	Digest v1.Hash // the index's
	Layout string  // the OCI image layout's directory
	// Tarball is the `docker load` tarball of the image for TarballPlatform.
	Tarball         string
	TarballPlatform Platform
}

// BuildImage builds the binaries for platforms under out/release/, the
// image index from them into the OCI layout out/image, and a tarball of the
// image for this machine's architecture (else the first platform's) as
// out/tether-image-ARCH.tar.
func BuildImage(ctx context.Context, b Build, platforms []Platform, out, caCertsPath string) (ImageResult, error) {
	var r ImageResult
	tag, err := Tag(b)
	if err != nil {
		return r, err
	}
	caCerts, err := ReadCACerts(caCertsPath)
	if err != nil {
		return r, err
	}
	var bins []string
	for _, p := range platforms {
		bin, err := BuildBinary(ctx, b, p, filepath.Join(out, "release"))
		if err != nil {
			return r, err
		}
		bins = append(bins, bin)
	}
	idx, imgs, err := Index(b, platforms, bins, caCerts)
	if err != nil {
		return r, err
	}
	r.Tag, r.Layout = tag, filepath.Join(out, "image")
	if r.Digest, err = idx.Digest(); err != nil {
		return r, err
	}
	if err := WriteLayout(r.Layout, idx, tag); err != nil {
		return r, fmt.Errorf("writing the image layout %s: %v", r.Layout, err)
	}
	host := 0
	for i, p := range platforms {
		if p.Arch == runtime.GOARCH {
			host = i
		}
	}
	r.TarballPlatform = platforms[host]
	r.Tarball = filepath.Join(out, "tether-image-"+r.TarballPlatform.Arch+".tar")
	if err := WriteTarball(r.Tarball, imgs[host], tag); err != nil {
		return r, fmt.Errorf("writing %s: %v", r.Tarball, err)
	}
	return r, nil
}
