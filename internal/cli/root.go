// Package cli is tether's command line: audit (report), fix (supervised
// one-time cleanup, dry run unless --apply), version and shell completion.
// It wires flags to observe → check → act and renders the results; it holds
// no decisions.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tether-dev/tether/internal/bundle"
	"github.com/tether-dev/tether/internal/kubevirt"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	oscheck "github.com/tether-dev/tether/internal/openstack/check"
	"github.com/tether-dev/tether/internal/plan"
	"github.com/tether-dev/tether/internal/report/reportapi"
	"github.com/tether-dev/tether/internal/version"
)

// Exit codes (contract).
const (
	ExitOK       = 0
	ExitFindings = 1
	ExitError    = 2
)

// exitError carries an exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Main runs the command line and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	stopProfile := addProfiling(root)
	err := root.ExecuteContext(context.Background())
	if perr := stopProfile(); perr != nil && err == nil {
		err = perr
	}
	var ee exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintf(stderr, "error: %v\n", err)
		return ExitError
	}
}

// newRoot is the root command with every subcommand; its output goes to
// stdout and stderr.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	name := "tether"
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		name = "kubectl tether"
	}
	root := &cobra.Command{
		Use:           name,
		Short:         "Find and safely fix drifted volume attachments in Kubernetes and KubeVirt",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newAudit(), newFix(), newDoctor(), newController(), newChecks(), newVersion(), newProtect(), newManifests(), newCompletion())
	root.AddCommand(newOpenStack())
	return root
}

// commandOptions are a command's flags and what it runs with. Validate
// checks the flags alone, so a malformed flag is named before any file or
// the cluster is read; Complete turns them into ready values (kubeconfig,
// clients); Run does the work.
type commandOptions interface {
	Validate() error
	Complete(cmd *cobra.Command) error
	Run(ctx context.Context) error
}

// optionsAnnotation marks a command bound to its options by bind (a test
// checks that every command that runs is).
const optionsAnnotation = "tether.dev/options"

// bind makes o the options of cmd: running cmd validates, completes and
// runs o, in that order. It is the one shape of every command.
func bind(cmd *cobra.Command, o commandOptions) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[optionsAnnotation] = fmt.Sprintf("%T", o)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := o.Validate(); err != nil {
			return err
		}
		if err := o.Complete(cmd); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
	return cmd
}

// newVersion is `tether version`: what this build is and what it was built
// against, for people (the default) or scripts (-o json|yaml).
func newVersion() *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date, Go version and the KubeVirt and Kubernetes APIs built against",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml (default: text)")
	return bind(cmd, o)
}

// versionOptions are `tether version`'s.
type versionOptions struct {
	output string
	out    io.Writer
}

// Validate checks --output.
func (o *versionOptions) Validate() error {
	switch o.output {
	case "json", "yaml", "":
		return nil
	}
	return fmt.Errorf("--output %q is not supported by version: use json or yaml, or leave it out for text", o.output)
}

func (o *versionOptions) Complete(cmd *cobra.Command) error {
	o.out = cmd.OutOrStdout()
	return nil
}

// Run prints what this build is.
func (o *versionOptions) Run(context.Context) error {
	i := version.Get()
	if o.output != "" {
		return encode(o.out, o.output, i)
	}
	return printVersion(o.out, i)
}

// printVersion writes i as aligned lines, "unknown" for what the build did
// not record.
func printVersion(w io.Writer, i version.Info) error {
	or := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	_, err := fmt.Fprintf(w, "tether %s\n  commit:          %s\n  built:           %s\n  go:              %s\n  platform:        %s\n  %-16s %s\n  %-16s %s\n",
		i.Version, or(i.Commit), or(i.BuildDate), i.GoVersion, i.Platform,
		version.KubeVirtAPIModule+":", or(i.KubeVirtAPI), version.KubernetesAPIModule+":", or(i.KubernetesAPI))
	return err
}

// newChecks is `tether checks`: the name and doc line of every check.
func newChecks() *cobra.Command {
	return bind(&cobra.Command{
		Use:   "checks",
		Short: "List the checks and what each proves",
		Args:  cobra.NoArgs,
	}, &checksOptions{})
}

// checksOptions are `tether checks`'s (it has no flags).
type checksOptions struct{ stdout io.Writer }

func (o *checksOptions) Validate() error { return nil }

func (o *checksOptions) Complete(cmd *cobra.Command) error {
	o.stdout = cmd.OutOrStdout()
	return nil
}

// Run lists the checks of every platform, each under the command that
// runs it.
func (o *checksOptions) Run(context.Context) error {
	for _, c := range check.All() {
		fmt.Fprintf(o.stdout, "%-22s %s\n", c.Name, c.Doc)
	}
	fmt.Fprintln(o.stdout, "\nOpenStack (tether openstack audit|fix):")
	for _, c := range oscheck.All() {
		fmt.Fprintf(o.stdout, "%-22s %s\n", c.Name, c.Doc)
	}
	return nil
}

// fixer is KubeVirt as the driver drives it, with these options; on a
// terminal it shows on stderr how far the reads are.
func (o *options) fixer(stderr io.Writer) *kubevirt.Fixer {
	x := &kubevirt.Fixer{Config: o.config, Policy: o.policy, Observe: o.observe, MinSeverity: o.minSev, ExtraKinds: o.extraKinds}
	erase := ""
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		x.Observe.Progress = progress(stderr)
		x.Observed = func() { fmt.Fprint(stderr, "\r\033[K") }
		erase = "\r\033[K"
	}
	x.Observe.Relisted = func(err error) {
		fmt.Fprintf(stderr, "%swarning: reading everything again from the start, consistently: %v\n", erase, err)
	}
	return x
}

