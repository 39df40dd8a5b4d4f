package bundle

import (
	"bufio"
	"io"
	"strings"
)

// harvesterErrors is the file in which support-bundle-kit's collector logs
// each list it failed to get (pkg/manager/cluster.go).
const harvesterErrors = "bundleGenerationError.log"

// harvesterFacts are what a Harvester support bundle says beyond its
// files. Its collector lists every resource the API server serves (its
// preferred version) in every namespace it collects, and in the cluster,
// but Secrets; and it writes no file for a list with no items
// (pkg/manager/collectors/common.go, toObjCommon; client/discovery.go).
// So of a namespace it collected, or of the cluster, a kind without a
// file has no object, unless the error log names the list as failed.
type harvesterFacts struct {
	// namespaces are the namespaces collected (yamls/namespaced/NS);
	// cluster says that yamls/cluster was.
	namespaces map[string]bool
	cluster    bool
	// failed are the lists the collector failed to get: "RESOURCE/NS",
	// with NS empty for the cluster's.
	failed map[string]bool
}

// saw notes the folder of a file under yamls/: rest follows
// "yamls".
func (h *harvesterFacts) saw(rest []string) {
	switch {
	case len(rest) >= 2 && rest[0] == "cluster":
		h.cluster = true
	case len(rest) >= 3 && rest[0] == "namespaced":
		if h.namespaces == nil {
			h.namespaces = map[string]bool{}
		}
		h.namespaces[rest[1]] = true
	}
}

// readErrors reads the collector's error log: lines "Failed to get URL:
// why", URL /api/v1/RESOURCE, /apis/GROUP/VERSION/RESOURCE or either with
// namespaces/NS/ before RESOURCE.
func (h *harvesterFacts) readErrors(r io.Reader) {
	sc := bufio.NewScanner(io.LimitReader(r, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		url, ok := strings.CutPrefix(sc.Text(), "Failed to get ")
		if !ok {
			continue
		}
		url, _, _ = strings.Cut(url, ":")
		segs := strings.Split(strings.Trim(url, "/"), "/")
		ns := ""
		for i := 0; i+1 < len(segs); i++ {
			if segs[i] == "namespaces" && i+2 < len(segs) {
				ns = segs[i+1]
			}
		}
		if h.failed == nil {
			h.failed = map[string]bool{}
		}
		h.failed[segs[len(segs)-1]+"/"+ns] = true
	}
}

// coverage is what the bundle holds of each kind read beyond its files.
func (h *harvesterFacts) coverage() []covered {
	var out []covered
	for i := range kinds {
		k := &kinds[i]
		if k.cluster {
			if h.cluster && !h.failed[k.resource+"/"] {
				out = append(out, covered{resource: k.resource})
			}
			continue
		}
		for ns := range h.namespaces {
			if !h.failed[k.resource+"/"+ns] && !h.failed[k.resource+"/"] {
				out = append(out, covered{resource: k.resource, ns: ns})
			}
		}
	}
	return out
}
