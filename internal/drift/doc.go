// Package drift is the vocabulary every platform of tether speaks: a
// Finding (what a check found, its evidence, and an Action that is either
// safe or blocked for a named reason), the Result of carrying an action out
// (one of five Outcomes, with the Cause that applied), the stable finding
// ID, the one order findings are listed in, and the check registry whose
// rows carry what every other place needs to know of a check.
//
// A platform (KubeVirt, OpenStack) defines its own check names, action
// types, block reasons and causes as values of these types, and plugs into
// the plan/apply driver through internal/plan's Fixer interface.
//
// This package must never import a platform's packages, do I/O or read the
// clock: it is the floor both platforms stand on.
package drift
