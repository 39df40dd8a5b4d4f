// Package bundle reads a support bundle — what a cluster's administrators
// collect and send, rather than the cluster itself — into objects that
// tether's observer reads as it reads an API server (Bundle is a
// client.Reader). It knows these layouts, from their tools' sources:
//
//   - OpenShift must-gather and `oc adm inspect` (openshift/oc
//     pkg/cli/admin/inspect: namespaces/NS/GROUP/RESOURCE.yaml lists and
//     namespaces/NS/GROUP/RESOURCE/NAME.yaml objects, cluster-scoped-resources/
//     likewise, "core" for the core group; pkg/cli/admin/mustgather: a
//     "timestamp" file of time.Time lines, at the start and the end);
//   - KubeVirt's must-gather (kubevirt/must-gather collection-scripts:
//     gather_crs writes every kubevirt.io CR of every namespace as
//     namespaces/NS/crs/RESOURCE.GROUP/NAME.yaml, vmConvertor every VM as
//     namespaces/NS/kubevirt.io/virtualmachines/TYPE/NAME.yaml, gather_cdi
//     every PVC through oc adm inspect beside a NAME_describe.txt; its
//     image's "version" file begins "kubevirt/must-gather"; see
//     mustgather.go for what its runs imply);
//   - Harvester's support bundle (rancher/support-bundle-kit
//     pkg/manager: metadata.yaml with bundleCreatedAt, RFC 3339;
//     yamls/cluster/GROUP/VERSION/RESOURCE.yaml and
//     yamls/namespaced/NS/GROUP/VERSION/RESOURCE.yaml lists whose null and
//     empty strings its collector wrote as "null", none for an empty list,
//     and bundleGenerationError.log: see harvester.go);
//   - kubectl cluster-info dump (k8s.io/kubectl pkg/cmd/clusterinfo:
//     nodes.json and NS/pods.json with --output-directory, or all of it on
//     standard output with logs between the lists);
//   - plain dumps: `kubectl get ... -o yaml|json`, one or more files, of
//     objects, Lists or several YAML documents.
//
// Any of them may be a directory, a tar archive (gzip-compressed or not) or
// a zip archive. Objects are found by their apiVersion and kind wherever
// they are; the layout says which kinds a bundle holds completely, and in
// which namespaces (Coverage), since a kind a bundle lacks must not look
// like a kind of which no object exists.
package bundle

import (
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// DefaultMaxObject is the default largest object (or List item) read: a
// larger one is skipped, and said so.
const DefaultMaxObject = 64 << 20

// Options say how to read a bundle.
type Options struct {
	// MaxObject bounds one object's size in bytes; 0 is DefaultMaxObject.
	MaxObject int64
}

// Skip is a file, or a part of one, that was not read, and why.
type Skip struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
	// Routine: a file that holds no object by its nature (logs, text,
	// other tools' output); reported by count, not one by one.
	Routine bool `json:"-"`
}

// Bundle is a support bundle as read.
type Bundle struct {
	Path string
	// Layouts are the layouts recognised, e.g. "must-gather",
	// "kubevirt-must-gather", "harvester", "cluster-info-dump", "dump".
	Layouts []string
	// Collected is when the bundle was collected, and CollectedFrom where
	// that time was read.
	Collected     time.Time
	CollectedFrom string
	// Files is the number of files read.
	Files int
	// Read counts the objects read, by kind; Other the objects of kinds
	// no check reads.
	Read, Other map[string]int
	Skipped     []Skip

	store
	cover map[*kind]*Coverage
	// closed: Close let go of the objects.
	closed bool
}

// Open reads the bundle at p (a directory, an archive or a file of
// objects). A bundle that cannot be read as a whole (a truncated archive,
// a path that does not exist) is an error; a file that cannot be read is a
// Skip, and a bundle with no object of any kind tether reads is an error
// that says what was found instead.
func Open(p string, o Options) (*Bundle, error) {
	if o.MaxObject <= 0 {
		o.MaxObject = DefaultMaxObject
	}
	b := &Bundle{Path: p, Read: map[string]int{}, Other: map[string]int{}, cover: map[*kind]*Coverage{}}
	d := &decoder{b: b, max: o.MaxObject, facts: &facts{}}
	if err := walk(p, d.visit); err != nil {
		return nil, err
	}
	d.finish()
	if len(b.Read) == 0 {
		return nil, b.emptyError()
	}
	return b, nil
}

