package testenv

import (
	"context"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
)

// VMI returns the VirtualMachineInstance ns/name, or nil when it cannot be
// read (not there yet, or gone).
func (e *Env) VMI(ns, name string) *kubevirtv1.VirtualMachineInstance {
	c, err := clients.New(e.Config)
	if err != nil {
		return nil
	}
	var vmi kubevirtv1.VirtualMachineInstance
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &vmi); err != nil {
		return nil
	}
	return &vmi
}

// WaitVMI polls until the VMI ns/name exists and cond holds (30s at most).
func (e *Env) WaitVMI(t testing.TB, ns, name, what string, cond func(*kubevirtv1.VirtualMachineInstance) bool) {
	t.Helper()
	Eventually(t, 30*time.Second, name+" "+what, func() (bool, error) {
		vmi := e.VMI(ns, name)
		return vmi != nil && cond(vmi), nil
	})
}
