package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KubeVirt's messages (pkg/virt-api/rest).
const (
	msgGatesOff      = "Enable DeclarativeHotplugVolumes or HotplugVolumes feature gate to use this API."
	msgNoBody        = "Request with no body, a new name is expected as the request body"
	msgUnmarshalFmt  = "Can not unmarshal Request body to struct, error: %s"
	msgVMINotRunning = "VMI is not running"
	msgMigrating     = "VMI is migrating: volumes cannot change until the migration has ended"
)

const maxBody = 1 << 20

func subresourceGroupResource(resource string) schema.GroupResource {
	return schema.GroupResource{Group: subresourceGroup, Resource: resource}
}

var (
	vmResource  = virtv1.Resource("virtualmachine")
	vmiResource = virtv1.Resource("virtualmachineinstance")
)

// changeVolume validates and carries out one addvolume/removevolume call.
func (e *Emulator) changeVolume(r *http.Request, c call) *apierrors.StatusError {
	ctx := r.Context()
	g, err := e.gates(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("unable to read the KubeVirt configuration: %w", err))
	}
	if !g.anyHotplug() {
		return apierrors.NewBadRequest(msgGatesOff)
	}
	req, dryRun, serr := decodeVolumeRequest(r, c.sub, g.ignoreDryRun)
	if serr != nil {
		return serr
	}
	switch {
	case c.resource == resourceVMI:
		return e.changeVMIVolumes(ctx, c, req, dryRun, g)
	case g.hotplug:
		return e.queueVMVolumeRequest(ctx, c, req, dryRun)
	default:
		return e.changeVMVolumes(ctx, c, req, dryRun)
	}
}

// decodeVolumeRequest reads AddVolumeOptions or RemoveVolumeOptions. With
// ignoreDryRun (the fault mode IgnoreDryRunAnnotation) the dryRun field is
// dropped unread, as virt-api before v0.49 did: the call is real.
func decodeVolumeRequest(r *http.Request, sub string, ignoreDryRun bool) (*virtv1.VirtualMachineVolumeRequest, []string, *apierrors.StatusError) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil, apierrors.NewBadRequest(msgNoBody)
	}
	defer r.Body.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(io.LimitReader(r.Body, maxBody), 1024)
	req := &virtv1.VirtualMachineVolumeRequest{}
	var dryRun []string
	if sub == subAddVolume {
		opts := &virtv1.AddVolumeOptions{}
		if err := dec.Decode(opts); err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf(msgUnmarshalFmt, err))
		}
		switch {
		case opts.Name == "":
			return nil, nil, apierrors.NewBadRequest("AddVolumeOptions requires name to be set")
		case opts.Disk == nil:
			return nil, nil, apierrors.NewBadRequest("AddVolumeOptions requires disk to not be nil")
		case opts.VolumeSource == nil:
			return nil, nil, apierrors.NewBadRequest("AddVolumeOptions requires VolumeSource to not be nil")
		}
		normalizeAdd(opts)
		dryRun, req.AddVolumeOptions = opts.DryRun, opts
	} else {
		opts := &virtv1.RemoveVolumeOptions{}
		if err := dec.Decode(opts); err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf(msgUnmarshalFmt, err))
		}
		if opts.Name == "" {
			return nil, nil, apierrors.NewBadRequest("RemoveVolumeOptions requires name to be set")
		}
		dryRun, req.RemoveVolumeOptions = opts.DryRun, opts
	}
	if ignoreDryRun {
		if req.AddVolumeOptions != nil {
			req.AddVolumeOptions.DryRun = nil
		} else {
			req.RemoveVolumeOptions.DryRun = nil
		}
		return req, nil, nil
	}
	for _, v := range dryRun {
		if v != metav1.DryRunAll {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("unsupported dryRun value %q: the only supported value is %q", v, metav1.DryRunAll))
		}
	}
	if len(dryRun) == 0 {
		dryRun = nil
	}
	return req, dryRun, nil
}

// changeVMIVolumes is the VMI-level ("ephemeral") path.
func (e *Emulator) changeVMIVolumes(ctx context.Context, c call, req *virtv1.VirtualMachineVolumeRequest, dryRun []string, g gates) *apierrors.StatusError {
	return e.update(ctx, func() (client.Object, bool, *apierrors.StatusError) {
		vmi := &virtv1.VirtualMachineInstance{}
		if serr := e.fetch(ctx, c.ns, c.name, vmi, vmiResource); serr != nil {
			return nil, false, serr
		}
		if ownedByVM(vmi) && !g.hotplug {
			return nil, false, apierrors.NewBadRequest(fmt.Sprintf("VMI %s/%s is owned by a VM", vmi.Namespace, vmi.Name))
		}
		if vmi.Status.Phase != virtv1.Running {
			return nil, false, apierrors.NewConflict(vmiResource, c.name, errors.New(msgVMINotRunning))
		}
		if migrating(vmi) {
			return nil, false, apierrors.NewConflict(vmiResource, c.name, errors.New(msgMigrating))
		}
		if err := verifyVolumeRequest(vmi.Spec.Volumes, req); err != nil {
			return nil, false, apierrors.NewConflict(vmiResource, c.name, err)
		}
		applyVolumeRequest(&vmi.Spec, req)
		return vmi, false, nil
	}, dryRun, "vmi")
}

