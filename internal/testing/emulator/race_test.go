package emulator_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tether-dev/tether/internal/kubevirt"
	"github.com/tether-dev/tether/internal/testing/emulator"
)

// Concurrent calls on one VMI race as they do against virt-api: each is
// one JSON patch testing the volumes it read (volumes.go:350-404), so a
// call that read a stale list fails with the API server's 422 (k8s.io/
// apiserver handlers/patch.go:412-415) instead of being retried, and no
// accepted change is lost.
func TestConcurrentCalls_loserGets422_noLostUpdate(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	if err := e.emu.SetFeatureGates(ctx, emulator.GateHotplugVolumes); err != nil {
		t.Fatal(err)
	}
	ns := e.namespace(t)
	e.vm(t, ns, "vm1")
	e.runningVMI(t, ns, "vm1")
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("race%d", i)
		e.pvc(t, ns, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = kubevirt.AddVolume(ctx, e.sub, kubevirt.VMI, ns, "vm1", addOpts(name, name))
		}()
	}
	wg.Wait()
	accepted, lost := map[string]bool{}, 0
	for i, err := range errs {
		switch {
		case err == nil:
			accepted[fmt.Sprintf("race%d", i)] = true
		case apierrors.IsInvalid(err) && strings.Contains(err.Error(), "the server rejected our request due to an error in our request"):
			lost++
		default:
			t.Errorf("call %d: %v, want 202 or a 422 race", i, err)
		}
	}
	vmi := e.getVMI(t, ns, "vm1")
	for _, v := range vmi.Spec.Volumes {
		if strings.HasPrefix(v.Name, "race") && !accepted[v.Name] {
			t.Errorf("volume %s in the VMI spec, but its call was refused", v.Name)
		}
		delete(accepted, v.Name)
	}
	if len(accepted) != 0 {
		t.Errorf("accepted calls lost: %v", accepted)
	}
	t.Logf("%d of %d calls lost the race", lost, n)
}
