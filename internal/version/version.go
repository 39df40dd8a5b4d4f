// Package version says which tether this is: the version and commit it was
// built from (set with -ldflags from git), when that commit was made, the Go
// toolchain and platform, and the KubeVirt and Kubernetes API modules it was
// built against. It reads nothing but the binary itself.
package version

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
)

// Set at build time with -ldflags "-X <Package>.Version=... -X ...". The
// Makefile and the release builder set all three from git.
var (
	// Version is `git describe --tags --always --dirty`.
	Version = "dev"
	// Commit is `git rev-parse HEAD`.
	Commit = ""
	// Epoch is the commit's time in Unix seconds (SOURCE_DATE_EPOCH): the
	// build date is the commit's, so that two builds of one commit are the
	// same bytes.
	Epoch = ""
)

// Package is this package's import path, the prefix of the -X flags.
const Package = "github.com/tether-dev/tether/internal/version"

// The API modules whose versions a build reports.
const (
	KubeVirtAPIModule   = "kubevirt.io/api"
	KubernetesAPIModule = "k8s.io/api"
)

// Info is what `tether version` prints; its JSON field names are a contract.
type Info struct {
	Version       string `json:"version"`
	Commit        string `json:"commit"`
	BuildDate     string `json:"buildDate"`
	GoVersion     string `json:"goVersion"`
	Platform      string `json:"platform"`
	KubeVirtAPI   string `json:"kubevirtAPI"`
	KubernetesAPI string `json:"kubernetesAPI"`
}

// Get returns the running binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return info(bi)
}

//go:generate go run gen.go

// info builds Info from bi (nil when the binary has no build information).
// The module versions come from the build's own dependency list; a test
// binary has none, so go.mod's versions, recorded in modules.go, stand in.
func info(bi *debug.BuildInfo) Info {
	i := Info{
		Version:       Version,
		Commit:        Commit,
		BuildDate:     buildDate(Epoch),
		GoVersion:     runtime.Version(),
		Platform:      runtime.GOOS + "/" + runtime.GOARCH,
		KubeVirtAPI:   goModVersions[KubeVirtAPIModule],
		KubernetesAPI: goModVersions[KubernetesAPIModule],
	}
	if bi == nil {
		return i
	}
	if i.Commit == "" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				i.Commit = s.Value
			}
		}
	}
	for _, d := range bi.Deps {
		v := d.Version
		if d.Replace != nil {
			v = d.Replace.Version
		}
		switch d.Path {
		case KubeVirtAPIModule:
			i.KubeVirtAPI = v
		case KubernetesAPIModule:
			i.KubernetesAPI = v
		}
	}
	return i
}

// buildDate is epoch (Unix seconds) in RFC 3339, UTC; "" if it is not a
// number.
func buildDate(epoch string) string {
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return ""
	}
	return time.Unix(sec, 0).UTC().Format(time.RFC3339)
}
