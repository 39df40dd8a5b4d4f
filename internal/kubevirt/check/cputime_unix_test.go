//go:build unix

package check

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time this process has used, so that benchmarks
// can report the work done, not the time spent waiting on a busy machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
