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
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	oscheck "github.com/tether-dev/tether/internal/openstack/check"
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
	root.AddCommand(newAudit(), newFix(), newController(), newChecks(), newVersion(), newProtect(), newManifests(), newCompletion())
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

// runOptions validates, completes and runs o for cmd.
func runOptions(cmd *cobra.Command, o commandOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if err := o.Complete(cmd); err != nil {
		return err
	}
	return o.Run(cmd.Context())
}

// newVersion is `tether version`: what this build is and what it was built
// against, for people (the default) or scripts (-o json|yaml).
func newVersion() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date, Go version and the KubeVirt and Kubernetes APIs built against",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			i := version.Get()
			switch output {
			case "json", "yaml":
				return encode(cmd.OutOrStdout(), output, i)
			case "":
				return printVersion(cmd.OutOrStdout(), i)
			}
			return fmt.Errorf("--output %q is not supported by version: use json or yaml, or leave it out for text", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: text)")
	return cmd
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
	return &cobra.Command{
		Use:   "checks",
		Short: "List the checks and what each proves",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, c := range check.All() {
				fmt.Fprintf(cmd.OutOrStdout(), "%-22s %s\n", c.Name, c.Doc)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "\nOpenStack (tether openstack audit|fix):")
			for _, c := range oscheck.All() {
				fmt.Fprintf(cmd.OutOrStdout(), "%-22s %s\n", c.Name, c.Doc)
			}
			return nil
		},
	}
}

// scan reads the cluster and runs the checks.
func scan(ctx context.Context, o *options, stderr io.Writer) (*snapshot.Snapshot, []drift.Finding, error) {
	c, err := clients.New(o.config)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to the cluster: %v", err)
	}
	obs := o.observe
	// Only the kinds the chosen checks decide from are read, and of the
	// objects only what decisions read.
	obs.Kinds, obs.Lean = check.Reads(o.policy.Checks)|o.extraKinds, true
	if obs.Pages, err = observe.NewPageReader(o.config); err != nil {
		return nil, nil, fmt.Errorf("connecting to the cluster: %v", err)
	}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		obs.Progress = progress(stderr)
		defer fmt.Fprint(stderr, "\r\033[K")
	}
	s, err := observe.Observe(ctx, c, obs)
	if err != nil {
		return nil, nil, err
	}
	findings := check.Run(s, o.policy, time.Now())
	kept := findings[:0]
	for _, f := range findings {
		if f.Severity.Rank() >= o.minSev.Rank() {
			kept = append(kept, f)
		}
	}
	return s, kept, nil
}

// newAudit is `tether audit`: read the cluster once, report the findings,
// change nothing.
func newAudit() *cobra.Command {
	var f scopeFlags
	var rf reportFlags
	f.formats = auditFormats
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Report drifted attachments with evidence; changes nothing",
		Long: `Reads the cluster once (one paginated LIST per kind) and reports every finding
with the facts behind it and the action that would fix it, or why no action is safe.
Exit code: 0 no findings, 1 findings, 2 error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := rf.parse(f.output)
			if err != nil {
				return err
			}
			o, err := f.resolve()
			if err != nil {
				return err
			}
			if o.output == "dot" {
				o.extraKinds = dotReads
			}
			s, findings, err := scan(cmd.Context(), o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			p := auditPrint{format: o.output, api: api, namespace: o.namespace, now: time.Now()}
			if err := printAudit(cmd.OutOrStdout(), p, s, findings); err != nil {
				return err
			}
			if len(findings) > 0 {
				return exitError{ExitFindings}
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	rf.register(cmd.Flags())
	cmd.Flags().Lookup("output").Usage = "output format: table, json, yaml, policyreport (PolicyReport objects for kubectl apply; see docs/reports.md) or dot (Graphviz)"
	return cmd
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
