// Package act repairs one OpenStack finding at a time, and only after
// proving again that it is safe: it re-reads the server, the volume and the
// volume's Cinder attachments live (observe.Subject), re-runs the same
// check on them, refuses when the finding changed in any way, and only then
// writes. Results use tether fix's outcomes (Applied, Pending, Refused,
// Failed) with a cause.
//
// This package must never act on a finding whose action is not marked
// safe, never act from the snapshot the plan was made from, and never
// impersonate Nova: it calls Cinder as the operator, so Cinder's own guard
// (cinder/volume/api.py attachment_deletion_allowed, the CVE-2023-2088
// fix) refuses with 409 any attachment delete or force-detach while Nova
// still records that attachment, and that answer is reported as Refused.
package act

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/tether-dev/tether/internal/converge"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/check"
	"github.com/tether-dev/tether/internal/openstack/observe"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
)

// Causes of this package, beside tether's own (drift.AlreadyGone, ...).
const (
	// NovaUsesAttachment: Cinder answered 409 because Nova records the
	// attachment (ConflictNovaUsingAttachment); nothing was changed.
	NovaUsesAttachment drift.Cause = "NovaUsesAttachment"
	// Rejected: the service refused the request as invalid for the
	// object's current state (400 or another 409); nothing was changed.
	Rejected drift.Cause = "Rejected"
)

// Executor repairs findings against the live services.
type Executor struct {
	Clients *observe.Clients
	// Policy must be the policy the plan was made with.
	Policy check.Policy
	// Now is the clock; default time.Now.
	Now func() time.Time
	// WaitTimeout bounds the wait for a change to show; default 60s.
	WaitTimeout time.Duration
	// PollInterval is how often the wait re-reads; default 500ms.
	PollInterval time.Duration
}

func (e *Executor) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// repairs carries out, per action type this package repairs, the write on
// the re-checked subject (the server, the volume, and for the attachment
// checks the attachment).
var repairs = map[drift.ActionType]func(e *Executor, ctx context.Context, server, volume string, at *snapshot.Attachment) drift.Result{
	check.DeleteCinderAttachment: func(e *Executor, ctx context.Context, _, _ string, at *snapshot.Attachment) drift.Result {
		if r := e.deleteAttachment(ctx, at.ID); r != nil {
			return *r
		}
		return e.waitGone(ctx, at.ID, "deleted Cinder attachment "+at.ID)
	},
	check.ForceDetachVolume: func(e *Executor, ctx context.Context, _, volume string, at *snapshot.Attachment) drift.Result {
		if r := e.forceDetach(ctx, volume, at.ID); r != nil {
			return *r
		}
		return e.waitGone(ctx, at.ID, "force-detached attachment "+at.ID+" from volume "+volume)
	},
	check.RecreateAttachmentAndDetach: func(e *Executor, ctx context.Context, server, volume string, _ *snapshot.Attachment) drift.Result {
		return e.recreateAndDetach(ctx, server, volume)
	},
}

// Handles says whether Apply carries out actions of type t (the check rows'
// actions must all be handled; a test holds them to it).
func Handles(t drift.ActionType) bool {
	_, ok := repairs[t]
	return ok
}

// Apply carries out f's action after a live re-read and re-check.
func (e *Executor) Apply(ctx context.Context, f drift.Finding) drift.Result {
	res := e.apply(ctx, f)
	res.FindingID = f.ID
	return res
}

func (e *Executor) apply(ctx context.Context, f drift.Finding) drift.Result {
	if !f.Action.Safe {
		return drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf("the plan marks it not safe (blocked by %s)", f.Action.BlockedBy)}
	}
	server, volume := string(f.Object.UID), f.Volume
	var attachment *snapshot.Attachment
	if f.Object.Kind == "Attachment" {
		at, err := observe.Attachment(ctx, e.Clients, f.Object.Name)
		if err != nil {
			return failed("live re-read", err)
		}
		if at == nil {
			return drift.Result{Outcome: drift.Applied, Cause: drift.AlreadyGone, Message: "Cinder attachment " + f.Object.Name + " is already gone"}
		}
		attachment, server, volume = at, at.Instance, at.VolumeID
	}
	snap, err := observe.Subject(ctx, e.Clients, server, volume)
	if err != nil {
		return failed("live re-read", err)
	}
	if why := e.recheck(f, snap); why != "" {
		return drift.Result{Outcome: drift.Refused, Message: "live re-check: " + why}
	}
	if repair, ok := repairs[f.Action.Type]; ok {
		return repair(e, ctx, server, volume, attachment)
	}
	return drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf("no repair for action %s", f.Action.Type)}
}

