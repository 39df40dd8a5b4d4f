// Package conformance runs the same KubeVirt scenarios against tether's
// KubeVirt emulator and against real KubeVirt (virt-api and virt-controller
// v1.9.0, see package realkubevirt), and fails where their outcomes differ:
// every behaviour the emulator plays for tether's fast tests is held to what
// real KubeVirt does. Only virt-handler is emulated in both worlds.
package conformance
