package cli

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tether-dev/tether/internal/bundle"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// fromFlags are audit's flags that read a support bundle instead of the
// cluster.
type fromFlags struct {
	from, now string
	maxObject int64
}

func (f *fromFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.from, "from", "", "read a support bundle instead of the cluster: a must-gather, a Harvester support bundle, a kubectl cluster-info dump or `kubectl get -A -o yaml|json` output; a directory, .tar, .tar.gz or .zip (docs/bundles.md); --tenant then names the tenant's bundle, NAME=PATH[:NAMESPACE]")
	fs.StringVar(&f.now, "now", "", "with --from: decide as at this time (RFC 3339, e.g. 2026-03-01T10:00:00Z) instead of the bundle's collection time")
	fs.Int64Var(&f.maxObject, "max-object-size", bundle.DefaultMaxObject, "with --from: skip (and report) any object larger than this many bytes")
}

// validate checks the flags alone.
func (f *fromFlags) validate() (time.Time, error) {
	if f.from == "" {
		if f.now != "" {
			return time.Time{}, fmt.Errorf("--now is for --from (a support bundle): a live audit decides at the time it reads")
		}
		return time.Time{}, nil
	}
	if f.maxObject <= 0 {
		return time.Time{}, fmt.Errorf("--max-object-size %d: use a positive number of bytes", f.maxObject)
	}
	if f.now == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, f.now)
	if err != nil {
		return time.Time{}, fmt.Errorf("--now %q is not an RFC 3339 time (e.g. 2026-03-01T10:00:00Z): %v", f.now, err)
	}
	return t, nil
}

// bundleSource is what an audit of a support bundle says about it
// (AuditReport.Source).
type bundleSource struct {
	Bundle        string    `json:"bundle"`
	Layouts       []string  `json:"layouts"`
	Collected     time.Time `json:"collected"`
	CollectedFrom string    `json:"collectedFrom"`
	// MissingKinds are the kinds read of which the bundle holds nothing.
	MissingKinds []string `json:"missingKinds,omitempty"`
	// Namespaces, when set, are the only namespaces audited: the bundle
	// holds the kinds the checks read completely in these only.
	Namespaces []string `json:"namespaces,omitempty"`
	// ChecksNotRun and ChecksWithLessEvidence say, per check, why.
	ChecksNotRun           []string      `json:"checksNotRun,omitempty"`
	ChecksWithLessEvidence []string      `json:"checksWithLessEvidence,omitempty"`
	Tenants                []string      `json:"tenants,omitempty"`
	Skipped                []bundle.Skip `json:"skipped,omitempty"`
	// RoutineSkipped counts the files that hold no objects by nature.
	RoutineSkipped int    `json:"routineSkipped,omitempty"`
	Note           string `json:"note"`
}

// offlineNote says what an offline report is.
const offlineNote = "read from a support bundle: a picture of the past, as at its collection time; nothing was changed, " +
	"and every remedy is a live command: check each against the live cluster first (tether audit, then tether fix, on the cluster)"

// openBundle opens the bundle at p, telling the tenant's name in errors.
func openBundle(p, tenant string, maxObject int64) (*bundle.Bundle, error) {
	b, err := bundle.Open(p, bundle.Options{MaxObject: maxObject})
	if err != nil && tenant != "" {
		return nil, fmt.Errorf("--tenant %s: %w", tenant, err)
	}
	return b, err
}

// resolveOffline is scopeFlags.resolve for a bundle: no kubeconfig; the
// namespace is --namespace, else every namespace; each --tenant names a
// bundle; the checks are those the bundle holds the inputs of.
func (f *scopeFlags) resolveOffline(from fromFlags, now time.Time) (*options, *bundleSource, *bundle.Bundle, error) {
	sel, minSev, err := f.parse()
	if err != nil {
		return nil, nil, nil, err
	}
	ns := f.namespace
	b, err := openBundle(from.from, "", from.maxObject)
	if err != nil {
		return nil, nil, nil, err
	}
	src := newBundleSource(b, now)
	o := &options{namespace: ns, output: f.output, minSev: minSev, policy: f.policy(sel, ns)}
	o.observe = observe.Options{Namespace: ns, PageSize: observe.Unpaged}
	for _, spec := range f.tenants {
		t, err := f.tenantBundle(spec, ns, from.maxObject)
		if err != nil {
			return nil, nil, nil, err
		}
		o.observe.Tenants = append(o.observe.Tenants, t)
		src.Tenants = append(src.Tenants, t.Name+"="+t.Reader.(*bundle.Bundle).Path)
	}
	if err := src.gate(b, &o.policy, ns); err != nil {
		return nil, nil, nil, err
	}
	if err := o.policy.Validate(); err != nil {
		return nil, nil, nil, err
	}
	return o, src, b, nil
}

