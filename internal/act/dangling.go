package act

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/check"
	"github.com/tether-dev/tether/internal/kubevirt"
	"github.com/tether-dev/tether/internal/observe"
	"github.com/tether-dev/tether/internal/snapshot"
)

// removeDangling removes a dangling hot-plugged reference found by
// DanglingVolumeReference: from the VM spec (VM-level removevolume) or from
// a running VMI (VMI-level). Same steps as every action: live re-read,
// re-check, server dry run, re-read to make sure nothing moved, write, wait.
func (e *Executor) removeDangling(ctx context.Context, f check.Finding) Result {
	kind := kubevirt.VMI
	if f.Object.Kind == "VirtualMachine" {
		kind = kubevirt.VM
	}
	s, refusal := e.recheckDangling(ctx, f)
	if refusal != nil {
		return *refusal
	}
	recheck := func() (*snapshot.Snapshot, *Result) { return e.recheckDangling(ctx, f) }
	if refusal := e.guardedRemoveVolume(ctx, kind, f.Namespace, f.Object.Name, f.Volume, s, danglingVersions, recheck); refusal != nil {
		return *refusal
	}
	if kind == kubevirt.VMI {
		return e.waitVolumeGone(ctx, f, kind)
	}
	return e.waitVMSpecDropped(ctx, f)
}

// recheckDangling reads the subject's world live and re-runs the check.
func (e *Executor) recheckDangling(ctx context.Context, f check.Finding) (*snapshot.Snapshot, *Result) {
	s, err := readDangling(ctx, e.Client, f.Namespace, f.Object.Name, f.Volume)
	if err != nil {
		return nil, &Result{Outcome: Failed, Message: "live re-read failed", Err: err}
	}
	fresh, ok := check.CheckDangling(s, e.Policy, e.now(), f.Namespace, f.Object.Kind, f.Object.Name, f.Volume)
	if reason := stillSame(f, fresh, ok); reason != "" {
		if !ok {
			if why := storageBack(s); why != "" {
				reason = why
			}
		}
		return nil, &Result{Outcome: Refused, Message: "live re-check: " + reason}
	}
	return s, nil
}

// storageBack names the storage that exists again, if any: a PVC or
// DataVolume re-created (or restored) under the same name since the plan.
func storageBack(s *snapshot.Snapshot) string {
	var found []string
	for _, pvc := range s.PVCs {
		if pvc.DeletionTimestamp == nil {
			found = append(found, fmt.Sprintf("PVC %s/%s exists (uid %s, created %s)", pvc.Namespace, pvc.Name, pvc.UID, pvc.CreationTimestamp.UTC().Format(time.RFC3339)))
		}
	}
	for _, dv := range s.DataVolumes {
		if dv.DeletionTimestamp == nil && dv.Status.Phase != cdiv1.Failed {
			found = append(found, fmt.Sprintf("DataVolume %s/%s exists (uid %s, phase %s)", dv.Namespace, dv.Name, dv.UID, dv.Status.Phase))
		}
	}
	if len(found) == 0 {
		return ""
	}
	return "the reference is no longer dangling: " + strings.Join(found, "; ") + " (re-created or restored since the plan)"
}

