package realhandler

import (
	"context"
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

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/kvtest"
)

// world is one test's namespace on the real handler node.
type world struct{ *kvtest.World }

// newWorld makes the test's world: claims of 64Mi (the provisioner gives
// each a volume with a disk.img), phases awaited up to two minutes.
func newWorld(t *testing.T) *world {
	return &world{kvtest.NewWorld(t, get(t), "64Mi", 2*time.Minute)}
}

// claims creates ReadWriteOnce claims and waits until they are Bound.
func (w *world) claims(names ...string) { w.Claims(corev1.ReadWriteOnce, names...) }

// guestSpec is a VMI spec on the real node: the tiny guest booted from the
// kernel-boot image (its serial console reports the disks it sees), no pod
// network, 192Mi.
func (w *world) guestSpec() kubevirtv1.VirtualMachineInstanceSpec {
	img := w.Env.Handler.GuestKernel
	if img == "" {
		w.T.Skip("the KubeVirt node build has no guest kernel image: run make kubevirt-node as root")
	}
	no := false
	return kubevirtv1.VirtualMachineInstanceSpec{
		NodeSelector: map[string]string{"kubernetes.io/hostname": w.Env.Node.Name},
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
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS}, Spec: w.guestSpec()}
	if err := w.C.Create(context.Background(), vmi); err != nil {
		w.T.Fatal(err)
	}
	w.waitConsole(name, 90*time.Second, "TETHER-GUEST-UP")
}

// console is what the guest has written on its serial console, from the
// launcher's guest-console-log container (the node keeps its log).
func (w *world) console(vmi string) string {
	files, _ := filepath.Glob(filepath.Join(w.Env.Node.LogDir(), "pods", w.NS+"_virt-launcher-"+vmi+"-*", "guest-console-log", "*.log"))
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
	w.T.Helper()
	re := regexp.MustCompile(pattern)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if re.MatchString(w.console(vmi)) {
			return
		}
		var v kubevirtv1.VirtualMachineInstance
		if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: vmi}, &v); err == nil && v.Status.Phase == kubevirtv1.Failed {
			w.T.Fatalf("VMI %s failed waiting for %q on its console\n%s", vmi, pattern, podLogs(w.Env, w.NS, "virt-launcher-"+vmi))
		}
		time.Sleep(time.Second)
	}
	w.T.Fatalf("the guest of %s did not say %q in %s; its console:\n%s\nlauncher:\n%s\nVMI: %+v\n%s", vmi, pattern, timeout, w.console(vmi), podLogs(w.Env, w.NS, "virt-launcher-"+vmi), w.vmi(vmi).Status, w.pods())
}

func (w *world) vmi(name string) *kubevirtv1.VirtualMachineInstance {
	var v kubevirtv1.VirtualMachineInstance
	if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: name}, &v); err != nil {
		w.T.Fatal(err)
	}
	return &v
}

func (w *world) addVolume(kind virtapi.Kind, name, claim string) {
	w.T.Helper()
	// The disk's serial is the claim's name (virtctl addvolume --serial),
	// which the guest reads back.
	opts := fixture.AddVolumeOptions(claim)
	opts.Disk.Serial = claim
	w.AddVolumeWith(kind, name, opts)
}
