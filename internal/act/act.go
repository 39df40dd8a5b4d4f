// Package act carries out one planned action at a time, and only after
// proving again that it is safe: it re-reads the subject live, re-runs the
// same check on the fresh objects, asks the server for a dry run (only where
// the server is known to honour it: KubeVirt v0.49 or later), re-reads once
// more to make sure nothing moved in between (VM and VMI read last, compared
// by UID and resourceVersion), and only then writes. Every outcome is
// recorded as an Event on the subject.
//
// This package must never act on a finding whose action is not marked safe,
// never act from cached state, and never force anything: a 409 (migration)
// is reported and left for a later try.
package act

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/check"
	"github.com/tether-dev/tether/internal/kubevirt"
	"github.com/tether-dev/tether/internal/observe"
	"github.com/tether-dev/tether/internal/snapshot"
)

// Outcome is how an attempt ended (contract: shown in plans, Events, metrics).
type Outcome string

// Outcomes.
const (
	// Applied: the change was made and the volume (or pod) is gone.
	Applied Outcome = "Applied"
	// Pending: the change was accepted but had not converged within the wait.
	Pending Outcome = "Pending"
	// Refused: the action was not safe (blocked, or the live re-check
	// disagreed with the plan); nothing was changed.
	Refused Outcome = "Refused"
	// Migrating: the server answered 409 because the VMI migrates; retry later.
	Migrating Outcome = "Migrating"
	// Failed: the server refused or errored; nothing is known to have changed.
	Failed Outcome = "Failed"
)

// Result is the outcome of one action.
type Result struct {
	FindingID string
	Outcome   Outcome
	Message   string
	Err       error `json:"-"`
}

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
	// NodesGoneSince: durable records of since when Nodes have been missing
	// (see snapshot.Snapshot.NodesGoneSince), for live re-checks.
	NodesGoneSince map[string]time.Time
}