// newBundleSource describes b, collected at now when set.
func newBundleSource(b *bundle.Bundle, now time.Time) *bundleSource {
	src := &bundleSource{Bundle: b.Path, Layouts: b.Layouts, Collected: b.Collected, CollectedFrom: b.CollectedFrom,
		MissingKinds: b.Missing(), Note: offlineNote}
	if !now.IsZero() {
		src.Collected, src.CollectedFrom = now, "--now"
	}
	for _, s := range b.Skipped {
		if s.Routine {
			src.RoutineSkipped++
		} else {
			src.Skipped = append(src.Skipped, s)
		}
	}
	return src
}

// tenantBundle parses one --tenant flag of an offline audit: its PATH is
// the tenant's bundle (a directory or a file).
func (f *scopeFlags) tenantBundle(spec, ns string, maxObject int64) (observe.TenantSource, error) {
	t, err := parseTenant(spec, func(p string) bool { _, err := os.Stat(p); return err == nil })
	if err != nil {
		return observe.TenantSource{}, err
	}
	if t.Namespace == "" && ns != "" {
		t.Namespace = ns
	} else if t.Namespace == "" {
		return observe.TenantSource{}, fmt.Errorf("--tenant %s: name the infra namespace of its VMs (NAME=PATH:NAMESPACE): without --namespace it cannot be guessed", spec)
	}
	b, err := openBundle(t.kubeconfig, t.Name, maxObject)
	if err != nil {
		return observe.TenantSource{}, err
	}
	t.Driver, t.MatchNodesByName, t.Reader = f.tenantDriver, f.matchNodesByName, b
	return t.TenantSource, nil
}

// required are the parts without which a check would decide falsely
// (an object missing from the bundle would look gone); the others only
// leave it less evidence (what it cannot read counts as unknown).
const required = snapshot.KindVMs | snapshot.KindVMIs | snapshot.KindPods | snapshot.KindAttachmentPods | snapshot.KindPVCs | snapshot.KindStorage

// gate narrows p to the checks whose inputs b holds for namespace ns (""
// is every namespace), and says why of the others. With every namespace,
// checks of one namespace's objects run in the namespaces where the
// bundle holds all they read; checks of the cluster's storage need every
// pod.
func (src *bundleSource) gate(b *bundle.Bundle, p *check.Policy, ns string) error {
	var run, notRun []string
	var common map[string]bool
	for _, row := range check.All() {
		if len(p.Checks) > 0 && !contains(p.Checks, row.Name) {
			continue
		}
		why, namespaces := gateOne(b, row.Reads, ns)
		if why != "" {
			src.ChecksNotRun = append(src.ChecksNotRun, row.Name+": "+why)
			notRun = append(notRun, row.Name)
			continue
		}
		if namespaces != nil {
			common = intersectNS(common, namespaces)
		}
		var lacking []string
		for _, part := range partsOf(row.Reads &^ required) {
			if b.Part(part) == nil {
				lacking = append(lacking, part.String())
			}
		}
		if len(lacking) > 0 {
			src.ChecksWithLessEvidence = append(src.ChecksWithLessEvidence, fmt.Sprintf("%s: the bundle holds no %s: what they would say counts as unknown", row.Name, strings.Join(lacking, ", ")))
		}
		run = append(run, row.Name)
	}
	if len(run) == 0 {
		return fmt.Errorf("--from %s: no check can run on this bundle: %s", b.Path, strings.Join(src.ChecksNotRun, "; "))
	}
	// Left out, not the others named: a check named is also asked for by
	// name (DanglingVolumeReference's removal), which a live audit of
	// every check is not.
	p.Except = notRun
	if common != nil {
		for n := range common {
			src.Namespaces = append(src.Namespaces, n)
		}
		sort.Strings(src.Namespaces)
		p.Scope.Namespaces = src.Namespaces
	}
	return nil
}