// readDangling reads live what CheckDangling needs for one reference: the
// feature gates, the namespace's attachment pods, the namespace's VMs, the
// VMI of that name, and the PVCs and DataVolumes the volume may use.
//
// The VMs and the VMI come after the gates and pods, so that the write
// rests on VM state read right before it; only the claims named by those
// specs follow (they depend on them), and every read is a quick one of the
// cluster's own apiserver.
func readDangling(ctx context.Context, c client.Client, ns, name, volume string) (*snapshot.Snapshot, error) {
	var s snapshot.Snapshot
	s.FeatureGates = observe.ReadGates(ctx, c)
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{snapshot.AttachmentPodLabel: snapshot.AttachmentPodLabelValue}); err != nil {
		return nil, fmt.Errorf("listing attachment pods in %s: %w", ns, err)
	}
	s.AttachmentPods = pods.Items
	// Every VM of the namespace: another VM's dataVolumeTemplates may be
	// about to create the DataVolume the reference names.
	var vms kubevirtv1.VirtualMachineList
	if err := c.List(ctx, &vms, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing VMs in %s: %w", ns, err)
	}
	s.VMs = vms.Items
	var vmi kubevirtv1.VirtualMachineInstance
	ok, err := getOptional(ctx, c, ns, name, &vmi)
	if err != nil {
		return nil, err
	}
	if ok {
		s.VMIs = append(s.VMIs, vmi)
	}
	for _, claim := range claimsOf(&s, volume) {
		var pvc corev1.PersistentVolumeClaim
		if ok, err := getOptional(ctx, c, ns, claim, &pvc); err != nil {
			return nil, err
		} else if ok {
			s.PVCs = append(s.PVCs, pvc)
		}
		var dv cdiv1.DataVolume
		if ok, err := getOptional(ctx, c, ns, claim, &dv); err != nil && !noKind(err) {
			return nil, err
		} else if ok {
			s.DataVolumes = append(s.DataVolumes, dv)
		}
	}
	return snapshot.New(s), nil
}

// noKind: the API is not installed (no CDI): there are no DataVolumes.
func noKind(err error) bool {
	var nm *meta.NoKindMatchError
	return errors.As(err, &nm) || meta.IsNoMatchError(err)
}

func getOptional(ctx context.Context, c client.Client, ns, name string, obj client.Object) (bool, error) {
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("reading %T %s/%s: %w", obj, ns, name, err)
}

// claimsOf returns every claim or DataVolume name the volume refers to in
// the VM specs, the VMI spec and the VMI status.
func claimsOf(s *snapshot.Snapshot, volume string) []string {
	var out []string
	add := func(n string) {
		for _, have := range out {
			if have == n {
				return
			}
		}
		if n != "" {
			out = append(out, n)
		}
	}
	for i := range s.VMs {
		add(snapshot.ClaimName(snapshot.VMVolume(&s.VMs[i], volume)))
	}
	for i := range s.VMIs {
		vmi := &s.VMIs[i]
		add(snapshot.ClaimName(snapshot.VMIVolume(vmi, volume)))
		for _, vs := range vmi.Status.VolumeStatus {
			if vs.Name == volume && vs.PersistentVolumeClaimInfo != nil {
				add(vs.PersistentVolumeClaimInfo.ClaimName)
			}
		}
	}
	return out
}

// danglingVersions fingerprints every object of a single-reference
// snapshot: a change to any of them between dry run and write refuses.
func danglingVersions(s *snapshot.Snapshot) string {
	var b strings.Builder
	b.WriteString(resourceVersions(s))
	for _, p := range s.PVCs {
		fmt.Fprintf(&b, " pvc:%s/%s", p.UID, p.ResourceVersion)
	}
	for _, d := range s.DataVolumes {
		fmt.Fprintf(&b, " dv:%s/%s", d.UID, d.ResourceVersion)
	}
	for _, p := range s.AttachmentPods {
		fmt.Fprintf(&b, " pod:%s/%s", p.UID, p.ResourceVersion)
	}
	return b.String()
}

// waitVMSpecDropped polls the VM until its template no longer lists the
// volume (with the HotplugVolumes gate the request is queued in the VM
// status first and applied by virt-controller).
func (e *Executor) waitVMSpecDropped(ctx context.Context, f check.Finding) Result {
	timeout, interval := e.WaitTimeout, e.PollInterval
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	for {
		var vm kubevirtv1.VirtualMachine
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Object.Name}, &vm)
		if apierrors.IsNotFound(err) || (err == nil && snapshot.VMVolume(&vm, f.Volume) == nil) {
			return Result{Outcome: Applied, Message: fmt.Sprintf("VM-level removevolume %q done; the dangling reference left the VM spec", f.Volume)}
		}
		if time.Now().After(deadline) {
			return Result{Outcome: Pending, Message: fmt.Sprintf("VM-level removevolume %q accepted, but the VM spec still lists the volume after %s", f.Volume, timeout)}
		}
		select {
		case <-ctx.Done():
			return Result{Outcome: Pending, Message: "stopped waiting: " + ctx.Err().Error(), Err: ctx.Err()}
		case <-time.After(interval):
		}
	}
}
