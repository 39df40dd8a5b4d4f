// Package act carries out one planned action at a time, and only after
// proving again that it is safe: it re-reads the subject live, re-runs the
// same check on the fresh objects, asks the server for a dry run (only where
// the server is known to honour it: KubeVirt v0.49 or later), re-reads once
// more to make sure nothing moved in between (VM and VMI read last, compared
// by UID and resourceVersion), and only then writes. Every outcome is
// recorded as an Event on the subject.
//
// This package must never act on a finding whose action is not marked safe,
// never act from cached state, and never force anything. virt-api's
// answers are read by what they mean (answer.go): a 409 is a validation
// conflict, never taken for a migration; a migration is read from the VMI
// before acting, and a migrating VMI is held.
package act

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/converge"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
)

// Executor applies actions against a live cluster.
type Executor struct {
	// Client reads live (no cache) and writes Events and pod deletions.
	Client client.Client
	// Subresources is the subresources.kubevirt.io client.
	Subresources rest.Interface
	// Policy must be the policy the plan was made with.
	Policy check.Policy
	// Observe carries the tenants (and page size) for live re-reads.
	Observe observe.Options
	// Now is the clock; default time.Now.
	Now func() time.Time
	// WaitTimeout bounds the wait for the change to converge; default 60s.
	WaitTimeout time.Duration
	// PollInterval is how often the wait re-reads; default 250ms.
	PollInterval time.Duration
	// Recorder records Events; nil records none.
	Recorder *Recorder
	// AfterDryRun, when set, runs between the accepted dry run and the
	// write (fault-injection tests stop the process there).
	AfterDryRun func(drift.Finding)
}

// Evidence is what the caller's pass knows that a live read cannot see
// again: durable records kept across passes. The live re-check uses it as
// the pass did.
type Evidence struct {
	// NodesGoneSince: durable records of since when Nodes have been missing
	// (see snapshot.Snapshot.NodesGoneSince).
	NodesGoneSince map[string]time.Time
}

// NewExecutor builds an executor for cfg.
func NewExecutor(cfg *rest.Config, p check.Policy, o observe.Options) (*Executor, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	sub, err := virtapi.NewSubresourceClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Executor{Client: c, Subresources: sub, Policy: p, Observe: o, Recorder: &Recorder{Client: c, Component: "tether"}}, nil
}

func (e *Executor) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// actions picks, per action type this package carries out, the action for
// a finding; ev is the pass's durable evidence.
var actions = map[drift.ActionType]func(e *Executor, f drift.Finding, ev Evidence) action{
	check.VMRemoveVolume:          func(e *Executor, f drift.Finding, _ Evidence) action { return e.removeVolume(f) },
	check.VMIRemoveVolume:         func(e *Executor, f drift.Finding, _ Evidence) action { return e.removeVolume(f) },
	check.DeleteAttachmentPod:     func(e *Executor, f drift.Finding, _ Evidence) action { return e.deletePod(f) },
	check.DeletePodsOnFencedNode:  (*Executor).fixStaleAttachment,
	check.DeleteVolumeAttachment:  (*Executor).fixStaleAttachment,
	check.RemoveAttacherFinalizer: (*Executor).fixStaleAttachment,
	check.TaintOutOfService:       (*Executor).fence,
	check.RemoveOutOfServiceTaint: (*Executor).fence,
	check.UncordonTenantNode:      (*Executor).fence,
	check.PersistHotplug:          func(e *Executor, f drift.Finding, _ Evidence) action { return e.persistHotplug(f) },
	check.DeleteMigrationSourcePod: func(e *Executor, f drift.Finding, _ Evidence) action {
		return e.deleteMigrationSourcePod(f)
	},
}

// Handles says whether Apply carries out actions of type t (the check rows'
// actions must all be handled; a test holds them to it).
func Handles(t drift.ActionType) bool {
	_, ok := actions[t]
	return ok
}

// Apply carries out f's action if, and only if, it is still safe. The
// action type picks the action; ev is the pass's durable evidence.
func (e *Executor) Apply(ctx context.Context, f drift.Finding, ev Evidence) drift.Result {
	var r drift.Result
	var a action
	if pick, ok := actions[f.Action.Type]; ok {
		a = pick(e, f, ev)
	}
	switch {
	case !f.Action.Safe:
		r = drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf("action %s is not safe: blocked by %s", f.Action.Type, f.Action.BlockedBy)}
	case a.targets == nil:
		r = drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf("no action to take (%s)", f.Action.Type)}
	default:
		r = e.guarded(ctx, f, a)
	}
	r.FindingID = f.ID
	e.Recorder.record(ctx, f, r)
	return r
}

