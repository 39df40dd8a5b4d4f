package emulator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/emulator"
)

func TestDryRunChangesNothing(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	if err := e.emu.SetFeatureGates(ctx, emulator.GateHotplugVolumes); err != nil {
		t.Fatal(err)
	}
	ns := e.namespace(t)
	e.vm(t, ns, "vm1")
	e.pvc(t, ns, "data1")
	e.runningVMI(t, ns, "vm1")
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", addOpts("data1", "data1")); err != nil {
		t.Fatal(err)
	}
	e.attached(t, ns, "vm1", "data1", "data1")
	eventually(t, 2*time.Second, func() error {
		if n := len(e.getVM(t, ns, "vm1").Status.VolumeRequests); n != 0 {
			return fmt.Errorf("%d volume requests pending", n)
		}
		return nil
	})
	time.Sleep(100 * time.Millisecond) // let the controller settle
	vmRV, vmiRV := e.getVM(t, ns, "vm1").ResourceVersion, e.getVMI(t, ns, "vm1").ResourceVersion

	e.pvc(t, ns, "data2")
	calls := []struct {
		name string
		call func() error
	}{
		{"VM addvolume", func() error {
			o := addOpts("data2", "data2")
			o.DryRun = virtapi.DryRunAll
			return virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", o)
		}},
		{"VM removevolume", func() error {
			return virtapi.RemoveVolume(ctx, e.sub, virtapi.VM, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "data1", DryRun: virtapi.DryRunAll})
		}},
		{"VMI addvolume", func() error {
			o := addOpts("data2", "data2")
			o.DryRun = virtapi.DryRunAll
			return virtapi.AddVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", o)
		}},
		{"VMI removevolume", func() error {
			return virtapi.RemoveVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "data1", DryRun: virtapi.DryRunAll})
		}},
	}
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Errorf("%s dry run: %v", c.name, err)
		}
	}
	consistently(t, 300*time.Millisecond, func() error {
		if rv := e.getVM(t, ns, "vm1").ResourceVersion; rv != vmRV {
			return fmt.Errorf("dry run changed the VM (resourceVersion %s -> %s)", vmRV, rv)
		}
		if rv := e.getVMI(t, ns, "vm1").ResourceVersion; rv != vmiRV {
			return fmt.Errorf("dry run changed the VMI (resourceVersion %s -> %s)", vmiRV, rv)
		}
		return nil
	})

	// A dry run still validates.
	err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "nope", DryRun: virtapi.DryRunAll})
	if !apierrors.IsConflict(err) {
		t.Errorf("dry-run removevolume of a missing volume: %v, want 409", err)
	}
	err = virtapi.RemoveVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "data1", DryRun: []string{"Some"}})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("unsupported dryRun value: %v, want 400", err)
	}
}

