package cli

import (
	"io"
	"testing"

	"github.com/spf13/cobra"
)

// Every command that runs has one shape: its options, bound by bind, are
// validated (flags alone), completed (files, kubeconfig, clients) and run.
func TestEveryCommandHasOneShape(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c.Name() == "help" {
			return
		}
		n++
		if c.Annotations[optionsAnnotation] == "" {
			t.Errorf("%q runs without options bound by bind(): give it an options type with Validate, Complete and Run", c.CommandPath())
		}
	}
	walk(newRoot(io.Discard, io.Discard))
	if n < 8 {
		t.Fatalf("only %d runnable commands found: the walk does not see the real tree", n)
	}
}
