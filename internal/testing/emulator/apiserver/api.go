package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator/gates"
	"github.com/tether-dev/tether/internal/testing/emulator/volreq"
)

// KubeVirt's messages (pkg/virt-api/rest).
const (
	msgGatesOff      = "Enable DeclarativeHotplugVolumes or HotplugVolumes feature gate to use this API."
	msgNoBody        = "Request with no body, a new name is expected as the request body"
	msgUnmarshalFmt  = "Can not unmarshal Request body to struct, error: %s"
	msgVMINotRunning = "VMI is not running"
	// vms-admitter.go:450-456, on a VM's status.volumeRequests.
	msgMigrationInProgress = "Cannot handle volume requests while VMI migration is in progress"
	// The VM validating webhook (components/webhooks.go:449).
	vmValidatorWebhook = "virtualmachine-validator.kubevirt.io"
)

const maxBody = 1 << 20

func subresourceGroupResource(resource string) schema.GroupResource {
	return schema.GroupResource{Group: Group, Resource: resource}
}

var (
	vmResource  = virtv1.Resource("virtualmachine")
	vmiResource = virtv1.Resource("virtualmachineinstance")
)

// changeVolume validates and carries out one addvolume/removevolume call.
func (s *Server) changeVolume(r *http.Request, c call) *apierrors.StatusError {
	ctx := r.Context()
	g, err := s.gates(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("unable to read the KubeVirt configuration: %w", err))
	}
	if !g.AnyHotplug() {
		return apierrors.NewBadRequest(msgGatesOff)
	}
	req, dryRun, serr := decodeVolumeRequest(r, c.sub, g.IgnoreDryRun)
	if serr != nil {
		return serr
	}
	switch {
	case c.resource == resourceVMI:
		return s.changeVMIVolumes(ctx, c, req, dryRun, g)
	case g.Hotplug:
		return s.queueVMVolumeRequest(ctx, c, req, dryRun)
	default:
		return s.changeVMVolumes(ctx, c, req, dryRun)
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
		volreq.NormalizeAdd(opts)
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

// changeVMIVolumes is the VMI-level ("ephemeral") path. A migrating VMI
// is no reason to refuse: virt-api has no such check (volumes.go:214-244).
func (s *Server) changeVMIVolumes(ctx context.Context, c call, req *virtv1.VirtualMachineVolumeRequest, dryRun []string, g gates.Gates) *apierrors.StatusError {
	vmi := &virtv1.VirtualMachineInstance{}
	if serr := s.fetch(ctx, c.ns, c.name, vmi, vmiResource); serr != nil {
		return serr
	}
	if ownedByVM(vmi) && !g.Hotplug {
		return apierrors.NewBadRequest(fmt.Sprintf("VMI %s/%s is owned by a VM", vmi.Namespace, vmi.Name))
	}
	if vmi.Status.Phase != virtv1.Running {
		return apierrors.NewConflict(vmiResource, c.name, errors.New(msgVMINotRunning))
	}
	if err := volreq.Verify(vmi.Spec.Volumes, req); err != nil {
		return apierrors.NewConflict(vmiResource, c.name, err)
	}
	data, err := volreq.VolumesPatch("", &vmi.Spec, req)
	if err != nil {
		return apierrors.NewConflict(vmiResource, c.name, err)
	}
	return s.patch(ctx, vmi, data, false, dryRun, "vmi")
}

// changeVMVolumes is the declarative VM-level path: the template changes,
// whether or not the VM runs or its VMI migrates (volumes.go:184-212).
func (s *Server) changeVMVolumes(ctx context.Context, c call, req *virtv1.VirtualMachineVolumeRequest, dryRun []string) *apierrors.StatusError {
	vm := &virtv1.VirtualMachine{}
	if serr := s.fetch(ctx, c.ns, c.name, vm, vmResource); serr != nil {
		return serr
	}
	tmpl := &vm.Spec.Template.Spec
	if err := volreq.Verify(tmpl.Volumes, req); err != nil {
		return apierrors.NewConflict(vmResource, c.name, err)
	}
	data, err := volreq.VolumesPatch("/spec/template", tmpl, req)
	if err != nil {
		return apierrors.NewConflict(vmResource, c.name, err)
	}
	return s.patch(ctx, vm, data, false, dryRun, "vm")
}

// queueVMVolumeRequest is the VM-level path under HotplugVolumes: the request
// is queued in status.volumeRequests for the controller. KubeVirt's VM
// webhook refuses the write while the VM is ready and its VMI migrates.
func (s *Server) queueVMVolumeRequest(ctx context.Context, c call, req *virtv1.VirtualMachineVolumeRequest, dryRun []string) *apierrors.StatusError {
	vm := &virtv1.VirtualMachine{}
	if serr := s.fetch(ctx, c.ns, c.name, vm, vmResource); serr != nil {
		return serr
	}
	if err := volreq.Verify(vm.Spec.Template.Spec.Volumes, req); err != nil {
		return apierrors.NewConflict(vmResource, c.name, err)
	}
	queued, err := volreq.Queue(vm.Status.VolumeRequests, *req)
	if err != nil {
		return apierrors.NewConflict(vmResource, c.name, err)
	}
	if serr := s.denyWhileMigrating(ctx, vm); serr != nil {
		return serr
	}
	data, err := volreq.RequestsPatch(vm.Status.VolumeRequests, queued)
	if err != nil {
		return apierrors.NewConflict(vmResource, c.name, err)
	}
	return s.patch(ctx, vm, data, true, dryRun, "vm status")
}

// denyWhileMigrating is KubeVirt's VM validating webhook on a change of
// status.volumeRequests: with the VM ready and its VMI (not deleting)
// migrating, it denies the write with 422
// (vms-admitter.go:325-338,450-456; webhooks.go:54-88).
func (s *Server) denyWhileMigrating(ctx context.Context, vm *virtv1.VirtualMachine) *apierrors.StatusError {
	if !vm.Status.Ready {
		return nil
	}
	vmi := &virtv1.VirtualMachineInstance{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: vm.Name}, vmi); err != nil || vmi.DeletionTimestamp != nil || !volreq.Migrating(vmi) {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("admission webhook %q denied the request: %s", vmValidatorWebhook, msgMigrationInProgress),
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueNotSupported, Message: msgMigrationInProgress, Field: "spec"}}},
	}}
}

// fetch reads an object live and maps errors as virt-api does.
func (s *Server) fetch(ctx context.Context, ns, name string, obj client.Object, gr schema.GroupResource) *apierrors.StatusError {
	err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return apierrors.NewNotFound(gr, name)
	default:
		return apierrors.NewInternalError(fmt.Errorf("unable to retrieve %s [%s]: %v", gr.Resource, name, err))
	}
}

// patch writes a JSON patch to obj (its status with status) as virt-api
// does: once, without retrying. A change made since obj was read fails the
// patch's test and the API server's 422 passes through, as do other 422s;
// anything else is 500 "unable to patch" (volumes.go:202-210,238-243).
func (s *Server) patch(ctx context.Context, obj client.Object, data []byte, status bool, dryRun []string, what string) *apierrors.StatusError {
	p := client.RawPatch(types.JSONPatchType, data)
	var err error
	if status {
		err = s.client.Status().Patch(ctx, obj, p, &client.SubResourcePatchOptions{PatchOptions: client.PatchOptions{DryRun: dryRun}})
	} else {
		err = s.client.Patch(ctx, obj, p, &client.PatchOptions{DryRun: dryRun})
	}
	if err == nil {
		return nil
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