// gateOne says why a check reading reads cannot run on b in namespace ns,
// or the namespaces it can run in (nil: wherever asked).
func gateOne(b *bundle.Bundle, reads snapshot.Kinds, ns string) (string, map[string]bool) {
	var namespaces map[string]bool
	for _, part := range partsOf(reads & required) {
		c := b.Part(part)
		switch {
		case c == nil:
			return fmt.Sprintf("the bundle holds no %s (none existed, or the bundler did not collect them; "+
				"in a plain dump, a kind dumped into a file named after it, `kubectl get pv -o yaml > pv.yaml`, says with an empty list that none exists)", part), nil
		case c.In(ns):
		case ns != "":
			return fmt.Sprintf("the bundle holds %s of namespaces %s only, not of %s", part, strings.Join(c.NamespaceList(), ", "), ns), nil
		case reads.Has(snapshot.KindStorage):
			return fmt.Sprintf("it reads the cluster's storage, and the bundle holds %s of namespaces %s only", part, strings.Join(c.NamespaceList(), ", ")), nil
		default:
			namespaces = intersectNS(namespaces, c.Namespaces)
		}
	}
	if namespaces != nil && len(namespaces) == 0 {
		return "the bundle holds what it reads in no one namespace", nil
	}
	return "", namespaces
}

// partsOf splits k into its parts; the attachment pods are among the pods.
func partsOf(k snapshot.Kinds) []snapshot.Kinds {
	var out []snapshot.Kinds
	for bit := snapshot.Kinds(1); bit != 0 && bit <= snapshot.AllKinds; bit <<= 1 {
		if k&bit == 0 || (bit == snapshot.KindAttachmentPods && k.Has(snapshot.KindPods)) {
			continue
		}
		out = append(out, bit)
	}
	return out
}

func intersectNS(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for n := range b {
		if a == nil || a[n] {
			out[n] = true
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// writeSource writes what the table says of an offline audit before the
// findings.
func writeSource(w io.Writer, s *bundleSource) {
	fmt.Fprintf(w, "offline: %s (%s), as collected at %s (from %s)\n", s.Bundle, strings.Join(s.Layouts, ", "), s.Collected.UTC().Format(time.RFC3339), s.CollectedFrom)
	fmt.Fprintf(w, "offline: %s\n", s.Note)
	if len(s.MissingKinds) > 0 {
		fmt.Fprintf(w, "offline: the bundle holds no %s\n", strings.Join(s.MissingKinds, ", "))
	}
	if len(s.Namespaces) > 0 {
		fmt.Fprintf(w, "offline: audited namespaces %s only: the bundle holds what the checks read completely there only\n", strings.Join(s.Namespaces, ", "))
	}
	for _, c := range s.ChecksNotRun {
		fmt.Fprintf(w, "offline: not run: %s\n", c)
	}
	for _, c := range s.ChecksWithLessEvidence {
		fmt.Fprintf(w, "offline: less evidence: %s\n", c)
	}
	for _, sk := range s.Skipped {
		fmt.Fprintf(w, "offline: skipped %s: %s\n", sk.File, sk.Reason)
	}
	if s.RoutineSkipped > 0 {
		fmt.Fprintf(w, "offline: %d file(s) of logs or other text left unread\n", s.RoutineSkipped)
	}
}

// closeBundles lets go of the objects of the bundles read (--from and
// each --tenant's), once the survey has read them into its snapshot.
func (o *auditOptions) closeBundles() {
	if o.bundle == nil {
		return
	}
	o.bundle.Close()
	for _, t := range o.resolved.observe.Tenants {
		if b, ok := t.Reader.(*bundle.Bundle); ok {
			b.Close()
		}
	}
}

// refuseFixFrom is fix's answer to --from.
func refuseFixFrom(from string) error {
	return fmt.Errorf("tether fix does not act on a support bundle (--from %s): a bundle is a picture of the past, and acting on it could remove what is in use now. "+
		"Read it with `tether audit --from %s`; then, on the live cluster, run `tether fix` with the same scope (it re-reads every object live and re-checks it before it acts)", from, from)
}