// emptyError says why a bundle gave nothing to read.
func (b *Bundle) emptyError() error {
	var other []string
	for k, n := range b.Other {
		other = append(other, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(other)
	msg := fmt.Sprintf("--from %s: no object of a kind tether reads (VirtualMachine, VirtualMachineInstance, Pod, PersistentVolumeClaim, "+
		"PersistentVolume, Node, VolumeAttachment, ...) in %d file(s)", b.Path, b.Files)
	if len(other) > 0 {
		msg += "; found only " + strings.Join(other[:min(len(other), 8)], ", ")
	}
	if n := len(b.Skipped); n > 0 {
		msg += fmt.Sprintf("; %d skipped, the first: %s: %s", n, b.Skipped[0].File, b.Skipped[0].Reason)
	}
	return fmt.Errorf("%s: pass a must-gather, a Harvester support bundle, a kubectl cluster-info dump or `kubectl get -A -o yaml` output (docs/bundles.md)", msg)
}

// Coverage says where a bundle holds a kind completely: in every namespace
// (All, and always so for a cluster-scoped kind it holds), or in the
// namespaces named.
type Coverage struct {
	All        bool
	Namespaces map[string]bool
}

// In says whether the kind is held completely in namespace ns ("" means
// every namespace).
func (c *Coverage) In(ns string) bool {
	return c != nil && (c.All || (ns != "" && c.Namespaces[ns]))
}

// NamespaceList is the namespaces held, sorted.
func (c *Coverage) NamespaceList() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.Namespaces))
	for ns := range c.Namespaces {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// Part is the coverage of a part of a snapshot: where every kind it
// requires is held (nil where none is). A storage view requires its Nodes
// and PVs (a VolumeAttachment whose PV was not collected would look like
// one whose PV is gone); a bundle without VolumeAttachments just has none.
func (b *Bundle) Part(part snapshot.Kinds) *Coverage {
	var out *Coverage
	for i := range kinds {
		k := &kinds[i]
		if k.part&part == 0 || k.resource == "volumeattachments" {
			continue
		}
		out = intersect(out, b.cover[k], out == nil)
		if out == nil {
			return nil
		}
	}
	return out
}

// intersect is a ∩ c; first says a is the whole (nothing intersected yet).
func intersect(a, c *Coverage, first bool) *Coverage {
	if c == nil {
		return nil
	}
	if first || a.All {
		return c
	}
	if c.All {
		return a
	}
	out := &Coverage{Namespaces: map[string]bool{}}
	for ns := range a.Namespaces {
		if c.Namespaces[ns] {
			out.Namespaces[ns] = true
		}
	}
	if len(out.Namespaces) == 0 {
		return nil
	}
	return out
}

// Missing are the kinds read of which the bundle holds nothing at all.
func (b *Bundle) Missing() []string {
	var out []string
	for i := range kinds {
		if b.cover[&kinds[i]] == nil {
			out = append(out, kinds[i].gvk.Kind)
		}
	}
	return out
}

// decoder reads a bundle's files into it.
type decoder struct {
	b     *Bundle
	max   int64
	facts *facts
	// newest is the newest file time seen.
	newest time.Time
	// lists counts the Lists read.
	lists int
	// vmiPage and vmPage gather the VMIs and VMs read, and wire decodes
	// them, a page at a time, as the live audit's page reader does.
	vmiPage, vmPage page
	wire            observe.Decoder
}

// visit reads one file of the bundle.
func (d *decoder) visit(e entry, r io.Reader) error {
	d.b.Files++
	if e.modTime.After(d.newest) {
		d.newest = e.modTime
	}
	if why, routine := d.facts.path(e.name); why != "" {
		d.skip(e.name, why, routine)
		return nil
	}
	if d.facts.special(e.name, r) {
		return nil
	}
	d.facts.current = e.name
	lists := d.lists
	n, err := d.file(e.name, r)
	d.flushAll()
	if isTruncation(err) {
		return err
	}
	if err == nil && d.lists > lists && d.facts.listFile(e.name) {
		return nil // a List of one kind, perhaps empty: it says what exists
	}
	switch {
	case err != nil:
		d.skip(e.name, fmt.Sprintf("read %d object(s), then: %v", n, firstLine(err.Error())), false)
	case n == 0:
		d.skip(e.name, "holds no Kubernetes object", true)
	}
	return nil
}

func (d *decoder) skip(file, reason string, routine bool) {
	d.b.Skipped = append(d.b.Skipped, Skip{File: file, Reason: reason, Routine: routine})
}

// finish decides what the facts gathered say: the layouts, the coverage and
// the collection time.
func (d *decoder) finish() {
	d.flushAll()
	d.b.store.fit()
	f := d.facts
	f.coverage(d.b) // before the layouts: it tells a cluster-info dump
	d.b.Layouts = f.layouts()
	switch {
	case !f.harvesterTime.IsZero():
		d.b.Collected, d.b.CollectedFrom = f.harvesterTime, fmt.Sprintf("bundleCreatedAt in %s (Harvester support bundle)", f.harvesterMeta)
	case !f.mustGatherTime.IsZero():
		d.b.Collected, d.b.CollectedFrom = f.mustGatherTime, fmt.Sprintf("the last line of %s (must-gather's time at the end of collection)", f.mustGatherFile)
	case !d.newest.IsZero():
		d.b.Collected, d.b.CollectedFrom = d.newest, "the newest file time in the bundle (it records no collection time: pass --now to set one)"
	}
}

// isLog says whether a file is by its name a log, text or an archive of
// something else.
func isLog(name string) bool {
	base := path.Base(name)
	for _, suf := range []string{".log", ".html", ".xml", ".pem", ".crt", ".key", ".gz", ".zip", ".tar", ".tgz", ".pcap", ".sh", "_describe.txt"} {
		if strings.HasSuffix(base, suf) {
			return true
		}
	}
	return strings.Contains(base, ".log.") || base == "logs.txt" || base == "version" || base == "must-gather.logs" || base == "gather.logs"
}
