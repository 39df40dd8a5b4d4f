package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tether-dev/tether/internal/release"
)

// image builds the image and says how to load or push it.
func image(ctx context.Context, b release.Build, ps []release.Platform, out, caCerts string, w io.Writer) error {
	r, err := release.BuildImage(ctx, b, ps, out, caCerts)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, `image   %s (%v)
digest  %s
layout  %s (OCI image layout, all platforms)
tarball %s (%s)

push all platforms:   crane push %s %s
                      (or: skopeo copy --all oci:%s:%s docker://%s)
load into docker:     docker load -i %s
load into kind:       kind load image-archive %s
load into containerd: ctr -n k8s.io images import %s
`, r.Tag, ps, r.Digest, r.Layout, r.Tarball, r.TarballPlatform,
		r.Layout, r.Tag, r.Layout, r.Tag.TagStr(), r.Tag, r.Tarball, r.Tarball, r.Tarball)
	return nil
}
