// Package records keeps the controller's Finding records: one Keeper names,
// creates, relabels, retires and resolves them, steps their grace periods
// (a pure decision, step.go), holds the one blast-radius budget and runs
// the actions. Every reconciler files its findings through the one Sync;
// a mode with rules of its own (the "on restart" mode) brings them as the
// hooks of its Path, never as a sequence of its own.
//
// It must never decide which findings are open (that is the checks and the
// reconcilers) nor act without package act's live re-check; it imports no
// reconciler and nothing of package controller.
package records