func TestErrorsAreKubeVirtLike(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.vm(t, ns, "vm1")
	e.pvc(t, ns, "data1")
	e.runningVMI(t, ns, "vm1")
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", addOpts("data1", "data1")); err != nil {
		t.Fatal(err)
	}
	e.attached(t, ns, "vm1", "data1", "data1")
	rm := func(kind virtapi.Kind, name, vol string) error {
		return virtapi.RemoveVolume(ctx, e.sub, kind, ns, name, &virtv1.RemoveVolumeOptions{Name: vol})
	}
	cases := []struct {
		name  string
		err   error
		check func(error) bool
		msg   string
	}{
		{"missing VM -> 404", rm(virtapi.VM, "ghost", "data1"), apierrors.IsNotFound, `virtualmachine.kubevirt.io "ghost" not found`},
		{"missing VMI -> 404", rm(virtapi.VMI, "ghost", "data1"), apierrors.IsNotFound, `virtualmachineinstance.kubevirt.io "ghost" not found`},
		{"unknown volume -> 409", rm(virtapi.VM, "vm1", "nope"), apierrors.IsConflict, "Unable to remove volume [nope] because it does not exist"},
		{"boot volume -> 409", rm(virtapi.VM, "vm1", "rootdisk"), apierrors.IsConflict, "Unable to remove volume [rootdisk] because it is not hotpluggable"},
		{"duplicate name -> 409", virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", addOpts("data1", "other")), apierrors.IsConflict,
			"Unable to add volume [data1] because volume with that name already exists"},
		{"duplicate claim -> 409", virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", addOpts("again", "data1")), apierrors.IsConflict,
			"Unable to add volume source [data1] because it already exists"},
		{"no disk -> 400", virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", &virtv1.AddVolumeOptions{Name: "x", VolumeSource: addOpts("x", "x").VolumeSource}),
			apierrors.IsBadRequest, "AddVolumeOptions requires disk to not be nil"},
		{"no name -> 400", rm(virtapi.VM, "vm1", ""), apierrors.IsBadRequest, "RemoveVolumeOptions requires name to be set"},
	}
	for _, c := range cases {
		if !c.check(c.err) {
			t.Errorf("%s: got %v", c.name, c.err)
			continue
		}
		if !strings.Contains(c.err.Error(), c.msg) {
			t.Errorf("%s: message %q does not contain %q", c.name, c.err.Error(), c.msg)
		}
	}

	// A malformed body.
	err := e.sub.Put().Namespace(ns).Resource("virtualmachines").Name("vm1").SubResource("removevolume").
		SetHeader("Content-Type", "application/json").Body([]byte(`{"name": 7`)).Do(ctx).Error()
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "Can not unmarshal Request body to struct") {
		t.Errorf("malformed body: %v, want 400", err)
	}

	// A VMI that is not running: a paused standalone VMI never starts.
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle",
		Annotations: map[string]string{emulator.PausedAnnotation: "true"}}}
	if err := e.cl.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	err = virtapi.AddVolume(ctx, e.sub, virtapi.VMI, ns, "idle", addOpts("data1", "data1"))
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "VMI is not running") {
		t.Errorf("VMI not running: %v, want 409 VMI is not running", err)
	}

	// Both gates off: the API is disabled.
	if err := e.emu.SetDisabledFeatureGates(ctx, emulator.GateDeclarativeHotplugVolumes); err != nil {
		t.Fatal(err)
	}
	err = rm(virtapi.VM, "vm1", "data1")
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "Enable DeclarativeHotplugVolumes or HotplugVolumes feature gate") {
		t.Errorf("gates off: %v, want 400", err)
	}
}