// NewExecutor builds an executor for cfg.
func NewExecutor(cfg *rest.Config, p check.Policy, o observe.Options) (*Executor, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	sub, err := kubevirt.NewSubresourceClient(cfg)
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

// Apply carries out f's action if, and only if, it is still safe.
func (e *Executor) Apply(ctx context.Context, f check.Finding) Result {
	var r Result
	switch {
	case !f.Action.Safe:
		r = Result{Outcome: Refused, Message: fmt.Sprintf("action %s is not safe: blocked by %s", f.Action.Type, f.Action.BlockedBy)}
	case f.Check == check.StaleVolumeAttachment:
		r = e.fixStaleAttachment(ctx, f)
	case f.Check == check.DanglingVolumeReference:
		r = e.removeDangling(ctx, f)
	case f.Action.Type == check.VMRemoveVolume || f.Action.Type == check.VMIRemoveVolume:
		r = e.removeVolume(ctx, f)
	case f.Action.Type == check.DeleteAttachmentPod:
		r = e.deletePod(ctx, f)
	default:
		r = Result{Outcome: Refused, Message: fmt.Sprintf("no action to take (%s)", f.Action.Type)}
	}
	r.FindingID = f.ID
	e.Recorder.record(ctx, f, r)
	return r
}

// recheckVolume re-reads the VMI's world and re-runs the check. It returns
// the fresh snapshot and a refusal when the plan no longer holds.
func (e *Executor) recheckVolume(ctx context.Context, f check.Finding) (*snapshot.Snapshot, *Result) {
	s, err := observe.ForVolume(ctx, e.Client, e.Observe, f.Namespace, f.Object.Name)
	if err != nil {
		return nil, &Result{Outcome: Failed, Message: "live re-read failed", Err: err}
	}
	fresh, ok := check.CheckVolume(s, e.Policy, e.now(), f.Namespace, f.Object.Name, f.Volume)
	if reason := stillSame(f, fresh, ok); reason != "" {
		return nil, &Result{Outcome: Refused, Message: "live re-check: " + reason}
	}
	return s, nil
}

// stillSame compares a planned finding with the one re-made from live state.
func stillSame(planned, fresh check.Finding, found bool) string {
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

func (e *Executor) removeVolume(ctx context.Context, f check.Finding) Result {
	s, refusal := e.recheckVolume(ctx, f)
	if refusal != nil {
		return *refusal
	}
	kind, name := kubevirt.VMI, f.Object.Name
	if f.Action.Type == check.VMRemoveVolume {
		kind = kubevirt.VM
		own := check.ResolveOwner(s.Index(), &s.VMIs[0])
		if own.VM == nil {
			return Result{Outcome: Refused, Message: "live re-check: the owning VM is gone"}
		}
		name = own.VM.Name
	}
	recheck := func() (*snapshot.Snapshot, *Result) { return e.recheckVolume(ctx, f) }
	if refusal := e.guardedRemoveVolume(ctx, kind, f.Namespace, name, f.Volume, s, resourceVersions, recheck); refusal != nil {
		return *refusal
	}
	return e.waitVolumeGone(ctx, f, kind)
}

// guardedRemoveVolume is the write protocol of every removevolume action,
// entered after a live re-check that read first: a refusal unless the
// server is known to honour dryRun (KubeVirt v0.49 or later), a server-side
// dry run, a second live re-check whose fingerprint must equal first's,
// then the real call. The second re-check reads the VM and VMI last (see
// observe.ForVolume and readDangling), and nothing slow comes between those
// reads and the call: the subresource takes no UID or resourceVersion
// precondition, so this is as close as tether can hold them. It returns nil
// once the call is accepted, else the refusal or failure.
func (e *Executor) guardedRemoveVolume(ctx context.Context, kind kubevirt.Kind, ns, name, volume string, first *snapshot.Snapshot,
	fingerprint func(*snapshot.Snapshot) string, recheck func() (*snapshot.Snapshot, *Result)) *Result {
	if refusal := dryRunRefusal(first.FeatureGates, kind, ns, name, volume); refusal != nil {
		return refusal
	}
	opts := &kubevirtv1.RemoveVolumeOptions{Name: volume, DryRun: kubevirt.DryRunAll}
	if err := kubevirt.RemoveVolume(ctx, e.Subresources, kind, ns, name, opts); err != nil {
		r := serverRefusal("dry run", err)
		return &r
	}
	last, refusal := recheck()
	if refusal != nil {
		return refusal
	}
	if refusal := moved(fingerprint(first), fingerprint(last)); refusal != nil {
		return refusal
	}
	opts.DryRun = nil
	if err := kubevirt.RemoveVolume(ctx, e.Subresources, kind, ns, name, opts); err != nil {
		r := serverRefusal("removevolume", err)
		return &r
	}
	return nil
}

// moved refuses when the fingerprints of the first and the last live
// re-check differ: an object was changed, or deleted and re-created under
// the same name (another UID), in between.
func moved(before, after string) *Result {
	if before == after {
		return nil
	}
	return &Result{Outcome: Refused, Message: fmt.Sprintf("live re-check: objects changed during the dry run (%s -> %s); try again", before, after)}
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

func serverRefusal(step string, err error) Result {
	switch {
	case apierrors.IsConflict(err):
		return Result{Outcome: Migrating, Message: step + " answered 409 Conflict (the VMI is migrating or changing); retry after it settles", Err: err}
	case apierrors.IsForbidden(err):
		return Result{Outcome: Failed, Message: step + " forbidden: tether's account may not do this, and nothing was changed; grant the permission (for the storage remediations: `kubectl apply -k config/rbac/storage-remediation`), or run in dry run: " + err.Error(), Err: err}
	case errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		return Result{Outcome: Failed, Message: step + " timed out; nothing is known to have changed", Err: err}
	default:
		return Result{Outcome: Failed, Message: step + " refused: " + err.Error(), Err: err}
	}
}

// waitVolumeGone polls the VMI until its status no longer lists the volume.
func (e *Executor) waitVolumeGone(ctx context.Context, f check.Finding, kind kubevirt.Kind) Result {
	timeout, interval := e.WaitTimeout, e.PollInterval
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	for {
		var vmi kubevirtv1.VirtualMachineInstance
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Object.Name}, &vmi)
		if apierrors.IsNotFound(err) || (err == nil && !listsVolume(&vmi, f.Volume)) {
			return Result{Outcome: Applied, Message: fmt.Sprintf("%s removevolume %q done; the volume left the VMI status", kindWord(kind), f.Volume)}
		}
		if time.Now().After(deadline) {
			return Result{Outcome: Pending, Message: fmt.Sprintf("%s removevolume %q accepted, but the VMI still lists the volume after %s", kindWord(kind), f.Volume, timeout)}
		}
		select {
		case <-ctx.Done():
			return Result{Outcome: Pending, Message: "stopped waiting: " + ctx.Err().Error(), Err: ctx.Err()}
		case <-time.After(interval):
		}
	}
}

func listsVolume(vmi *kubevirtv1.VirtualMachineInstance, volume string) bool {
	for _, vs := range vmi.Status.VolumeStatus {
		if vs.Name == volume {
			return true
		}
	}
	return false
}

func kindWord(k kubevirt.Kind) string {
	if k == kubevirt.VM {
		return "VM-level"
	}
	return "VMI-level"
}
