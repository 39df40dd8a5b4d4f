package realhandler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// world is one test's namespace on the real handler node.
type world struct {
	t   *testing.T
	env *testenv.Env
	ns  string
	c   client.Client
}

func newWorld(t *testing.T) *world {
	env := get(t)
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, env: env, ns: env.Namespace(t), c: c}
	testenv.Eventually(t, 30*time.Second, "default service account", func() (bool, error) {
		var sa corev1.ServiceAccount
		return c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: "default"}, &sa) == nil, nil
	})
	return w
}

// claims creates filesystem claims of 64Mi; the world's provisioner gives
// each a volume with a disk.img.
func (w *world) claims(names ...string) {
	for _, n := range names {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: w.ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
			},
		}
		if err := w.c.Create(context.Background(), pvc); err != nil {
			w.t.Fatal(err)
		}
	}
	testenv.Eventually(w.t, 30*time.Second, "claims bound", func() (bool, error) {
		for _, n := range names {
			var pvc corev1.PersistentVolumeClaim
			if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: n}, &pvc); err != nil || pvc.Status.Phase != corev1.ClaimBound {
				return false, err
			}
		}
		return true, nil
	})
}

// guestSpec is a VMI spec on the real node: the tiny guest booted from the
// kernel-boot image (its serial console reports the disks it sees), no pod
// network, 192Mi.
func (w *world) guestSpec() kubevirtv1.VirtualMachineInstanceSpec {
	img := w.env.Handler.GuestKernel
	if img == "" {
		w.t.Skip("the KubeVirt node build has no guest kernel image: run make kubevirt-node as root")
	}
	no := false
	return kubevirtv1.VirtualMachineInstanceSpec{
		NodeSelector: map[string]string{"kubernetes.io/hostname": w.env.Node.Name},
		Domain: kubevirtv1.DomainSpec{
			Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("192Mi")}},
			Firmware: &kubevirtv1.Firmware{KernelBoot: &kubevirtv1.KernelBoot{
				KernelArgs: "console=ttyS0 panic=-1 quiet",
				Container: &kubevirtv1.KernelBootContainer{Image: img, ImagePullPolicy: corev1.PullNever,
					KernelPath: "/boot/vmlinuz", InitrdPath: "/boot/initrd.img"},
			}},
			Devices: kubevirtv1.Devices{AutoattachPodInterface: &no},
		},
	}
}

// guest starts a standalone VMI and waits until its guest says it is up.
func (w *world) guest(name string) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns}, Spec: w.guestSpec()}
	if err := w.c.Create(context.Background(), vmi); err != nil {
		w.t.Fatal(err)
	}
	w.waitConsole(name, 90*time.Second, "TETHER-GUEST-UP")
}

// console is what the guest has written on its serial console, from the
// launcher's guest-console-log container (the node keeps its log).
func (w *world) console(vmi string) string {
	files, _ := filepath.Glob(filepath.Join(w.env.Node.LogDir(), "pods", w.ns+"_virt-launcher-"+vmi+"-*", "guest-console-log", "*.log"))
	return criText(files)
}

// criText is the text of CRI log files: each line is "time stream tag text".
func criText(files []string) string {
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(data), "\n") {
			if parts := strings.SplitN(line, " ", 4); len(parts) == 4 {
				b.WriteString(parts[3] + "\n")
			}
		}
	}
	return b.String()
}

// waitConsole waits until the guest's console has a line matching pattern.
func (w *world) waitConsole(vmi string, timeout time.Duration, pattern string) {
	w.t.Helper()
	re := regexp.MustCompile(pattern)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if re.MatchString(w.console(vmi)) {
			return
		}
		var v kubevirtv1.VirtualMachineInstance
		if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: vmi}, &v); err == nil && v.Status.Phase == kubevirtv1.Failed {
			w.t.Fatalf("VMI %s failed waiting for %q on its console\n%s", vmi, pattern, podLogs(w.env, w.ns, "virt-launcher-"+vmi))
		}
		time.Sleep(time.Second)
	}
	w.t.Fatalf("the guest of %s did not say %q in %s; its console:\n%s\nlauncher:\n%s\nVMI: %+v\n%s", vmi, pattern, timeout, w.console(vmi), podLogs(w.env, w.ns, "virt-launcher-"+vmi), w.vmi(vmi).Status, w.pods())
}

func (w *world) vmi(name string) *kubevirtv1.VirtualMachineInstance {
	var v kubevirtv1.VirtualMachineInstance
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: name}, &v); err != nil {
		w.t.Fatal(err)
	}
	return &v
}

func (w *world) phase(name, vol string) kubevirtv1.VolumePhase {
	for _, s := range w.vmi(name).Status.VolumeStatus {
		if s.Name == vol {
			return s.Phase
		}
	}
	return ""
}

func (w *world) waitPhase(name, vol string, want kubevirtv1.VolumePhase) {
	w.t.Helper()
	testenv.Eventually(w.t, 2*time.Minute, fmt.Sprintf("volume %s of %s in phase %q", vol, name, want), func() (bool, error) {
		return w.phase(name, vol) == want, nil
	})
}

func (w *world) addVolume(kind virtapi.Kind, name, claim string) {
	w.t.Helper()
	sub, err := virtapi.NewSubresourceClient(w.env.Config)
	if err != nil {
		w.t.Fatal(err)
	}
	// The disk's serial is the claim's name (virtctl addvolume --serial),
	// which the guest reads back.
	opts := fixture.AddVolumeOptions(claim)
	opts.Disk.Serial = claim
	if err := virtapi.AddVolume(context.Background(), sub, kind, w.ns, name, opts); err != nil {
		w.t.Fatalf("addvolume %s via the %s route: %v", claim, kind, err)
	}
}

func (w *world) removeVolume(kind virtapi.Kind, name, claim string) {
	w.t.Helper()
	sub, err := virtapi.NewSubresourceClient(w.env.Config)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := virtapi.RemoveVolume(context.Background(), sub, kind, w.ns, name, &kubevirtv1.RemoveVolumeOptions{Name: claim}); err != nil {
		w.t.Fatalf("removevolume %s via the %s route: %v", claim, kind, err)
	}
}
