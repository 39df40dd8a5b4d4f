package cli

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// addProfiling adds kubectl's hidden --profile and --profile-output flags:
// a CPU or heap profile of the command, for a report of where a slow
// audit spends its time or memory. The returned function ends the profile;
// call it once the command has run, whatever its outcome.
//
// A heap profile is written where the command marks its largest live set
// (markHeap: an audit once its checks have run, before it prints), so its
// in-use figures show what the command holds; a command that marks
// nothing gets it at the end, when little is left in use.
func addProfiling(root *cobra.Command) func() error {
	var kind, out string
	fs := root.PersistentFlags()
	fs.StringVar(&kind, "profile", "none", "profile to write: none, cpu or heap")
	fs.StringVar(&out, "profile-output", "profile.pprof", "file the profile is written to")
	_ = fs.MarkHidden("profile")
	_ = fs.MarkHidden("profile-output")
	var f *os.File
	written := false
	writeHeap := func() error {
		if written {
			return nil
		}
		written = true
		runtime.GC()
		return pprof.WriteHeapProfile(f)
	}
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
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
		cmd.SetContext(context.WithValue(cmd.Context(), heapMarkKey{}, writeHeap))
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
		return writeHeap()
	}
}

type heapMarkKey struct{}

// markHeap writes the heap profile now, when --profile heap asked for one
// (once: later marks and the end of the command write nothing more).
func markHeap(ctx context.Context) error {
	if write, ok := ctx.Value(heapMarkKey{}).(func() error); ok {
		return write()
	}
	return nil
}
