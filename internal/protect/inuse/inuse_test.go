package inuse_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

func pvcRef(name string) inuse.Ref {
	return inuse.Ref{Kind: inuse.KindPVC, Namespace: fixture.Namespace, Name: name}
}

func stopped(vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachine {
	halted := kubevirtv1.RunStrategyHalted
	vm.Spec.RunStrategy = &halted
	return vm
}

func withFinalizer(o metav1.Object) {
	o.SetFinalizers(append(o.GetFinalizers(), inuse.Finalizer))
}

func deleting(o metav1.Object) {
	t := metav1.NewTime(fixture.Epoch().Add(time.Hour))
	o.SetDeletionTimestamp(&t)
}

func TestDependents(t *testing.T) {
	vm := fixture.VM("vm", fixture.WithVolume("disk", fixture.PVC("claim")), fixture.WithVolume("dv", fixture.DataVolume("data")))
	vm.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root"}}}
	vm.Spec.Instancetype = &kubevirtv1.InstancetypeMatcher{Name: "u1.small", RevisionName: "vm-u1.small-1"}
	vm.Spec.Preference = &kubevirtv1.PreferenceMatcher{Name: "fedora"}
	vm.Status.PreferenceRef = &kubevirtv1.InstancetypeStatusRef{ControllerRevisionRef: &kubevirtv1.ControllerRevisionRef{Name: "vm-fedora-1"}}
	vm.Status.InstancetypeRef = &kubevirtv1.InstancetypeStatusRef{ControllerRevisionRef: &kubevirtv1.ControllerRevisionRef{Name: "vm-u1.small-1"}}
	// An ephemeral disk backed by a claim, and a memory-dump volume, use
	// their claims too.
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes,
		kubevirtv1.Volume{Name: "scratch", VolumeSource: kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "base"}}}},
		kubevirtv1.Volume{Name: "dump", VolumeSource: kubevirtv1.VolumeSource{MemoryDump: &kubevirtv1.MemoryDumpVolumeSource{
			PersistentVolumeClaimVolumeSource: kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "dump-1"}}}}})
	got := inuse.DependentsOf(vm)
	ns := fixture.Namespace
	want := []inuse.Ref{
		{Kind: inuse.KindControllerRevision, Namespace: ns, Name: "vm-fedora-1"},
		{Kind: inuse.KindControllerRevision, Namespace: ns, Name: "vm-u1.small-1"},
		// A claim may be a DataVolume's PVC: the DataVolume of that name is
		// protected too (absent ones cost nothing).
		{Kind: inuse.KindDataVolume, Namespace: ns, Name: "claim"},
		{Kind: inuse.KindDataVolume, Namespace: ns, Name: "data"},
		{Kind: inuse.KindDataVolume, Namespace: ns, Name: "root"},
		{Kind: inuse.KindPVC, Namespace: ns, Name: "base"},
		{Kind: inuse.KindPVC, Namespace: ns, Name: "claim"},
		{Kind: inuse.KindPVC, Namespace: ns, Name: "data"},
		{Kind: inuse.KindPVC, Namespace: ns, Name: "dump-1"},
		{Kind: inuse.KindPVC, Namespace: ns, Name: "root"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Dependents\n got %v\nwant %v", got, want)
	}
	if d := inuse.DependentsOf(fixture.VM("empty")); len(d) != 0 {
		t.Errorf("a VM without volumes has dependents %v", d)
	}
}

