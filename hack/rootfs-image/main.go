// Command rootfs-image packs a root file system, given as a tar archive, into
// a one-layer image tarball that `ctr -n k8s.io images import` (and `docker
// load`) read, without a container engine. hack/kubevirt-node.sh uses it for
// the launcher and handler images of the test world's real node.
//
//	go run ./hack/rootfs-image -layer ROOT.tar -tag NAME:TAG -out IMAGE.tar \
//	    [-entrypoint /usr/bin/x,arg] [-user 107:107] [-env K=V,...] [-workdir /]
//
// The layer is taken as it is (ownership, modes, and the xattrs GNU tar
// recorded with --xattrs, such as file capabilities), gzip-compressed once.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "rootfs-image:", err)
		os.Exit(1)
	}
}

func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func run(args []string) error {
	fs := flag.NewFlagSet("rootfs-image", flag.ContinueOnError)
	layerPath := fs.String("layer", "", "the root file system as a tar archive")
	tagName := fs.String("tag", "", "the image's name and tag")
	out := fs.String("out", "", "the image tarball to write")
	entrypoint := fs.String("entrypoint", "", "the entrypoint, comma-separated")
	user := fs.String("user", "", "the user the image runs as")
	env := fs.String("env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "the environment, comma-separated")
	workdir := fs.String("workdir", "/", "the working directory")
	epoch := fs.Int64("epoch", 0, "the image's creation time in Unix seconds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *layerPath == "" || *tagName == "" || *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("usage: rootfs-image -layer ROOT.tar -tag NAME:TAG -out IMAGE.tar [flags]")
	}
	tag, err := name.NewTag(*tagName)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromFile(*layerPath, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return err
	}
	created := v1.Time{Time: time.Unix(*epoch, 0).UTC()}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: created, CreatedBy: "rootfs-image: " + *tagName}})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", runtime.GOARCH, created
	cf.Config = v1.Config{Entrypoint: list(*entrypoint), User: *user, Env: list(*env), WorkingDir: *workdir}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	return tarball.WriteToFile(*out, tag, img)
}