// changeVMVolumes is the declarative VM-level path: the template changes.
func (e *Emulator) changeVMVolumes(ctx context.Context, c call, req *virtv1.VirtualMachineVolumeRequest, dryRun []string) *apierrors.StatusError {
	return e.update(ctx, func() (client.Object, bool, *apierrors.StatusError) {
		vm, serr := e.fetchVMForChange(ctx, c)
		if serr != nil {
			return nil, false, serr
		}
		tmpl := &vm.Spec.Template.Spec
		if err := verifyVolumeRequest(tmpl.Volumes, req); err != nil {
			return nil, false, apierrors.NewConflict(vmResource, c.name, err)
		}
		applyVolumeRequest(tmpl, req)
		return vm, false, nil
	}, dryRun, "vm")
}

// queueVMVolumeRequest is the VM-level path under HotplugVolumes: the request
// is queued in status.volumeRequests for the controller.
func (e *Emulator) queueVMVolumeRequest(ctx context.Context, c call, req *virtv1.VirtualMachineVolumeRequest, dryRun []string) *apierrors.StatusError {
	return e.update(ctx, func() (client.Object, bool, *apierrors.StatusError) {
		vm, serr := e.fetchVMForChange(ctx, c)
		if serr != nil {
			return nil, false, serr
		}
		if err := verifyVolumeRequest(vm.Spec.Template.Spec.Volumes, req); err != nil {
			return nil, false, apierrors.NewConflict(vmResource, c.name, err)
		}
		queued, err := queueVolumeRequest(vm.Status.VolumeRequests, *req)
		if err != nil {
			return nil, false, apierrors.NewConflict(vmResource, c.name, err)
		}
		vm.Status.VolumeRequests = queued
		return vm, true, nil
	}, dryRun, "vm status")
}

func (e *Emulator) fetchVMForChange(ctx context.Context, c call) (*virtv1.VirtualMachine, *apierrors.StatusError) {
	vm := &virtv1.VirtualMachine{}
	if serr := e.fetch(ctx, c.ns, c.name, vm, vmResource); serr != nil {
		return nil, serr
	}
	vmi := &virtv1.VirtualMachineInstance{}
	err := e.client.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: c.name}, vmi)
	if err == nil && migrating(vmi) {
		return nil, apierrors.NewConflict(vmResource, c.name, errors.New(msgMigrating))
	}
	return vm, nil
}

// fetch reads an object live and maps errors as virt-api does.
func (e *Emulator) fetch(ctx context.Context, ns, name string, obj client.Object, gr schema.GroupResource) *apierrors.StatusError {
	err := e.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return apierrors.NewNotFound(gr, name)
	default:
		return apierrors.NewInternalError(fmt.Errorf("unable to retrieve %s [%s]: %v", gr.Resource, name, err))
	}
}

// writeConflict marks an apiserver write conflict, the only error that
// update retries (a Conflict from validation is final).
type writeConflict struct{ err error }

func (w writeConflict) Error() string { return w.err.Error() }

// update runs change (read, validate, mutate) and writes the result with its
// resourceVersion as precondition, retrying on write conflicts. status
// selects the status subresource.
func (e *Emulator) update(ctx context.Context, change func() (client.Object, bool, *apierrors.StatusError), dryRun []string, what string) *apierrors.StatusError {
	var final *apierrors.StatusError
	err := retry.OnError(retry.DefaultRetry, func(err error) bool {
		var wc writeConflict
		return errors.As(err, &wc)
	}, func() error {
		obj, status, serr := change()
		if serr != nil {
			final = serr
			return nil
		}
		var err error
		if status {
			err = e.client.Status().Update(ctx, obj, &client.SubResourceUpdateOptions{UpdateOptions: client.UpdateOptions{DryRun: dryRun}})
		} else {
			err = e.client.Update(ctx, obj, &client.UpdateOptions{DryRun: dryRun})
		}
		if apierrors.IsConflict(err) {
			return writeConflict{err}
		}
		return err
	})
	if final != nil {
		return final
	}
	if err == nil {
		return nil
	}
	var wc writeConflict
	if errors.As(err, &wc) {
		err = wc.err
	}
	var serr *apierrors.StatusError
	if apierrors.IsInvalid(err) && errors.As(err, &serr) {
		return serr
	}
	return apierrors.NewInternalError(fmt.Errorf("unable to patch %s: %v", what, err))
}

// ownedByVM reports whether a VM controls the VMI (as virt-api decides it).
func ownedByVM(vmi *virtv1.VirtualMachineInstance) bool {
	owner := metav1.GetControllerOf(vmi)
	return owner != nil && owner.Kind == "VirtualMachine" && owner.APIVersion == virtv1.SchemeGroupVersion.String()
}

// migrating reports whether a migration of the VMI is under way.
func migrating(vmi *virtv1.VirtualMachineInstance) bool {
	m := vmi.Status.MigrationState
	return m != nil && !m.Completed && !m.Failed
}