// newAudit is `tether audit`: read the cluster once, report the findings,
// change nothing.
func newAudit() *cobra.Command {
	o := &auditOptions{}
	o.scope.formats = auditFormats
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Report drifted attachments with evidence; changes nothing",
		Long: `Reads the cluster once (one paginated LIST per kind) and reports every finding
with the facts behind it and the action that would fix it, or why no action is safe.
Exit code: 0 no findings, 1 findings, 2 error.`,
		Args: cobra.NoArgs,
	}
	o.scope.register(cmd.Flags())
	o.report.register(cmd.Flags())
	o.from.register(cmd.Flags())
	cmd.Flags().Lookup("output").Usage = "output format: table, json, yaml, policyreport (PolicyReport objects for kubectl apply; see docs/reports.md) or dot (Graphviz)"
	return bind(cmd, o)
}

// auditOptions are the flags of `tether audit` and, once completed, what
// it runs with.
type auditOptions struct {
	scope  scopeFlags
	report reportFlags
	from   fromFlags

	// Set by Validate and Complete.
	api            reportapi.API
	resolved       *options
	stdout, stderr io.Writer
	// now is --now; source and bundle the bundle of --from.
	now    time.Time
	source *bundleSource
	bundle *bundle.Bundle
}

// Validate checks the report flags against --output, and --from's.
func (o *auditOptions) Validate() error {
	api, err := o.report.parse(o.scope.output)
	o.api = api
	if err != nil {
		return err
	}
	o.now, err = o.from.validate()
	if err == nil && o.from.from != "" && o.scope.cbor {
		err = fmt.Errorf("--cbor is how the API server is asked for pages; with --from nothing is asked of a server: drop one of them")
	}
	return err
}

// Complete resolves the scope flags and the kubeconfig, or the bundle.
func (o *auditOptions) Complete(cmd *cobra.Command) error {
	var r *options
	var err error
	if o.from.from != "" {
		r, o.source, o.bundle, err = o.scope.resolveOffline(o.from, o.now)
	} else {
		r, err = o.scope.resolve()
	}
	if err != nil {
		return err
	}
	if r.output == "dot" {
		r.extraKinds = dotReads
	}
	o.resolved, o.stdout, o.stderr = r, cmd.OutOrStdout(), cmd.ErrOrStderr()
	return nil
}

// Run surveys the cluster once and prints the findings.
func (o *auditOptions) Run(ctx context.Context) error {
	x := o.resolved.fixer(o.stderr)
	// The findings' words are written as they are printed (printAudit).
	x.DeferText = true
	if o.bundle != nil {
		x.Source, x.Now = o.bundle, o.source.Collected
		cleared := x.Observed
		x.Observed = func() { // the snapshot holds what the checks read
			if cleared != nil {
				cleared()
			}
			o.closeBundles()
			// Collect now, while the heap holds the snapshot alone, and
			// give the memory the reading used back: the reading's
			// garbage and the bundle's index would otherwise stay
			// resident beside what the checks allocate next.
			debug.FreeOSMemory()
		}
	}
	s, err := x.Survey(ctx)
	if err != nil {
		return err
	}
	// The first-sighting stage, with no earlier sighting, holds the
	// findings a fix acts on only when seen twice NotSeenTwice.
	fs := plan.Once(x, s, "tether fix")
	// The snapshot and the findings are the largest live set of an audit.
	if err := markHeap(ctx); err != nil {
		return err
	}
	// Collect once before printing: what the checks made and dropped is
	// garbage now, and the words printed next (hundreds of MiB at 100,000
	// VMIs, each finding's dropped once written) would otherwise pile up
	// on it before the next collection; so the peak is the live set and
	// the printing's garbage, wherever the last collection happened to
	// fall.
	runtime.GC()
	p := auditPrint{format: o.resolved.output, api: o.api, namespace: o.resolved.namespace, now: time.Now(), source: o.source}
	if o.source != nil && p.format != "table" && p.format != "json" && p.format != "yaml" {
		writeSource(o.stderr, o.source) // policy reports and graphs have no place for it
	}
	if err := printAudit(o.stdout, p, x.Last, fs); err != nil {
		return err
	}
	if len(fs) > 0 {
		return exitError{ExitFindings}
	}
	return nil
}

// progress returns an observe.Progress that shows on one terminal line how
// many objects of each kind have been read so far. The kinds are read
// concurrently, so it serializes its writes.
func progress(w io.Writer) func(kind string, n int) {
	t0 := time.Now()
	var mu sync.Mutex
	var kinds []string
	counts := map[string]int{}
	return func(kind string, n int) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := counts[kind]; !ok {
			kinds = append(kinds, kind)
		}
		counts[kind] = n
		var b strings.Builder
		for _, k := range kinds {
			fmt.Fprintf(&b, " %d %ss", counts[k], kindShort(k))
		}
		fmt.Fprintf(w, "\r\033[Klisted%s (%s)", b.String(), time.Since(t0).Round(100*time.Millisecond))
	}
}