// action is one action as the guarded protocol runs it: how to re-check
// its finding on fresh state, and what to write then.
type action struct {
	// read reads the subject live.
	read func(context.Context) (*snapshot.Snapshot, error)
	// check re-makes the finding from the fresh snapshot at now.
	check func(s *snapshot.Snapshot, now time.Time) (drift.Finding, bool)
	// explain, when set, says better why a finding no longer made holds
	// no more ("" when it cannot).
	explain func(*snapshot.Snapshot) string
	// targets derives the write from the fresh snapshot, or refuses.
	targets func(*snapshot.Snapshot) (*write, *drift.Result)
}

// write is one change: made for real, or only asked of the server as a
// dry run.
type write struct {
	// do makes the change, or with dryRun asks the server whether it would.
	do func(ctx context.Context, dryRun bool) *drift.Result
	// fingerprint, when set, makes the protocol re-check once more after the
	// dry run and refuse when the fingerprint moved: for writes that take no
	// precondition.
	fingerprint func(*snapshot.Snapshot) string
	// done is the outcome once the write was accepted: a wait for the change
	// to converge, or a message.
	done func(context.Context) drift.Result
}

// guarded runs an action through the one write protocol of this package:
// live read and re-check, the targets derived from that state, a server dry
// run, for writes without precondition a second live re-check whose
// fingerprint must equal the first's, then the write and its outcome. The
// second re-check reads the VM and VMI last (see observe.ForVolume and
// observe.VMReferences), and nothing slow comes between those reads and the
// write: the removevolume subresource takes no UID or resourceVersion
// precondition, so this is as close as tether can hold them.
func (e *Executor) guarded(ctx context.Context, f drift.Finding, a action) drift.Result {
	var r drift.Result
	for try := 1; ; try++ {
		r = e.guardedOnce(ctx, f, a)
		if r.Cause != drift.Race || try == raceAttempts || !e.pause(ctx) {
			break
		}
	}
	if r.Cause == drift.Race {
		r.Message = fmt.Sprintf("%s; gave up after %d tries, each from a fresh live re-read and re-check", r.Message, raceAttempts)
	}
	return r
}

// raceAttempts bounds the tries of an action whose write lost a race
// (virt-api's JSON patch failed its test: the VM or VMI changed in
// between). Each try starts again from a live re-read and re-check.
const raceAttempts = 3

