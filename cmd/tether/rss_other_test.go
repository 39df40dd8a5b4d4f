//go:build !linux

package main

import "testing"

// versionPeakRSS is measured on Linux only, where getrusage reports it in
// KiB.
func versionPeakRSS(*testing.T, string, int) string { return "not measured on this OS" }
