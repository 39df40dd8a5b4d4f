// Command tether-release builds tether's release outputs without a
// container engine (make image, make dist):
//
//	tether-release image -version V -commit C -epoch N [-platforms linux/amd64,linux/arm64] [-out bin]
//	tether-release dist  -version V -commit C -epoch N [-platforms ...] [-out bin/dist]
//
// image writes an OCI image layout to OUT/image and a `docker load` tarball
// for this machine's architecture to OUT/tether-image-ARCH.tar; dist writes
// the kubectl plugin archives and their krew manifest. The logic is in
// internal/release.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/tether-dev/tether/internal/release"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "image" && args[0] != "dist") {
		return fmt.Errorf("usage: tether-release image|dist -version V -commit C -epoch N [flags]")
	}
	fs := flag.NewFlagSet("tether-release "+args[0], flag.ContinueOnError)
	var b release.Build
	epoch, _ := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	fs.StringVar(&b.Root, "root", ".", "the module's directory")
	fs.StringVar(&b.Version, "version", "", "the version (git describe --tags --always --dirty); also the image tag")
	fs.StringVar(&b.Commit, "commit", "", "the commit (git rev-parse HEAD)")
	fs.Int64Var(&b.Epoch, "epoch", epoch, "the commit's time in Unix seconds (default $SOURCE_DATE_EPOCH)")
	var platforms, out, caCerts, template string
	if args[0] == "image" {
		fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "the image's platforms")
		fs.StringVar(&out, "out", "bin", "output directory")
		fs.StringVar(&caCerts, "ca-certs", release.DefaultCACerts, "the PEM CA bundle to put in the image")
	} else {
		fs.StringVar(&platforms, "platforms", release.DistPlatforms, "the archives' platforms")
		fs.StringVar(&out, "out", "bin/dist", "output directory")
		fs.StringVar(&template, "krew-template", "deploy/krew/tether.yaml.tmpl", "the krew manifest's template")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := b.Validate(); err != nil {
		return err
	}
	ps, err := release.ParsePlatforms(platforms)
	if err != nil {
		return fmt.Errorf("-platforms: %v", err)
	}
	if args[0] == "image" {
		return image(ctx, b, ps, out, caCerts, stdout)
	}
	return dist(ctx, b, ps, out, template, stdout)
}
