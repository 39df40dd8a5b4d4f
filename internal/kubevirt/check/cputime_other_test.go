//go:build !unix

package check

import "time"

func processCPU() time.Duration { return 0 }
