package act

import (
	"context"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/attachments"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"

	"github.com/tether-dev/tether/internal/converge"
	"github.com/tether-dev/tether/internal/drift"
)

// deleteAttachment is DELETE /v3/{project}/attachments/{id} (block-storage
// 3.27). Cinder answers 409 while Nova records the attachment.
func (e *Executor) deleteAttachment(ctx context.Context, id string) *drift.Result {
	err := attachments.Delete(ctx, e.Clients.BlockStorage, id).ExtractErr()
	if gophercloud.ResponseCodeIs(err, 404) {
		return &drift.Result{Outcome: drift.Applied, Cause: drift.AlreadyGone, Message: "Cinder attachment " + id + " was already gone"}
	}
	return answer("deleting Cinder attachment "+id, err)
}

// forceDetach is the volume action os-force_detach with the attachment id
// (Cinder API reference, "Force detach a volume"; admin). Cinder
// terminates the connection and deletes that attachment, and answers 409
// while Nova records it. A guest may still use that connection, so the
// check marks this safe only on a stopped server (ServerRunning).
func (e *Executor) forceDetach(ctx context.Context, volume, attachment string) *drift.Result {
	c := e.Clients.BlockStorage
	body := map[string]any{"os-force_detach": map[string]any{"attachment_id": attachment}}
	resp, err := c.Post(ctx, c.ServiceURL("volumes", volume, "action"), body, nil, &gophercloud.RequestOpts{OkCodes: []int{202}})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	return answer(fmt.Sprintf("force-detaching attachment %s from volume %s", attachment, volume), err)
}

// recreateAndDetach repairs a mapping Nova keeps for a volume Cinder no
// longer holds for the server. Nova's detach needs the volume in-use with
// an attachment for the server (nova/volume/cinder.py check_detach), so
// tether first gives it one: POST /attachments without a connector
// (reserved, no export on the backend), os-complete (block-storage 3.44:
// attached, volume in-use). Nova's detach (DELETE os-volume_attachments)
// then deletes its mapping; it deletes the attachment its mapping records,
// which is gone, and leaves the new one with the volume detaching, so
// tether deletes that one last (Cinder allows it: an attachment without
// connection info is not connected to a server). Nova's detach also
// detaches the disk on the hypervisor, so the check marks this safe only on
// a stopped server (ServerRunning otherwise), and the live re-check holds
// it to that.
func (e *Executor) recreateAndDetach(ctx context.Context, server, volume string) drift.Result {
	bs := *e.Clients.BlockStorage
	bs.Microversion = "3.44"
	at, err := attachments.Create(ctx, &bs, attachments.CreateOpts{VolumeUUID: volume, InstanceUUID: server}).Extract()
	if r := answer("creating a Cinder attachment of volume "+volume+" for server "+server, err); r != nil {
		return *r
	}
	undo := func(r drift.Result) drift.Result {
		if err := attachments.Delete(ctx, &bs, at.ID).ExtractErr(); err != nil {
			r.Message += fmt.Sprintf("; removing the attachment %s tether created failed too (%v): delete it with `openstack --os-volume-api-version 3.27 volume attachment delete %s`", at.ID, err, at.ID)
		} else {
			r.Message += "; the attachment tether created was deleted again"
		}
		return r
	}
	if err := attachments.Complete(ctx, &bs, at.ID).ExtractErr(); err != nil {
		return undo(*answer("completing attachment "+at.ID, err))
	}
	if err := volumeattach.Delete(ctx, e.Clients.Compute, server, volume).ExtractErr(); err != nil {
		return undo(*answer("detaching volume "+volume+" from server "+server+" through Nova", err))
	}
	if r := e.waitUnmapped(ctx, server, volume); r != nil {
		r.Message += fmt.Sprintf("; Cinder attachment %s stays for Nova's detach: delete it once Nova no longer lists the volume", at.ID)
		return *r
	}
	if r := e.deleteAttachment(ctx, at.ID); r != nil && r.Outcome != drift.Applied {
		r.Message = "Nova dropped its mapping, but " + r.Message
		return *r
	}
	res := e.waitGone(ctx, at.ID, fmt.Sprintf("Nova detached volume %s from server %s (through Cinder attachment %s, deleted after)", volume, server, at.ID))
	return res
}

// waitUnmapped waits until Nova no longer lists the volume on the server;
// nil when it does not.
func (e *Executor) waitUnmapped(ctx context.Context, server, volume string) *drift.Result {
	unmapped := func(ctx context.Context) bool {
		p, err := volumeattach.List(e.Clients.Compute, server).AllPages(ctx)
		if err != nil {
			return false
		}
		vas, err := volumeattach.ExtractVolumeAttachments(p)
		return err == nil && !listsVolume(vas, volume)
	}
	r := converge.Wait(ctx, e.pollInterval(), e.waitTimeout(), unmapped, fmt.Sprintf("Nova's detach of volume %s from server %s", volume, server), func(d time.Duration) string {
		return fmt.Sprintf("Nova accepted the detach of volume %s from server %s but still lists it after %s", volume, server, d)
	})
	if r.Outcome == drift.Applied {
		return nil
	}
	return &r
}

func listsVolume(vas []volumeattach.VolumeAttachment, volume string) bool {
	for _, va := range vas {
		if va.VolumeID == volume {
			return true
		}
	}
	return false
}
