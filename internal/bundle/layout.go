package bundle

import (
	"bufio"
	"io"
	"path"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// facts are what a bundle's paths and special files say about its layout,
// gathered while it is read.
type facts struct {
	current string

	mustGather, kubevirtMustGather, harvester, clusterInfo, dump bool
	// inspectedNodes: OpenShift's must-gather inspected the nodes.
	inspectedNodes bool

	mustGatherTime time.Time
	mustGatherFile string
	harvesterTime  time.Time
	harvesterMeta  string
	cover          []covered
	// seenFile and seenKind are the last object's: what seen adds
	// for one file and kind, it adds once (a List of 100,000 objects
	// would otherwise add 100,000 copies of one fact).
	seenFile                     string
	seenKind                     *kind
	harvesterBundle              harvesterFacts
	describedPVCs, clusterDumpAt map[string]bool
}

// covered is one fact of coverage: resource held completely in ns ("" for
// every namespace). With dir set, it holds only if dir turns out to be a
// cluster-info dump (else the file is a dump of its own, which covers
// every namespace), or for "gather_cdi" if KubeVirt's must-gather
// described the PVCs.
type covered struct {
	resource, ns, dir string
}

// path says whether a file is left unread by its path alone, and why.
func (f *facts) path(name string) (string, bool) {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		switch {
		case s == "namespaces":
			f.mustGather = true
		case s == "cluster-scoped-resources":
			f.mustGather = true
			f.sawClusterScoped(segs[i+1:])
		case s == "crs" && i >= 2 && segs[i-2] == "namespaces":
			f.kubevirtMustGather = true
		case s == "yamls" && i+1 < len(segs) && (segs[i+1] == "namespaced" || segs[i+1] == "cluster"):
			f.harvester = true
			f.harvesterBundle.saw(segs[i+1:])
		case s == "nodes" && i > 0 && strings.HasPrefix(segs[0], "supportbundle_") && strings.HasSuffix(name, ".zip"):
			return "a Harvester node bundle (node files, no cluster objects)", true
		}
	}
	base := path.Base(name)
	if strings.HasSuffix(base, "_describe.txt") && strings.Contains(name, "/core/persistentvolumeclaims/") {
		if f.describedPVCs == nil {
			f.describedPVCs = map[string]bool{}
		}
		f.describedPVCs[name] = true
	}
	if isLog(name) && base != harvesterErrors && base != "version" {
		return "a log or other text, not objects", true
	}
	return "", false
}

// special reads the files that say when a bundle was collected, and says
// whether name was one.
func (f *facts) special(name string, r io.Reader) bool {
	switch path.Base(name) {
	case harvesterErrors:
		f.harvesterBundle.readErrors(r)
		return true
	case "version":
		f.readVersion(r)
		return true
	case "timestamp":
		f.mustGather = true
		// oc adm must-gather and each inspect in it write one: the
		// latest time of all is the end of collection.
		if t := lastTime(r); t.After(f.mustGatherTime) {
			f.mustGatherTime, f.mustGatherFile = t, name
		}
		return true
	case "metadata.yaml":
		var m struct {
			BundleCreatedAt string `json:"bundleCreatedAt"`
		}
		b, _ := io.ReadAll(io.LimitReader(r, 1<<20))
		if yaml.Unmarshal(b, &m) != nil || m.BundleCreatedAt == "" {
			return false
		}
		f.harvester = true
		if t, err := time.Parse(time.RFC3339, m.BundleCreatedAt); err == nil {
			f.harvesterTime, f.harvesterMeta = t, name
		}
		return true
	}
	return false
}

// lastTime is the last line of a must-gather timestamp file that reads as
// a time (Go's time.Time.String, with or without the monotonic clock).
func lastTime(r io.Reader) time.Time {
	var last time.Time
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, " m="); i > 0 {
			line = line[:i]
		}
		if t, err := time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", line); err == nil {
			last = t
		}
	}
	return last
}

// seen records where an object of kind k in namespace ns was read from
// file, for the coverage: a file whose layout lists a resource completely
// covers it, any file outside a known layout is a dump (which the docs ask
// to be taken with --all-namespaces) and covers its kinds everywhere.
func (f *facts) seen(file string, k *kind, ns string) {
	if file == f.seenFile && k == f.seenKind {
		return
	}
	f.seenFile, f.seenKind = file, k
	if c, ok := f.listed(file); ok {
		f.cover = append(f.cover, c)
		return
	}
	if !f.inLayout(file) {
		f.dump = true
		f.cover = append(f.cover, covered{resource: k.resource})
	}
}

// listFile takes a List (perhaps empty) as all there is of what its file
// holds: what its path says by a layout's conventions (an empty
// namespaces/NS/pods.json of a cluster-info dump: no pod there), or,
// outside the layouts, the kind its file is named after (persistentvolumes.yaml,
// pv.json: `kubectl get pv -o yaml > pv.yaml`). It says whether it was
// one. In a file of several kinds, a kind without objects may only not
// have been asked for.
func (f *facts) listFile(file string) bool {
	if c, listed := f.listed(file); listed {
		f.cover = append(f.cover, c)
		return true
	}
	if f.inLayout(file) {
		return false
	}
	base := path.Base(file)
	for _, ext := range []string{".yaml", ".yml", ".json"} {
		base = strings.TrimSuffix(base, ext)
	}
	k, ok := kindNamed(base)
	if !ok {
		return false
	}
	f.dump = true
	f.cover = append(f.cover, covered{resource: k.resource})
	return true
}

