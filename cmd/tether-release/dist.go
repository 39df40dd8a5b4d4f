package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tether-dev/tether/internal/release"
)

// dist builds the plugin archives and the krew manifest and says what to
// upload where.
func dist(ctx context.Context, b release.Build, ps []release.Platform, out, template string, w io.Writer) error {
	r, err := release.BuildDist(ctx, b, ps, out, template)
	if err != nil {
		return err
	}
	for _, a := range r.Archives {
		fmt.Fprintf(w, "%s  %s\n", a.SHA256, a.Path)
	}
	fmt.Fprintf(w, `
krew manifest %s
checksums     %s

Upload the archives to the GitHub release %s, then check the manifest with
  validate-krew-manifest -manifest %s
and install from it before it is in the index:
  kubectl krew install --manifest=%s
`, r.Manifest, r.Sums, b.Version, r.Manifest, r.Manifest)
	return nil
}
