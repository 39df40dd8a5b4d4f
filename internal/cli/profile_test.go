package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
)

// A heap profile is written where the command marks its largest live set,
// not only once the command has let everything go.
func TestHeapProfileIsWrittenAtTheMark(t *testing.T) {
	out := filepath.Join(t.TempDir(), "heap.pprof")
	var atMark, atEnd int64 = -1, -1
	root := &cobra.Command{Use: "root"}
	root.AddCommand(&cobra.Command{Use: "work", RunE: func(cmd *cobra.Command, _ []string) error {
		if err := markHeap(cmd.Context()); err != nil {
			return err
		}
		st, err := os.Stat(out)
		if err != nil {
			return err
		}
		atMark = st.Size()
		return nil
	}})
	stop := addProfiling(root)
	root.SetArgs([]string{"work", "--profile", "heap", "--profile-output", out})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	atEnd = st.Size()
	if atMark <= 0 {
		t.Fatalf("the profile was empty when the command marked its heap (%d bytes), want it written there", atMark)
	}
	if atEnd != atMark {
		t.Errorf("the profile was written again at the end (%d bytes at the mark, %d at the end), want only at the mark", atMark, atEnd)
	}
}

// Without --profile, marking the heap writes nothing.
func TestMarkHeapWithoutProfileDoesNothing(t *testing.T) {
	root := &cobra.Command{Use: "root"}
	dir := t.TempDir()
	t.Chdir(dir)
	root.AddCommand(&cobra.Command{Use: "work", RunE: func(cmd *cobra.Command, _ []string) error { return markHeap(cmd.Context()) }})
	stop := addProfiling(root)
	root.SetArgs([]string{"work"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("marking the heap without --profile wrote %v", entries)
	}
}
