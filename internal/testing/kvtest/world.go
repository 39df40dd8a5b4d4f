package kvtest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// World is one test's namespace on a world of real KubeVirt, with a
// client: what the suites on real KubeVirt (the emulated handler's and the
// real one's) share.
type World struct {
	T   *testing.T
	Env *testenv.Env
	NS  string
	C   client.Client
	// ClaimSize is the size of the claims Claims makes.
	ClaimSize string
	// PhaseTimeout bounds WaitPhase.
	PhaseTimeout time.Duration
}

// NewWorld makes the test's namespace in env and waits for its default
// ServiceAccount (ServiceAccount admission is on: pods wait for it).
func NewWorld(t *testing.T, env *testenv.Env, claimSize string, phaseTimeout time.Duration) *World {
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := &World{T: t, Env: env, NS: env.Namespace(t), C: c, ClaimSize: claimSize, PhaseTimeout: phaseTimeout}
	testenv.Eventually(t, 30*time.Second, "default service account", func() (bool, error) {
		var sa corev1.ServiceAccount
		return c.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: "default"}, &sa) == nil, nil
	})
	return w
}

// Claims creates claims of ClaimSize with access mode mode and waits
// until they are Bound.
func (w *World) Claims(mode corev1.PersistentVolumeAccessMode, names ...string) {
	w.T.Helper()
	for _, n := range names {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: w.NS},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{mode},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(w.ClaimSize)}},
			},
		}
		if err := w.C.Create(context.Background(), pvc); err != nil {
			w.T.Fatal(err)
		}
	}
	testenv.Eventually(w.T, 30*time.Second, "claims bound", func() (bool, error) {
		for _, n := range names {
			var pvc corev1.PersistentVolumeClaim
			if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: n}, &pvc); err != nil || pvc.Status.Phase != corev1.ClaimBound {
				return false, err
			}
		}
		return true, nil
	})
}

// VolumeStatus is the volume's status entry on the VMI (nil when it has
// none, or the VMI cannot be read).
func (w *World) VolumeStatus(vmi, vol string) *kubevirtv1.VolumeStatus {
	var v kubevirtv1.VirtualMachineInstance
	if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: vmi}, &v); err != nil {
		return nil
	}
	for i := range v.Status.VolumeStatus {
		if v.Status.VolumeStatus[i].Name == vol {
			return &v.Status.VolumeStatus[i]
		}
	}
	return nil
}

// Phase is the volume's status phase on the VMI ("" when it has no entry).
func (w *World) Phase(vmi, vol string) kubevirtv1.VolumePhase {
	if s := w.VolumeStatus(vmi, vol); s != nil {
		return s.Phase
	}
	return ""
}

// WaitPhase waits up to PhaseTimeout until the volume is in phase want.
func (w *World) WaitPhase(vmi, vol string, want kubevirtv1.VolumePhase) {
	w.T.Helper()
	testenv.Eventually(w.T, w.PhaseTimeout, fmt.Sprintf("volume %s of %s in phase %q", vol, vmi, want), func() (bool, error) {
		return w.Phase(vmi, vol) == want, nil
	})
}

// AddVolumeWith calls virt-api's addvolume on the given route.
func (w *World) AddVolumeWith(kind virtapi.Kind, name string, opts *kubevirtv1.AddVolumeOptions) {
	w.T.Helper()
	sub, err := virtapi.NewSubresourceClient(w.Env.Config)
	if err != nil {
		w.T.Fatal(err)
	}
	if err := virtapi.AddVolume(context.Background(), sub, kind, w.NS, name, opts); err != nil {
		w.T.Fatalf("addvolume %s via the %s route: %v", opts.Name, kind, err)
	}
}

// RemoveVolume calls virt-api's removevolume of claim on the given route.
func (w *World) RemoveVolume(kind virtapi.Kind, name, claim string) {
	w.T.Helper()
	sub, err := virtapi.NewSubresourceClient(w.Env.Config)
	if err != nil {
		w.T.Fatal(err)
	}
	if err := virtapi.RemoveVolume(context.Background(), sub, kind, w.NS, name, &kubevirtv1.RemoveVolumeOptions{Name: claim}); err != nil {
		w.T.Fatalf("removevolume %s via the %s route: %v", claim, kind, err)
	}
}

// AttachmentPods are the namespace's hot-plug attachment pods that mount
// volume vol.
func (w *World) AttachmentPods(vol string) []corev1.Pod {
	w.T.Helper()
	var list corev1.PodList
	if err := w.C.List(context.Background(), &list, client.InNamespace(w.NS), client.MatchingLabels{"kubevirt.io": "hotplug-disk"}); err != nil {
		w.T.Fatal(err)
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
		return !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vol })
	})
}

// SetRunStrategy patches the VM's run strategy.
func (w *World) SetRunStrategy(name string, s kubevirtv1.VirtualMachineRunStrategy) {
	w.T.Helper()
	w.PatchVM(name, `{"spec":{"runStrategy":"`+string(s)+`"}}`)
}

// PatchVM applies a JSON merge patch to the VM.
func (w *World) PatchVM(name, patch string) {
	w.T.Helper()
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS}}
	if err := w.C.Patch(context.Background(), vm, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		w.T.Fatal(err)
	}
}