// recheck re-runs f's check on the live snapshot and says how the fresh
// finding differs from f ("" when it is the same, still safe).
func (e *Executor) recheck(f drift.Finding, snap *snapshot.Snapshot) string {
	p := e.Policy
	p.Checks = []string{f.Check}
	for _, fresh := range check.Run(snap, p, e.now()) {
		if fresh.ID != f.ID {
			continue
		}
		switch {
		case fresh.Action.Type != f.Action.Type:
			return fmt.Sprintf("the action changed from %s to %s", f.Action.Type, fresh.Action.Type)
		case !fresh.Action.Safe:
			return fmt.Sprintf("no longer safe: blocked by %s (%s)", fresh.Action.BlockedBy, strings.Join(fresh.Evidence, "; "))
		}
		return ""
	}
	return "the finding no longer holds (the server lists the volume again, Cinder holds it for the server, or the subject is gone)"
}

// waitGone waits until Cinder no longer has the attachment.
func (e *Executor) waitGone(ctx context.Context, id, done string) drift.Result {
	gone := func(ctx context.Context) bool {
		at, err := observe.Attachment(ctx, e.Clients, id)
		return err == nil && at == nil
	}
	return converge.Wait(ctx, e.pollInterval(), e.waitTimeout(), gone, done, func(d time.Duration) string {
		return fmt.Sprintf("%s: accepted, but the attachment is still listed after %s", done, d)
	})
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
	return 500 * time.Millisecond
}

func failed(step string, err error) drift.Result {
	return drift.Result{Outcome: drift.Failed, Cause: drift.ServerError, Message: step + " failed: " + err.Error(), Err: err}
}

// answer classifies a write's error: nil when it succeeded.
func answer(step string, err error) *drift.Result {
	if err == nil {
		return nil
	}
	var code gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &code) {
		r := failed(step, err)
		return &r
	}
	body := strings.TrimSpace(string(code.Body))
	switch {
	case code.Actual == http.StatusConflict && strings.Contains(body, "using the Compute API"):
		// cinder/exception.py ConflictNovaUsingAttachment (409): "Detach
		// volume from instance %(instance_id)s using the Compute API".
		return &drift.Result{Outcome: drift.Refused, Cause: NovaUsesAttachment, Message: step + ": Cinder answered 409 because Nova records this attachment; nothing was changed: " + body, Err: err}
	case code.Actual == http.StatusNotFound:
		return &drift.Result{Outcome: drift.Refused, Cause: drift.SubjectGone, Message: step + ": answered 404: the object is gone: " + body, Err: err}
	case code.Actual == http.StatusConflict || code.Actual == http.StatusBadRequest:
		return &drift.Result{Outcome: drift.Refused, Cause: Rejected, Message: fmt.Sprintf("%s: answered %d, nothing was changed: %s", step, code.Actual, body), Err: err}
	case code.Actual == http.StatusUnauthorized:
		return &drift.Result{Outcome: drift.Failed, Cause: drift.Unauthorized, Message: step + ": answered 401: check the cloud's credentials", Err: err}
	case code.Actual == http.StatusForbidden:
		return &drift.Result{Outcome: drift.Failed, Cause: drift.Forbidden, Message: step + ": answered 403: this repair needs the admin role", Err: err}
	}
	return &drift.Result{Outcome: drift.Failed, Cause: drift.ServerError, Message: fmt.Sprintf("%s: answered %d: %s", step, code.Actual, body), Err: err}
}
