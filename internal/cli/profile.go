package cli

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// addProfiling adds kubectl's hidden --profile and --profile-output flags:
// a CPU or heap profile of the command, for a report of where a slow
// audit spends its time. The returned function ends the profile; call it
// once the command has run, whatever its outcome.
func addProfiling(root *cobra.Command) func() error {
	var kind, out string
	fs := root.PersistentFlags()
	fs.StringVar(&kind, "profile", "none", "profile to write: none, cpu or heap")
	fs.StringVar(&out, "profile-output", "profile.pprof", "file the profile is written to")
	_ = fs.MarkHidden("profile")
	_ = fs.MarkHidden("profile-output")
	var f *os.File
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		switch kind {
		case "none":
			return nil
		case "cpu", "heap":
		default:
			return fmt.Errorf("--profile %q: use none, cpu or heap", kind)
		}
		var err error
		if f, err = os.Create(out); err != nil {
			return fmt.Errorf("--profile-output: %v", err)
		}
		if kind == "cpu" {
			return pprof.StartCPUProfile(f)
		}
		return nil
	}
	return func() error {
		if f == nil {
			return nil
		}
		defer f.Close()
		if kind == "cpu" {
			pprof.StopCPUProfile()
			return nil
		}
		runtime.GC()
		return pprof.WriteHeapProfile(f)
	}
}