// TestDecide: table named "state -> outcome". Each case gives the VMs as the
// reader sees them; the "late informer" cases show what the cache alone
// would conclude and why the live read must confirm a release.
func TestDecide(t *testing.T) {
	ref := pvcRef("claim")
	usesClaim := func(name string, opts ...fixture.Option) kubevirtv1.VirtualMachine {
		return *stopped(fixture.VM(name, append([]fixture.Option{fixture.WithVolume("disk", fixture.PVC("claim"))}, opts...)...))
	}
	other := *fixture.VM("other", fixture.WithVolume("disk", fixture.PVC("another")))
	pvc := func(mut ...func(metav1.Object)) *corev1.PersistentVolumeClaim {
		p := fixture.PVC("claim")
		for _, m := range mut {
			m(p)
		}
		return p
	}
	terminatingVM := usesClaim("vm", fixture.Terminating(fixture.Epoch()))
	ownedPVC := func(o metav1.Object) {
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "vm", UID: terminatingVM.UID}})
	}
	cases := []struct {
		name   string
		obj    *corev1.PersistentVolumeClaim
		vms    []kubevirtv1.VirtualMachine
		nsTerm bool
		want   inuse.Decision
		users  []string
	}{
		{name: "referenced only by a stopped VM -> add", obj: pvc(), vms: []kubevirtv1.VirtualMachine{usesClaim("vm"), other}, want: inuse.Add, users: []string{"vm"}},
		{name: "referenced and protected -> none", obj: pvc(withFinalizer), vms: []kubevirtv1.VirtualMachine{usesClaim("vm")}, want: inuse.None, users: []string{"vm"}},
		// A candidate only: ReleaseTiming keeps it until the deletion.
		{name: "VM deleted -> release candidate", obj: pvc(withFinalizer), vms: []kubevirtv1.VirtualMachine{other}, want: inuse.Release},
		{name: "reference moved to another VM -> still protected", obj: pvc(withFinalizer), vms: []kubevirtv1.VirtualMachine{*fixture.VM("vm"), usesClaim("vm2")}, want: inuse.None, users: []string{"vm2"}},
		{name: "deletion requested while in use -> postpone", obj: pvc(withFinalizer, deleting), vms: []kubevirtv1.VirtualMachine{usesClaim("vm"), usesClaim("vm2")}, want: inuse.Postpone, users: []string{"vm", "vm2"}},
		{name: "deletion requested, no user -> release", obj: pvc(withFinalizer, deleting), want: inuse.Release},
		{name: "deleting without finalizer -> none (cannot add)", obj: pvc(deleting), vms: []kubevirtv1.VirtualMachine{usesClaim("vm")}, want: inuse.None, users: []string{"vm"}},
		{name: "unused and unprotected -> none", obj: pvc(), vms: []kubevirtv1.VirtualMachine{other}, want: inuse.None},
		{name: "namespace terminating -> release", obj: pvc(withFinalizer, deleting), vms: []kubevirtv1.VirtualMachine{usesClaim("vm")}, nsTerm: true, want: inuse.Release, users: []string{"vm"}},
		{name: "namespace terminating, no finalizer -> none", obj: pvc(), vms: []kubevirtv1.VirtualMachine{usesClaim("vm")}, nsTerm: true, want: inuse.None, users: []string{"vm"}},
		{name: "terminating VM, not the owner -> still protected", obj: pvc(withFinalizer, deleting), vms: []kubevirtv1.VirtualMachine{terminatingVM}, want: inuse.Postpone, users: []string{"vm"}},
		{name: "terminating VM owns it (foreground deletion) -> release", obj: pvc(withFinalizer, deleting, ownedPVC), vms: []kubevirtv1.VirtualMachine{terminatingVM}, want: inuse.Release},
		{name: "VM in another namespace -> not a user", obj: pvc(), vms: []kubevirtv1.VirtualMachine{usesClaim("vm", fixture.InNamespace("elsewhere"))}, want: inuse.None},
		{name: "other finalizers kept in mind -> add", obj: pvc(func(o metav1.Object) { o.SetFinalizers([]string{"kubernetes.io/pvc-protection"}) }), vms: []kubevirtv1.VirtualMachine{usesClaim("vm")}, want: inuse.Add, users: []string{"vm"}},
		// Late informer: the cache has not seen the new user yet. The cache
		// alone says "release"; the live list (second row) says "postpone".
		{name: "late informer: cache without the new VM -> release candidate", obj: pvc(withFinalizer, deleting), vms: []kubevirtv1.VirtualMachine{other}, want: inuse.Release},
		{name: "late informer: live list with the new VM -> postpone", obj: pvc(withFinalizer, deleting), vms: []kubevirtv1.VirtualMachine{other, usesClaim("new")}, want: inuse.Postpone, users: []string{"new"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			users := inuse.Users(ref, c.obj, snapshot.VMsOf(c.vms...))
			if !slices.Equal(users, c.users) {
				t.Errorf("users %v, want %v", users, c.users)
			}
			if got := inuse.Decide(c.obj, users, c.nsTerm); got != c.want {
				t.Errorf("Decide = %s, want %s", got, c.want)
			}
			if !c.nsTerm {
				if got := inuse.NeedToAddFinalizer(c.obj, users); got != (c.want == inuse.Add) {
					t.Errorf("NeedToAddFinalizer = %v", got)
				}
				if got := inuse.IsReleaseCandidate(c.obj, users); got != (c.want == inuse.Release) {
					t.Errorf("IsReleaseCandidate = %v", got)
				}
			}
		})
	}
}

// TestReleaseTiming: "state -> outcome".
func TestReleaseTiming(t *testing.T) {
	at := fixture.Epoch()
	obj := func(deleted bool) metav1.Object {
		p := fixture.PVC("claim")
		withFinalizer(p)
		if deleted {
			p.DeletionTimestamp = &metav1.Time{Time: at}
		}
		return p
	}
	cases := []struct {
		name    string
		deleted bool
		now     time.Time
		delay   time.Duration
		release bool
		wait    time.Duration
	}{
		{name: "not being deleted -> keep, until it changes", now: at.Add(time.Hour), delay: 10 * time.Second},
		{name: "not being deleted, no delay -> keep", now: at},
		{name: "being deleted, no delay -> release", deleted: true, now: at, release: true},
		{name: "just deleted -> wait the delay plus the timestamp's second", deleted: true, now: at, delay: 10 * time.Second, wait: 11 * time.Second},
		{name: "half-way -> wait the rest", deleted: true, now: at.Add(6 * time.Second), delay: 10 * time.Second, wait: 5 * time.Second},
		{name: "delay passed -> release", deleted: true, now: at.Add(11 * time.Second), delay: 10 * time.Second, release: true},
		{name: "controller clock behind -> longer wait", deleted: true, now: at.Add(-2 * time.Second), delay: 10 * time.Second, wait: 13 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			release, wait := inuse.ReleaseTiming(obj(c.deleted), c.now, c.delay)
			if release != c.release || wait != c.wait {
				t.Errorf("ReleaseTiming = %v, %s; want %v, %s", release, wait, c.release, c.wait)
			}
		})
	}
}
