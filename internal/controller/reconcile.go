package controller

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/act"
	"github.com/tether-dev/tether/internal/check"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/snapshot"
)

// HotplugReconciler runs the hot-plug checks for one VMI at a time: it
// decides from the cache which findings are open and leaves their records
// and actions to records.
type HotplugReconciler struct {
	// Cache is the informer-backed client: reads are free.
	Cache client.Client
	// Records keeps the Finding records and acts.
	Records *records
	// Executor acts with live reads; it never uses the cache.
	Executor *act.Executor
	Policy   check.Policy
	// Tenants are the watched tenant clusters (their evidence).
	Tenants []*tenantWatch
}

// Reconcile handles one VMI, named by req.
func (r *HotplugReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t0 := time.Now()
	defer func() { metrics.ReconcileSeconds.Observe(time.Since(t0).Seconds()) }()
	now := r.Records.Now()

	var vmi kubevirtv1.VirtualMachineInstance
	if err := r.Cache.Get(ctx, req.NamespacedName, &vmi); err != nil {
		// A deleted VMI's records go with it (owner reference, garbage
		// collector); nothing to decide.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	snap, err := r.snapshotFor(ctx, &vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The snapshot holds only the VMI, its VM, the gates and the tenants:
	// checks that need more (claims, pods) would report falsely here.
	policy := r.Policy
	policy.Checks = config.ControllerChecks()
	current := map[string]check.Finding{}
	for _, f := range check.Run(snap, policy, now) {
		if f.Object.UID == vmi.UID && r.Records.Config.Enabled(f.Check) {
			current[f.ID] = f
		}
	}
	recs, err := r.records(ctx, &vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	var requeue time.Duration
	subj := vmiSubject(&vmi)
	for id, f := range current {
		after, err := r.Records.sync(ctx, r.Executor.Apply, subj, f, recs[id], now)
		if err != nil {
			return ctrl.Result{}, err
		}
		if after > 0 && (requeue == 0 || after < requeue) {
			requeue = after
		}
	}
	if err := r.Records.resolveGone(ctx, current, recs, now); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// snapshotFor builds the decision input for one VMI from the caches: the VMI,
// its owning VM, the KubeVirt feature gates and the tenants' attachments on
// the node named after the VMI.
func (r *HotplugReconciler) snapshotFor(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (*snapshot.Snapshot, error) {
	s := snapshot.Snapshot{VMIs: []kubevirtv1.VirtualMachineInstance{*vmi}}
	if owner := metav1.GetControllerOf(vmi); owner != nil && owner.Kind == "VirtualMachine" {
		var vm kubevirtv1.VirtualMachine
		err := r.Cache.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: owner.Name}, &vm)
		switch {
		case err == nil:
			s.VMs = []kubevirtv1.VirtualMachine{vm}
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	var kvs kubevirtv1.KubeVirtList
	if err := r.Cache.List(ctx, &kvs); err == nil && len(kvs.Items) > 0 {
		s.FeatureGates.Known = true
		if dc := kvs.Items[0].Spec.Configuration.DeveloperConfiguration; dc != nil {
			s.FeatureGates.Enabled, s.FeatureGates.Disabled = dc.FeatureGates, dc.DisabledFeatureGates
		}
	}
	for _, tw := range r.Tenants {
		if tw.applies(vmi.Namespace) {
			s.Tenants = append(s.Tenants, tw.evidence(vmi))
		}
	}
	return snapshot.New(s), nil
}

// records returns the VMI's Finding objects by finding id.
func (r *HotplugReconciler) records(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (map[string]*v1alpha1.Finding, error) {
	var list v1alpha1.FindingList
	if err := r.Cache.List(ctx, &list, client.InNamespace(vmi.Namespace), client.MatchingLabels{v1alpha1.LabelSubjectUID: string(vmi.UID)}); err != nil {
		return nil, err
	}
	out := make(map[string]*v1alpha1.Finding, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Spec.ID] = &list.Items[i]
	}
	return out, nil
}

// vmiSubject files a hot-plug finding under its VMI.
func vmiSubject(vmi *kubevirtv1.VirtualMachineInstance) subject {
	return subject{namespace: vmi.Namespace, owner: metav1.OwnerReference{
		APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID,
	}}
}
