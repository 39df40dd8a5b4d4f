//go:build linux

// Command peakrss runs a command and prints its peak resident set size in
// KiB (getrusage's ru_maxrss); the command's output goes to stderr.
//
// It exists because Linux charges a child, at exec, with the peak RSS of
// the process that started it (Go starts children with vfork, so the old
// memory is the parent's): measured from a test binary that links all of
// tether, tether's figure would be at least the test's. This process is
// small, so the peak it reports is the command's own.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peakrss COMMAND [ARG...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(1)
	}
	fmt.Println(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
}