// inLayout says whether file lies in a must-gather's or a Harvester
// bundle's tree, where an object alone says nothing of the others.
func (f *facts) inLayout(file string) bool {
	for _, s := range strings.Split(path.Dir(file), "/") {
		if s == "namespaces" || s == "cluster-scoped-resources" || s == "yamls" {
			return true
		}
	}
	return false
}

// listed says what a file's path says it holds completely, by the layouts'
// conventions (see the package comment).
func (f *facts) listed(file string) (covered, bool) {
	segs := strings.Split(file, "/")
	n := len(segs)
	base := strings.TrimSuffix(strings.TrimSuffix(segs[n-1], ".yaml"), ".json")
	for i := n - 2; i >= 0; i-- {
		switch segs[i] {
		case "namespaces":
			return f.listedNamespace(segs[i+1:], base)
		case "cluster-scoped-resources":
			// GROUP/RESOURCE.yaml (a list), GROUP/RESOURCE/NAME.yaml (inspect
			// of a resource, flattened) or RESOURCE.GROUP/NAME.yaml
			// (gather_crs): a cluster-scoped kind is gathered by resource,
			// every object of it.
			rest := segs[i+1:]
			switch len(rest) {
			case 2:
				if _, ok := kindOfResource(base); ok {
					return covered{resource: base}, true
				}
				return covered{resource: rest[0]}, true
			case 3:
				return covered{resource: rest[1]}, true
			}
			return covered{}, false
		case "yamls":
			return listedHarvester(segs[i+1:], base)
		}
	}
	if base == "pods" && n >= 2 {
		return covered{resource: "pods", ns: segs[n-2], dir: "/" + path.Join(segs[:n-2]...)}, true
	}
	if base == "nodes" {
		f.clusterInfoAt("/" + path.Join(segs[:n-1]...))
		return covered{resource: "nodes", dir: "/" + path.Join(segs[:n-1]...)}, true
	}
	return covered{}, false
}

// listedNamespace is listed for a path under namespaces/: rest begins with
// the namespace.
func (f *facts) listedNamespace(rest []string, base string) (covered, bool) {
	if len(rest) < 3 {
		return covered{}, false
	}
	ns := rest[0]
	switch {
	case len(rest) == 3: // NS/GROUP/RESOURCE.yaml, a list
		return covered{resource: base, ns: ns}, true
	case rest[1] == "crs" && len(rest) == 4: // gather_crs: every namespace
		return covered{resource: rest[2]}, true
	case rest[1] == "kubevirt.io" && rest[2] == "virtualmachines": // vmConvertor: every VM
		return covered{resource: "virtualmachines"}, true
	case rest[1] == "core" && rest[2] == "persistentvolumeclaims" && len(rest) == 4:
		// gather_cdi inspects every PVC, and writes a describe beside each.
		return covered{resource: "persistentvolumeclaims", dir: "gather_cdi"}, true
	}
	return covered{}, false
}

// listedHarvester is listed for a path under yamls/.
func listedHarvester(rest []string, base string) (covered, bool) {
	switch {
	case len(rest) >= 3 && rest[0] == "cluster":
		return covered{resource: base}, true
	case len(rest) >= 4 && rest[0] == "namespaced":
		return covered{resource: base, ns: rest[1]}, true
	}
	return covered{}, false
}

func (f *facts) clusterInfoAt(dir string) {
	if f.clusterDumpAt == nil {
		f.clusterDumpAt = map[string]bool{}
	}
	f.clusterDumpAt[dir] = true
}

// layouts names the layouts recognised.
func (f *facts) layouts() []string {
	var out []string
	for _, l := range []struct {
		on   bool
		name string
	}{{f.mustGather, "must-gather"}, {f.kubevirtMustGather, "kubevirt-must-gather"}, {f.harvester, "harvester"},
		{f.clusterInfo, "cluster-info-dump"}, {f.dump, "dump"}} {
		if l.on {
			out = append(out, l.name)
		}
	}
	return out
}

// coverage turns the facts into b's coverage.
func (f *facts) coverage(b *Bundle) {
	if f.harvester {
		f.cover = append(f.cover, f.harvesterBundle.coverage()...)
	}
	f.cover = append(f.cover, f.mustGatherCoverage()...)
	for _, c := range f.cover {
		switch {
		case c.dir == "gather_cdi" && len(f.describedPVCs) == 0:
			continue // a PVC inspected alone
		case c.dir != "" && c.dir != "gather_cdi" && !f.clusterDumpAt[c.dir]:
			c.ns = "" // pods.json outside a cluster-info dump: a dump of its own
		case c.resource == "pods" && c.dir != "":
			f.clusterInfo = true
		}
		k, ok := kindOfResource(c.resource)
		if !ok {
			continue
		}
		cv := b.cover[k]
		if cv == nil {
			cv = &Coverage{Namespaces: map[string]bool{}}
			b.cover[k] = cv
		}
		if c.ns == "" || k.cluster {
			cv.All = true
		} else {
			cv.Namespaces[c.ns] = true
		}
	}
}