func TestMigratingVMIAcceptsVolumeCallsAndMoves(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	if err := e.emu.SetFeatureGates(ctx, emulator.GateHotplugVolumes); err != nil {
		t.Fatal(err)
	}
	ns := e.namespace(t)
	e.vm(t, ns, "vm1")
	e.pvc(t, ns, "data1")
	e.runningVMI(t, ns, "vm1")
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", addOpts("data1", "data1")); err != nil {
		t.Fatal(err)
	}
	_, oldPod := e.attached(t, ns, "vm1", "data1", "data1")

	mig := &virtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mig1"},
		Spec:       virtv1.VirtualMachineInstanceMigrationSpec{VMIName: "vm1"},
	}
	if err := e.cl.Create(ctx, mig); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, func() error {
		vmi := e.getVMI(t, ns, "vm1")
		if s := vmi.Status.MigrationState; s == nil || s.Completed || s.SourceNode != "node-1" || s.TargetNode != "node-2" || s.MigrationUID != mig.UID || s.StartTimestamp == nil {
			return fmt.Errorf("migration state %+v", vmi.Status.MigrationState)
		}
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(mig), mig); err != nil {
			return err
		}
		if mig.Status.Phase != virtv1.MigrationRunning {
			return fmt.Errorf("migration phase %q", mig.Status.Phase)
		}
		return nil
	})
	// virt-api has no migration check of its own (volumes.go:184-244): the
	// VMI route accepts (202; a dry run here keeps the volume). Under
	// HotplugVolumes the VM route's status write is denied by the VM webhook
	// while the VM is ready (vms-admitter.go:325-338,450-456): 422.
	dry := &virtv1.RemoveVolumeOptions{Name: "data1", DryRun: virtapi.DryRunAll}
	if err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", dry); err != nil {
		t.Errorf("VMI removevolume while migrating: %v, want 202", err)
	}
	err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VM, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "data1"})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Cannot handle volume requests while VMI migration is in progress") {
		t.Errorf("VM removevolume while migrating (HotplugVolumes): %v, want 422", err)
	}
	// The declarative VM route changes the template whatever the VMI does.
	if err := e.emu.SetFeatureGates(ctx); err != nil {
		t.Fatal(err)
	}
	if err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VM, ns, "vm1", dry); err != nil {
		t.Errorf("declarative VM removevolume while migrating: %v, want 202", err)
	}
	if err := e.emu.SetFeatureGates(ctx, emulator.GateHotplugVolumes); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	eventually(t, migrationDuration+3*time.Second, func() error {
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(mig), mig); err != nil {
			return err
		}
		vmi := e.getVMI(t, ns, "vm1")
		if mig.Status.Phase != virtv1.MigrationSucceeded || vmi.Status.NodeName != "node-2" ||
			vmi.Status.MigrationState == nil || !vmi.Status.MigrationState.Completed || vmi.Status.MigrationState.EndTimestamp == nil {
			return fmt.Errorf("migration %q, VMI node %q state %+v", mig.Status.Phase, vmi.Status.NodeName, vmi.Status.MigrationState)
		}
		return nil
	})
	if took := time.Since(started); took < migrationDuration/2 {
		t.Errorf("migration finished after %s, want about %s", took, migrationDuration)
	}
	// The volume follows the VMI: a new attachment pod on the target node.
	_, newPod := e.attached(t, ns, "vm1", "data1", "data1")
	eventually(t, 2*time.Second, func() error {
		pods := e.attachmentPods(t, ns)
		if len(pods) != 1 || pods[0].Spec.NodeName != "node-2" || pods[0].Name == oldPod.Name {
			return fmt.Errorf("attachment pods after migration: %d (old %s, new %s)", len(pods), oldPod.Name, newPod.Name)
		}
		return nil
	})
	if err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "data1"}); err != nil {
		t.Errorf("removevolume after the migration: %v", err)
	}
}

func TestRBACIsEnforcedByTheAPIServer(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.pvc(t, ns, "data1")
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "solo"}}
	if err := e.cl.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	e.runningVMI(t, ns, "solo")
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VMI, ns, "solo", addOpts("data1", "data1")); err != nil {
		t.Fatal(err)
	}
	e.attached(t, ns, "solo", "data1", "data1")

	// The service account "cleaner", impersonated by the admin.
	cfg := rest.CopyConfig(e.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":cleaner",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	sa, err := virtapi.NewSubresourceClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	remove := func(dryRun bool) error {
		o := &virtv1.RemoveVolumeOptions{Name: "data1"}
		if dryRun {
			o.DryRun = virtapi.DryRunAll
		}
		return virtapi.RemoveVolume(ctx, sa, virtapi.VMI, ns, "solo", o)
	}
	if err := remove(true); !apierrors.IsForbidden(err) {
		t.Fatalf("without a role: %v, want 403 Forbidden from the apiserver", err)
	}

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "volume-remover"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"subresources.kubevirt.io"},
			Resources: []string{"virtualmachineinstances/removevolume"},
			Verbs:     []string{"update"},
		}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "volume-remover"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "cleaner", Namespace: ns}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := e.cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, func() error { return remove(true) })
	if err := remove(false); err != nil {
		t.Fatal(err)
	}
	e.detached(t, ns, "solo", "data1")
	// The role does not cover addvolume.
	if err := virtapi.AddVolume(ctx, sa, virtapi.VMI, ns, "solo", addOpts("data1", "data1")); !apierrors.IsForbidden(err) {
		t.Errorf("addvolume with a removevolume-only role: %v, want 403", err)
	}
}