// pause waits one poll interval before another try; false when ctx ended.
func (e *Executor) pause(ctx context.Context) bool {
	t := time.NewTimer(e.pollInterval())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// guardedOnce is one try of the protocol described at guarded.
func (e *Executor) guardedOnce(ctx context.Context, f drift.Finding, a action) drift.Result {
	first, refusal := e.recheck(ctx, f, a)
	if refusal != nil {
		return *refusal
	}
	w, refusal := a.targets(first)
	if refusal != nil {
		return *refusal
	}
	if refusal := w.do(ctx, true); refusal != nil {
		return reached(ctx, w, *refusal)
	}
	if e.AfterDryRun != nil {
		e.AfterDryRun(f)
	}
	if w.fingerprint != nil {
		last, refusal := e.recheck(ctx, f, a)
		if refusal != nil {
			return *refusal
		}
		if refusal := moved(w.fingerprint(first), w.fingerprint(last)); refusal != nil {
			return *refusal
		}
	}
	if refusal := w.do(ctx, false); refusal != nil {
		return reached(ctx, w, *refusal)
	}
	return w.done(ctx)
}

// reached turns a write's answer that the goal was already reached (a
// removevolume answered "does not exist", confirmed by a live re-read) into
// the wait for convergence; any other refusal stays as it is.
func reached(ctx context.Context, w *write, r drift.Result) drift.Result {
	if r.Cause != drift.AlreadyGone {
		return r
	}
	res := w.done(ctx)
	res.Cause = drift.AlreadyGone
	res.Message = r.Message + "; " + res.Message
	return res
}

// recheck reads the subject live and re-runs the check. It returns the
// fresh snapshot, or a refusal when the plan no longer holds.
func (e *Executor) recheck(ctx context.Context, f drift.Finding, a action) (*snapshot.Snapshot, *drift.Result) {
	s, err := a.read(ctx)
	if err != nil {
		return nil, &drift.Result{Outcome: drift.Failed, Message: "live re-read failed", Err: err}
	}
	fresh, ok := a.check(s, e.now())
	if reason := stillSame(f, fresh, ok); reason != "" {
		if !ok && a.explain != nil {
			if why := a.explain(s); why != "" {
				reason = why
			}
		}
		if ok && fresh.Action.BlockedBy == check.VMIMigrating {
			return nil, &drift.Result{Outcome: drift.Migrating, Cause: MigrationInProgress, Message: "live re-check: " + reason + "; retry after the migration ended"}
		}
		return nil, &drift.Result{Outcome: drift.Refused, Message: "live re-check: " + reason}
	}
	return s, nil
}

// stillSame compares a planned finding with the one re-made from live state.
func stillSame(planned, fresh drift.Finding, found bool) string {
	switch {
	case !found:
		return "the condition no longer holds (volume wanted again, already gone, or subject gone)"
	case fresh.Object.UID != planned.Object.UID:
		return fmt.Sprintf("%s %s/%s was re-created (uid %s, planned %s)", planned.Object.Kind, planned.Namespace, planned.Object.Name, fresh.Object.UID, planned.Object.UID)
	case fresh.Action.Type != planned.Action.Type:
		return fmt.Sprintf("the action changed from %s to %s", planned.Action.Type, fresh.Action.Type)
	case !fresh.Action.Safe:
		return fmt.Sprintf("no longer safe: blocked by %s", fresh.Action.BlockedBy)
	}
	return ""
}

// withDryRun adds client.DryRunAll to a write's options on the dry run.
func withDryRun[O any](dryRun bool, opts ...O) []O {
	if dryRun {
		opts = append(opts, any(client.DryRunAll).(O))
	}
	return opts
}

// refused turns the error of a write step into its refusal, nil when there
// was none; on the dry run the step is "dry-run <step>".
func refused(dryRun bool, step string, err error) *drift.Result {
	if err == nil {
		return nil
	}
	if dryRun {
		step = "dry-run " + step
	}
	r := serverRefusal(step, err)
	return &r
}

// waitFor polls converged until it holds, for at most the executor's wait
// timeout (converge.Wait).
func (e *Executor) waitFor(ctx context.Context, converged func(context.Context) bool, done string, late func(time.Duration) string) drift.Result {
	return converge.Wait(ctx, e.pollInterval(), e.waitTimeout(), converged, done, late)
}

// moved refuses when the fingerprints of the first and the last live
// re-check differ: an object was changed, or deleted and re-created under
// the same name (another UID), in between.
func moved(before, after string) *drift.Result {
	if before == after {
		return nil
	}
	return &drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf("live re-check: objects changed during the dry run (%s -> %s); try again", before, after)}
}

// resourceVersions fingerprints the VMs and VMIs of a snapshot by name, UID
// and resourceVersion: a VM deleted and re-created under its name differs.
func resourceVersions(s *snapshot.Snapshot) string {
	var b strings.Builder
	for _, vm := range s.VMs {
		fmt.Fprintf(&b, "vm:%s/%s/%s ", vm.Name, vm.UID, vm.ResourceVersion)
	}
	for _, vmi := range s.VMIs {
		fmt.Fprintf(&b, "vmi:%s/%s/%s ", vmi.Name, vmi.UID, vmi.ResourceVersion)
	}
	return strings.TrimSuffix(b.String(), " ")
}

func serverRefusal(step string, err error) drift.Result {
	switch {
	case apierrors.IsConflict(err):
		return drift.Result{Outcome: drift.Refused, Cause: drift.Conflict, Message: step + " answered 409 Conflict: the object changed since the live re-read (its precondition failed), and nothing was changed; the next pass decides again", Err: err}
	case apierrors.IsNotFound(err):
		return drift.Result{Outcome: drift.Refused, Cause: drift.SubjectGone, Message: step + " answered 404 Not Found: the object is already gone", Err: err}
	}
	a := classifyAnswer(err)
	return drift.Result{Outcome: a.outcome, Cause: a.cause, Message: step + ": " + a.hint + ": " + err.Error(), Err: err}
}

func (e *Executor) waitTimeout() time.Duration {
	if e.WaitTimeout > 0 {
		return e.WaitTimeout
	}
	return 60 * time.Second
}

func (e *Executor) pollInterval() time.Duration {
	if e.PollInterval > 0 {
		return e.PollInterval
	}
	return 250 * time.Millisecond
}
